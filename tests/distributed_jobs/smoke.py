"""A few collectives across whatever topology torchrun gave (the 2-"node" run)."""

import os
import sys

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run_checks  # noqa: E402

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
DEV = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
dist.init_process_group("tpu_dist")


@check
def all_reduce_and_all_gather_across_nodes():
    t = torch.tensor([float(RANK + 1)], device=DEV)
    dist.all_reduce(t)
    assert t.item() == WORLD * (WORLD + 1) / 2
    out = torch.empty(WORLD, device=DEV)
    dist.all_gather_into_tensor(out, torch.tensor([float(RANK)], device=DEV))
    assert out.tolist() == [float(r) for r in range(WORLD)]
    nodes = [None] * WORLD
    dist.all_gather_object(nodes, int(os.environ["GROUP_RANK"]))
    assert nodes == sorted(nodes) and len(set(nodes)) == int(os.environ.get("TEST_NODES", "1")), nodes


run_checks(RANK)
dist.destroy_process_group()
