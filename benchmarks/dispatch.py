"""Per-op dispatch cost: a small `add` on tpu against native CPU eager.

    python benchmarks/dispatch.py [--n 2000] [--size 32]

A 32x32 float32 add does almost no arithmetic, so its time is the framework's
per-op overhead: PyTorch's dispatcher plus, on tpu, the executor's cache
lookup and the PJRT launch. tpu ops are asynchronous, so two numbers are
reported for it: "launch only" (the host returns from `a + b`) and "launch +
final synchronize" (every add has also finished on the device).
"""

import argparse
import time

import torch

import torch_tpu


def time_adds(a, b, n, sync):
    """Seconds for n independent `a + b` (the results are dropped)."""
    sync()
    start = time.perf_counter()
    for _ in range(n):
        a + b
    launched = time.perf_counter()
    sync()
    done = time.perf_counter()
    return launched - start, done - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="adds per measurement")
    p.add_argument("--size", type=int, default=32, help="the operands are size x size float32")
    p.add_argument("--repeats", type=int, default=5, help="measurements; the best is reported")
    args = p.parse_args()

    a_cpu, b_cpu = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
    a_tpu, b_tpu = a_cpu.to("tpu"), b_cpu.to("tpu")
    no_sync = lambda: None  # noqa: E731
    tpu_sync = torch_tpu.synchronize

    # Warm up: the first tpu add compiles its program; later ones hit the cache.
    time_adds(a_cpu, b_cpu, 100, no_sync)
    time_adds(a_tpu, b_tpu, 100, tpu_sync)

    cpu = min(time_adds(a_cpu, b_cpu, args.n, no_sync)[1] for _ in range(args.repeats))
    tpu_runs = [time_adds(a_tpu, b_tpu, args.n, tpu_sync) for _ in range(args.repeats)]
    tpu_launch = min(r[0] for r in tpu_runs)
    tpu_total = min(r[1] for r in tpu_runs)

    us = lambda seconds: seconds / args.n * 1e6  # noqa: E731
    print(f"add of two {args.size}x{args.size} float32 tensors, {args.n} times, best of {args.repeats}")
    print(f"  cpu eager                       {us(cpu):8.2f} us/op")
    print(f"  tpu launch only                 {us(tpu_launch):8.2f} us/op   ({tpu_launch / cpu:.1f}x cpu)")
    print(f"  tpu launch + final synchronize  {us(tpu_total):8.2f} us/op   ({tpu_total / cpu:.1f}x cpu)")
    print(f"  plugin: {torch_tpu.plugin_info().get('platform_name', '?')}")


if __name__ == "__main__":
    main()
