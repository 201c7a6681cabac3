"""mp.spawn instead of torchrun: the parent picks the rendezvous and gives
each child its device through TORCH_TPU_NUM_DEVICES and set_device(rank).
Run as a script (tests/distributed/test_distributed.py); writes rank<r>.json like the
torchrun jobs."""

import os
import socket
import sys

import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

WORLD = 2


def worker(rank):
    import torch
    import torch.distributed as dist
    from harness import check, run_checks

    import torch_tpu  # noqa: F401

    torch.tpu.set_device(rank)
    dist.init_process_group("tpu_dist", rank=rank, world_size=WORLD)

    @check
    def all_reduce_under_mp_spawn():
        assert torch.tpu.current_device() == rank
        t = torch.tensor([float(rank + 1)], device=torch.device("tpu", rank))
        dist.all_reduce(t)
        assert t.item() == 3.0

    run_checks(rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCH_TPU_NUM_DEVICES=str(WORLD))
    mp.spawn(worker, nprocs=WORLD)
