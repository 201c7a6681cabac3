"""Failures never hang: a rank that dies makes the others raise within the
group's timeout. Rank 1 leaves (exit 0, so torchrun waits for rank 0
instead of killing it); rank 0's next collective must raise."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run_checks  # noqa: E402

RANK = int(os.environ["RANK"])
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
DEV = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
dist.init_process_group("tpu_dist", timeout=timedelta(seconds=15))
t = torch.ones(4, device=DEV)
dist.all_reduce(t)
dist.barrier()
if RANK == 1:
    os._exit(0)


@check
def collective_with_a_dead_peer_raises():
    t = torch.ones(4, device=DEV)
    try:
        dist.all_reduce(t)
        t.cpu()
    except RuntimeError:
        return
    raise AssertionError("all_reduce with a dead peer returned")


run_checks(RANK)
os._exit(0)  # the group cannot be shut down cleanly without its peer
