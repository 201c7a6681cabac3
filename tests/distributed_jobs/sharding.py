"""FSDP2, DTensor and tensor parallelism on tpu through tpu_dist, each
against the same model trained on CPU in one process. Launched by
tests/distributed/test_distributed_sharding.py with torchrun."""

import copy
import os
import sys

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run_checks  # noqa: E402
from models import MLP, Stack  # noqa: E402

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])
torch.tpu.set_device(LOCAL_RANK)
DEV = torch.device("tpu", LOCAL_RANK)
dist.init_process_group("tpu_dist")
torch.set_float32_matmul_precision("highest")  # compared with CPU float32, as tests/conftest.py does


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(WORLD * 4, 16, generator=g)


def reference_losses(model, steps, lr=0.1):
    """The same model on CPU, one process, on the global batch."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        loss = model(batch(step)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@check
def fsdp2_meta_init_to_empty_trains_like_one_cpu_process():
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    cpu_model = Stack()
    state = copy.deepcopy(cpu_model.state_dict())
    expected = reference_losses(cpu_model, 3)
    with torch.device("meta"):
        model = Stack()
    for layer in model.layers:
        fully_shard(layer, reshard_after_forward=True)
    fully_shard(model)
    model.to_empty(device="tpu")
    # load the full CPU weights into the shards (set_model_state_dict scatters them)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        x = batch(step)[RANK * 4 : (RANK + 1) * 4].to(DEV)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=1e-5, atol=1e-6)
    # the full state dict gathers the shards back: it equals the CPU model's
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if RANK == 0:  # cpu_offload gathers the full state dict on rank 0 only
        for name, value in cpu_model.state_dict().items():
            torch.testing.assert_close(full[name], value, rtol=1e-5, atol=1e-6, msg=name)
    # and the sharded one holds DTensors on tpu, one row block per rank
    sharded = model.state_dict()
    w = sharded["layers.0.up.weight"]
    assert w.device_mesh.device_type == "tpu" and w.to_local().device.type == "tpu"
    assert w.to_local().shape[0] == 32 // WORLD


@check
def fsdp2_bf16_mixed_precision():
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    cpu_model = Stack()
    model = copy.deepcopy(cpu_model).to(DEV)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    x = batch(0)[RANK * 4 : (RANK + 1) * 4]
    out = model(x.to(DEV).bfloat16())
    assert out.dtype == torch.bfloat16
    ref = copy.deepcopy(cpu_model).bfloat16()(x.bfloat16())
    torch.testing.assert_close(out.cpu(), ref, rtol=2e-2, atol=2e-2)
    out.float().pow(2).mean().backward()
    for p in model.parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32 and p.grad.device.type == "tpu"


@check
def dtensor_distribute_redistribute_full_tensor():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("tpu", (WORLD,))
    full = torch.arange(WORLD * 6, dtype=torch.float32).reshape(WORLD * 2, 3)
    d = distribute_tensor(full.to(DEV), mesh, [Shard(0)])
    assert d.to_local().device.type == "tpu" and d.to_local().shape == (2, 3)
    torch.testing.assert_close(d.to_local().cpu(), full[RANK * 2 : (RANK + 1) * 2])
    r = d.redistribute(mesh, [Replicate()])
    torch.testing.assert_close(r.to_local().cpu(), full)
    s1 = d.redistribute(mesh, [Shard(1)]) if 3 % WORLD == 0 else d
    torch.testing.assert_close(s1.full_tensor().cpu(), full)
    torch.testing.assert_close((d * 2).sum().full_tensor().cpu(), full.sum() * 2)


@check
def colwise_rowwise_parallel_mlp():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("tpu", (WORLD,))
    torch.manual_seed(0)
    cpu_model = MLP()
    model = copy.deepcopy(cpu_model).to(DEV)
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    x = batch(1)[:4]  # the same input on every rank
    out = model(x.to(DEV))
    expected = cpu_model(x)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    g = model.up.weight.grad.full_tensor().cpu()
    torch.testing.assert_close(g, cpu_model.up.weight.grad, rtol=1e-5, atol=1e-5)


run_checks(RANK)
dist.destroy_process_group()
