"""How long the host is held by a step whose programs run a while.

    python benchmarks/launch_overlap.py [--size 768] [--updates 4] [--steps 15]

A step is `--updates` in-place updates `w.add_(a @ b)` of a size x size
matrix (w's buffer is donated to each update's program). For Strict and
DeferAndFuse (the step's ops then flushed by recording an event, which
launches deferred work without waiting) it prints the median over
`--steps` of: when the step's launches returned, and when its programs had
finished (a synchronize after the launch). The host is free to record the
next step for the difference: "host free" is that difference as a share of
the step. Native CPU eager computes as it goes (its launch is its finish).
"""

import argparse
import statistics
import time

import torch

import torch_tpu


def measure(device, mode, size, updates, steps):
    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(size, size, generator=generator) / size).to(device)
    b = torch.randn(size, size, generator=generator).to(device)
    w = torch.zeros(size, size, device=device)

    def step():
        for _ in range(updates):
            w.add_(a @ b)
        if device == "tpu":
            torch.tpu.Event().record()  # DeferAndFuse: launch the step, wait for nothing

    def sync():
        if device == "tpu":
            torch.tpu.synchronize()

    with torch_tpu.eager_mode(mode) if device == "tpu" else torch.no_grad():
        for _ in range(3):
            step()
        sync()
        launched, finished = [], []
        for _ in range(steps):
            sync()
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            launched.append(t1 - t0)
            finished.append(t2 - t0)
    return statistics.median(launched), statistics.median(finished)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=768)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    print(f"{args.updates} in-place updates w.add_(a @ b), {args.size}x{args.size}, median of {args.steps} steps")
    print(f"{'run':<22} {'launch returns':>15} {'programs done':>14} {'host free':>10}")
    rows = [
        ("tpu strict", "tpu", "strict"),
        ("tpu defer_and_fuse", "tpu", "defer_and_fuse"),
        ("cpu eager", "cpu", None),
    ]
    for name, device, mode in rows:
        launched, finished = measure(device, mode, args.size, args.updates, args.steps)
        free = 1 - launched / finished if finished else 0.0
        print(f"{name:<22} {1e3 * launched:>12.2f} ms {1e3 * finished:>11.2f} ms {100 * free:>9.0f}%")


if __name__ == "__main__":
    main()
