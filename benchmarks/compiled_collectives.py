"""A compiled tensor-parallel step with its collectives: one program, or split.

    .venv/bin/python benchmarks/compiled_collectives.py [--ranks 4] [--steps 20] [--hidden 512] [--batch 64]

Ranks are threads of this process, each on a device of its own
(TORCH_TPU_NUM_DEVICES, set here), each running a two-layer Megatron-style
MLP block: column-parallel matmul, gelu, row-parallel matmul, all_reduce of
the partial sums (functional collectives, the `_c10d_functional` ops). In one
run it times, per step:
- compiled, in-program transport: the whole step is one program replicated
  over the ranks' devices, its all_reduces inside it;
- compiled, host transport (TORCH_TPU_DIST_TRANSPORT=host, gloo): the graph
  is split at its collectives, a program per run of ops and a host exchange
  per all_reduce;
- eager (Strict), in-program: a program per op, one per all_reduce.
Rank 0 prints ms/step and the ratios to the one-program step.
"""

import argparse
import os
import subprocess
import sys
import threading
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    return p.parse_args(argv)


def measure(args, transport, compiled):
    import torch
    import torch._dynamo
    import torch.distributed._functional_collectives as funcol

    from torch_tpu.distributed.threaded import run_ranks

    group = "tp"
    width = 4 * args.hidden // args.ranks  # this rank's shard of the MLP's inner width

    def block(x, w1, w2):
        partial = torch.nn.functional.gelu(x @ w1) @ w2
        return funcol.all_reduce(partial, "sum", group)

    def step(x, weights):
        for w1, w2 in weights:
            x = x + block(x, w1, w2)
        return x

    barrier = threading.Barrier(args.ranks)
    elapsed = {}

    def body(rank, backend):
        g = torch.Generator().manual_seed(rank)
        dev = torch.device("tpu", rank)
        x = torch.randn(args.batch, args.hidden).to(dev)
        weights = [
            (torch.randn(args.hidden, width, generator=g).div(args.hidden**0.5).to(dev),
             torch.randn(width, args.hidden, generator=g).div(width**0.5).to(dev))
            for _ in range(2)
        ]  # fmt: skip
        fn = torch.compile(step, backend="tpu") if compiled else step
        for _ in range(3):  # trace, capture, replay
            fn(x, weights)
        torch.tpu.synchronize()
        barrier.wait()
        start = time.perf_counter()
        for _ in range(args.steps):
            out = fn(x, weights)
        out.cpu()
        barrier.wait()
        if rank == 0:
            elapsed["s"] = (time.perf_counter() - start) / args.steps

    os.environ["TORCH_TPU_DIST_TRANSPORT"] = transport
    torch._dynamo.reset()  # the other transport's compiled steps would match the same guards
    try:
        run_ranks(args.ranks, body, group_name=group)
    finally:
        os.environ.pop("TORCH_TPU_DIST_TRANSPORT", None)
    return elapsed["s"]


def main(argv=None):
    args = parse_args(argv)
    if os.environ.get("TORCH_TPU_NUM_DEVICES") != str(args.ranks):
        env = dict(os.environ, TORCH_TPU_NUM_DEVICES=str(args.ranks))
        return subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env=env).returncode
    import torch

    import torch_tpu  # noqa: F401

    torch.set_float32_matmul_precision("highest")
    one = measure(args, "auto", compiled=True)
    split = measure(args, "host", compiled=True)
    eager = measure(args, "auto", compiled=False)
    print(
        f"tensor-parallel MLP step, {args.ranks} ranks as threads, batch {args.batch}, hidden {args.hidden}, "
        f"2 blocks, {args.steps} steps (ms/step, ratio to the one-program step)"
    )
    print(f"  compiled, in-program (one program):   {1000 * one:8.2f}   1.00")
    print(f"  compiled, host transport (split):     {1000 * split:8.2f}   {split / one:5.2f}")
    print(f"  eager Strict, in-program:             {1000 * eager:8.2f}   {eager / one:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
