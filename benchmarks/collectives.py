"""Collectives through tpu_dist next to gloo on CPU tensors, and DDP scaling.

    .venv/bin/python benchmarks/collectives.py                 # 2 processes, 1 KB - 64 MB, then DDP at 1, 2, 4
    .venv/bin/python benchmarks/collectives.py --max-mb 256 --nproc 4
    .venv/bin/python benchmarks/collectives.py --skip-ddp

Part 1 launches itself under torchrun (--nproc processes). Each rank times
all_reduce (SUM) and all_gather_into_tensor of float32 tensors from 1 KB to
--max-mb on tpu tensors (the default group, tpu_dist: staged through host
memory, gloo underneath) and on CPU tensors of the same size (a gloo group),
interleaved, and rank 0 prints the bus bandwidth of each (NCCL-tests'
definition: all_reduce moves 2(n-1)/n of the buffer per rank, all_gather
(n-1)/n of the output) and their ratio. A tpu time includes the device
-> host copy of the input and the host -> device copy of the result, and
ends with the result on the device (read back by a synchronize).

Part 2 runs examples/train_gpt_ddp.py (the same global batch) on 1, 2 and 4
processes and prints ms/step and tokens/s.
"""

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--max-mb", type=float, default=64)
    p.add_argument("--skip-ddp", action="store_true")
    p.add_argument("--ddp-steps", type=int, default=10)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def time_op(fn, sync, iters):
    fn()
    sync()
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def worker(args):
    import torch
    import torch.distributed as dist

    import torch_tpu  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
    dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("tpu_dist")
    gloo = dist.new_group(backend="gloo")
    sizes = []
    size = 1024
    while size <= args.max_mb * 2**20:
        sizes.append(size)
        size *= 4
    sync_tpu = lambda: (torch.tpu.synchronize(), dist.barrier(group=gloo))  # noqa: E731
    sync_cpu = lambda: dist.barrier(group=gloo)  # noqa: E731

    def measure(nbytes):
        # One size's tensors live only in this call, so the next size allocates after they are freed.
        n = nbytes // 4
        iters = max(2, min(20, int(16 * 2**20 / nbytes)))
        x_tpu, x_cpu = torch.ones(n, device=dev), torch.ones(n)
        out_tpu, out_cpu = torch.empty(n * world, device=dev), torch.empty(n * world)
        ar_tpu = time_op(lambda: dist.all_reduce(x_tpu), sync_tpu, iters)
        ar_cpu = time_op(lambda: dist.all_reduce(x_cpu, group=gloo), sync_cpu, iters)
        ag_tpu = time_op(lambda: dist.all_gather_into_tensor(out_tpu, x_tpu), sync_tpu, iters)
        ag_cpu = time_op(lambda: dist.all_gather_into_tensor(out_cpu, x_cpu, group=gloo), sync_cpu, iters)
        return nbytes, ar_tpu, ar_cpu, ag_tpu, ag_cpu

    rows = [measure(nbytes) for nbytes in sizes]
    if rank == 0:
        ar_factor, ag_factor = 2 * (world - 1) / world, (world - 1) / world
        print(f"{world} processes, bus bandwidth in GB/s (time per op in ms)")
        print(
            f"{'size':>8} | {'all_reduce tpu':>20} {'gloo cpu':>20} {'tpu/cpu':>7} | "
            f"{'all_gather tpu':>20} {'gloo cpu':>20} {'tpu/cpu':>7}"
        )
        for nbytes, ar_tpu, ar_cpu, ag_tpu, ag_cpu in rows:

            def bw(t, factor, total):
                return f"{factor * total / t / 1e9:8.3f} ({1000 * t:8.3f})"

            label = f"{nbytes // 1024} KB" if nbytes < 2**20 else f"{nbytes // 2**20} MB"
            print(
                f"{label:>8} | {bw(ar_tpu, ar_factor, nbytes):>20} {bw(ar_cpu, ar_factor, nbytes):>20} "
                f"{ar_cpu / ar_tpu:7.2f} | {bw(ag_tpu, ag_factor, nbytes * world):>20} "
                f"{bw(ag_cpu, ag_factor, nbytes * world):>20} {ag_cpu / ag_tpu:7.2f}"
            )
    dist.destroy_process_group()


def ddp_scaling(steps):
    example = os.path.join(ROOT, "examples", "train_gpt_ddp.py")
    print(f"\nDDP GPT step (examples/train_gpt_ddp.py, global batch 16, {steps} steps, steady half timed)")
    for nproc in (1, 2, 4):
        args = ["--steps", str(steps)]
        if nproc == 1:
            cmd = [sys.executable, example, *args]
        else:
            cmd = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc_per_node={nproc}",
                example,
                *args,
            ]
        out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        line = re.search(r"world \d+: .*", out.stdout)
        print(f"  {nproc} process(es): {line.group(0) if line else 'failed: ' + out.stderr[-2000:]}")


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={args.nproc}",
        os.path.abspath(__file__),
        "--worker",
        "--max-mb",
        str(args.max_mb),
    ]
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if not args.skip_ddp:
        ddp_scaling(args.ddp_steps)


if __name__ == "__main__":
    main()
