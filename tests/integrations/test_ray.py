"""Ray Train on tpu, unpatched: TorchTrainer with TorchConfig(backend="tpu_dist")
calls `torch_tpu._loader.load()` before `init_process_group("tpu_dist")`
(ray/air/_internal/device_manager/tpu.py). Two workers train a model with DDP
on tpu and end with the same weights, which are those of one CPU process
training on both workers' batches together (what DDP over gloo on CPU
computes).

Ray picks a worker's torch device from the accelerators it was assigned: a
worker holding Ray's "TPU" resource gets `torch.device("tpu")` from
`ray.train.torch.get_device()`, any other gets cpu. Ray counts a node's TPUs
from /dev/accel* (or VFIO groups of Google's PCI vendor); on a machine
without them the "TPU" resource is declared, `ray.init(resources={"TPU": 2})`,
as the test does.

The job runs in its own process session under a hard timeout
(tests/distributed_launch.py): a hung worker cannot stall the suite.
"""

import os
import sys

import pytest
import torch

pytest.importorskip("ray.train.torch", reason="Ray Train is an optional extra: pip install torch_tpu[ray]")

from distributed_launch import run_session  # noqa: E402
from repo_paths import ROOT  # noqa: E402

WORKERS = 2
STEPS = 3
BATCH = 8  # per worker


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(WORKERS * BATCH, 6, generator=g), torch.randn(WORKERS * BATCH, 3, generator=g)


def _train_loop(config):
    """One Ray Train worker: its part of the batch, DDP on tpu."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    # Compared with CPU at full float32 matmul precision, as every test is (tests/conftest.py).
    torch.set_float32_matmul_precision("highest")
    rank = ray.train.get_context().get_world_rank()
    if config["tpu_resource"]:
        model = ray.train.torch.prepare_model(_model())  # to get_device(), which is tpu
    else:
        model = ray.train.torch.prepare_model(_model(), move_to_device=torch.device("tpu"))
    device = next(model.parameters()).device
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _data()
    x, y = x[rank * BATCH : (rank + 1) * BATCH].to(device), y[rank * BATCH : (rank + 1) * BATCH].to(device)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    result = {
        "get_device": str(ray.train.torch.get_device()),
        "parameter_device": str(device),
        "backend": dist.get_backend(),
        "ddp": type(model).__name__,
        "weights": {k: v.detach().cpu() for k, v in model.module.state_dict().items()},
    }
    torch.save(result, os.path.join(config["out"], f"rank{rank}.pt"))


def _run_trainer(out, tpu_resource):
    """The driver, in its own process: a local Ray with 2 CPUs (and, with
    `tpu_resource`, 2 of Ray's "TPU" resource, one per worker)."""
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.train.v2._internal.constants import is_v2_enabled

    per_worker = {"CPU": 1, "TPU": 1} if tpu_resource else {"CPU": 1}
    # Train v1's trainer actor takes a CPU of its own unless told otherwise;
    # the workers take both.
    trainer_resources = {} if is_v2_enabled() else {"trainer_resources": {"CPU": 0}}
    ray.init(num_cpus=WORKERS, resources={"TPU": WORKERS} if tpu_resource else None, include_dashboard=False)
    try:
        trainer = TorchTrainer(
            _train_loop,
            train_loop_config={"out": out, "tpu_resource": tpu_resource},
            scaling_config=ScalingConfig(num_workers=WORKERS, resources_per_worker=per_worker, **trainer_resources),
            torch_config=TorchConfig(backend="tpu_dist"),
            run_config=RunConfig(storage_path=os.path.join(out, "ray_results"), name="tpu_dist"),
        )
        trainer.fit()
    finally:
        ray.shutdown()


def _cpu_reference():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _data()
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model.state_dict()


def _train_on_ray(out, train_v2, tpu_resource):
    """Rank 0's and rank 1's results of `_run_trainer`, run in a process
    session of its own under a hard timeout."""
    # RAY_AUTH_MODE: a local cluster of the test's own, without a token written to ~/.ray.
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", RAY_AUTH_MODE="disabled")
    env["RAY_TRAIN_V2_ENABLED"] = "1" if train_v2 else "0"
    env.pop("TORCH_TPU_NUM_DEVICES", None)
    # Run as a script from tests/integrations/, it imports tests/'s shared modules.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "tests"), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.abspath(__file__), str(out), "tpu" if tpu_resource else "cpu"]
    returncode, output = run_session(cmd, env, 300, "Ray's TorchTrainer on 2 workers")
    assert returncode == 0, output[-6000:]
    return [torch.load(out / f"rank{r}.pt") for r in range(WORKERS)]


def _check_trained_as_one_cpu_process(ranks):
    for rank in ranks:
        assert rank["parameter_device"] == "tpu:0", rank
        assert rank["backend"] == "tpu_dist" and rank["ddp"] == "DistributedDataParallel", rank
    reference = _cpu_reference()
    for name, weight in reference.items():
        torch.testing.assert_close(ranks[1]["weights"][name], ranks[0]["weights"][name], rtol=0, atol=0, msg=name)
        torch.testing.assert_close(ranks[0]["weights"][name], weight, rtol=1e-5, atol=1e-6)


def test_torch_trainer_with_tpu_dist_trains_ddp_on_tpu_with_equal_weights(tmp_path):
    # Ray Train v2, the default. Its ScalingConfig takes Ray's "TPU" resource
    # only with use_tpu=True, which for 2 workers reserves a TPU slice by its
    # node labels: without TPU hardware no worker holds a TPU, get_device()
    # says cpu, and the model is placed on tpu by prepare_model's argument.
    ranks = _train_on_ray(tmp_path, train_v2=True, tpu_resource=False)
    assert [r["get_device"] for r in ranks] == ["cpu", "cpu"]
    _check_trained_as_one_cpu_process(ranks)


def test_torch_trainer_workers_holding_rays_tpu_resource_get_device_tpu(tmp_path):
    # Ray Train v1 (RAY_TRAIN_V2_ENABLED=0) takes a declared "TPU" resource
    # per worker; get_device() is then tpu and prepare_model puts the model
    # there and gives DDP device_ids=[tpu] itself.
    ranks = _train_on_ray(tmp_path, train_v2=False, tpu_resource=True)
    assert [r["get_device"] for r in ranks] == ["tpu", "tpu"]
    _check_trained_as_one_cpu_process(ranks)


if __name__ == "__main__":
    _run_trainer(sys.argv[1], tpu_resource=sys.argv[2] == "tpu")
