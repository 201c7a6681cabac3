"""transformers' Trainer under torchrun on tpu: 2 processes, each with its
micro-batch of 2, train as one process does on the global batch of 4 (the
same samples, accumulated in 2 micro-batches). The Trainer starts the
`tpu_dist` process group and wraps the model in DDP on tpu:LOCAL_RANK by
itself (tests/distributed_jobs/hf_trainer.py checks that on every rank).
A run stopped at a checkpoint and resumed in new processes continues as
the uninterrupted run.

The job runs under a hard timeout (tests/distributed_launch.py)."""

import os
import sys

import torch
from distributed_jobs import hf_trainer
from distributed_launch import JOBS, run_session


def _torchrun(out, *args, what="the Trainer on 2 processes"):
    """Runs the job on 2 processes under a hard timeout; rank 0's results."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("TORCH_TPU_NUM_DEVICES", None)  # torchrun's LOCAL_WORLD_SIZE gives each rank its device
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        os.path.join(JOBS, "hf_trainer.py"),
        str(out),
        *args,
    ]
    returncode, output = run_session(cmd, env, 300, what)
    assert returncode == 0, output[-6000:]
    return torch.load(out)


def test_trainer_under_torchrun_matches_one_process_on_the_global_batch(tmp_path):
    # First the single process: its programs are the ranks' too (micro-batch
    # 2 either way), so the ranks find them in the on-disk compile cache.
    single = hf_trainer.results(hf_trainer.train(str(tmp_path / "single"), max_steps=3, eval_steps=3))
    ddp = _torchrun(tmp_path / "ddp.pt")
    assert [s for s, _ in ddp["loss"]] == [1, 2, 3] and [s for s, _ in ddp["eval_loss"]] == [3]
    for key in ("loss", "eval_loss"):
        torch.testing.assert_close(ddp[key], single[key], rtol=1e-5, atol=1e-6, msg=key)
    for name, weight in single["weights"].items():
        torch.testing.assert_close(ddp["weights"][name], weight, rtol=1e-4, atol=1e-6, msg=name)
    # The checkpoint: one model, and each rank's generator states, its two
    # tpu devices' included (torch_tpu/integrations/transformers_trainer.py).
    checkpoint = tmp_path / "trainer" / "checkpoint-3"
    assert (checkpoint / "model.safetensors").is_file()
    for rank in range(2):
        states = torch.load(checkpoint / f"rng_state_{rank}.pth", weights_only=False)
        assert len(states["tpu"]) == 2, rank


def test_fp16_trainer_under_torchrun_matches_one_process_on_the_global_batch(tmp_path):
    # fp16=True under DDP (accelerate's MULTI_GPU type): each rank trains
    # under float16 autocast with its own tpu GradScaler, and DDP averages
    # the scaled gradients, as on CUDA.
    single = hf_trainer.results(hf_trainer.train(str(tmp_path / "single"), max_steps=3, eval_steps=3, fp16=True))
    ddp = _torchrun(tmp_path / "ddp.pt", "--fp16", what="the fp16 Trainer on 2 processes")
    assert [s for s, _ in ddp["loss"]] == [1, 2, 3] and [s for s, _ in ddp["eval_loss"]] == [3]
    # Micro-batches of 2 either way, so the same float16 products; the
    # gradient sums differ in order (DDP's all-reduce vs accumulation).
    for key in ("loss", "eval_loss"):
        torch.testing.assert_close(ddp[key], single[key], rtol=1e-4, atol=1e-4, msg=key)


def test_trainer_resumed_under_torchrun_continues_the_uninterrupted_run(tmp_path):
    # Two torchrun sessions, as a job stopped after its step-2 checkpoint
    # and started again: with dropout, the resumed ranks must also draw the
    # masks the uninterrupted ones drew, from each rank's tpu generator
    # states in rng_state_<rank>.pth, and see the same data shards.
    dropout = ("--attention-dropout", "0.5")
    (tmp_path / "uninterrupted").mkdir()
    (tmp_path / "resumed").mkdir()
    uninterrupted = _torchrun(tmp_path / "uninterrupted" / "out.pt", "--steps", "4", "--save-steps", "2", *dropout)
    checkpoint = tmp_path / "uninterrupted" / "trainer" / "checkpoint-2"
    expected = {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state_0.pth", "rng_state_1.pth"}
    assert expected <= set(os.listdir(checkpoint))
    resumed = _torchrun(
        tmp_path / "resumed" / "out.pt",
        *("--steps", "4", "--save-steps", "2", *dropout),
        *("--resume-from", str(checkpoint)),
        what="the resumed Trainer on 2 processes",
    )
    # Steps 3-4 ran in the resumed processes (its history before them is
    # the checkpoint's trainer_state.json).
    for key, steps in (("loss", [3, 4]), ("eval_loss", [4])):
        after_checkpoint = [(s, v) for s, v in resumed[key] if s > 2]
        assert [s for s, _ in after_checkpoint] == steps, resumed[key]
        assert after_checkpoint == [(s, v) for s, v in uninterrupted[key] if s > 2], key
    for name, weight in uninterrupted["weights"].items():
        torch.testing.assert_close(resumed["weights"][name], weight, rtol=0, atol=0, msg=name)
