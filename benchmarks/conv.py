"""Convolutions where XLA:CPU's kernels and PyTorch's CPU kernels differ
most: depthwise (groups = channels), grouped, dense for reference, and
float64, forward and forward+backward, on tpu (Strict, the op's own program)
and native CPU eager, in one run.

    python benchmarks/conv.py [--n 20] [--repeats 3] [--batch 8] [--size 32]

Each row: ms per call (best of --repeats runs of --n calls, each run ending
with a synchronize on tpu) and the tpu/cpu ratio (above 1: tpu slower). Every
row's tpu result is first checked against CPU's.
"""

import argparse
import time

import torch
import torch.nn.functional as F

import torch_tpu

# (name, channels in, channels out, groups, kernel, dtype)
CASES = [
    ("dense 64->64 3x3", 64, 64, 1, 3, torch.float32),
    ("grouped 256->256 g=8 3x3", 256, 256, 8, 3, torch.float32),
    ("depthwise 256 3x3", 256, 256, 256, 3, torch.float32),
    ("depthwise 256 7x7", 256, 256, 256, 7, torch.float32),
    ("dense 64->64 3x3 float64", 64, 64, 1, 3, torch.float64),
    ("depthwise 256 3x3 float64", 256, 256, 256, 3, torch.float64),
]


def make(case, batch, size, device):
    _, cin, cout, groups, k, dtype = case
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, cin, size, size, generator=g, dtype=dtype).to(device).requires_grad_()
    w = torch.randn(cout, cin // groups, k, k, generator=g, dtype=dtype).to(device).requires_grad_()
    return x, w, groups, k


def forward(x, w, groups, k):
    return F.conv2d(x, w, padding=k // 2, groups=groups)


def forward_backward(x, w, groups, k):
    y = forward(x, w, groups, k)
    return torch.autograd.grad(y.square().sum(), (x, w))


def best_ms(fn, args, device, n, repeats):
    fn(*args)  # compile / warm
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
        if device == "tpu":
            torch_tpu.synchronize()
        best = min(best, time.perf_counter() - start)
    del out
    return best / n * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--precision", default="highest", help="float32 matmul precision (tpu's default is medium)")
    args = ap.parse_args()
    torch.set_float32_matmul_precision(args.precision)
    print(
        f"conv2d on [{args.batch}, C, {args.size}, {args.size}], padding k//2, precision {args.precision!r}; "
        f"ms per call, best of {args.repeats}"
    )
    print(f"{'case':>28} {'pass':>9} {'tpu':>9} {'cpu':>9} {'tpu/cpu':>8}")
    for case in CASES:
        cpu_args = make(case, args.batch, args.size, "cpu")
        tpu_args = make(case, args.batch, args.size, "tpu")
        for label, fn in (("fwd", forward), ("fwd+bwd", forward_backward)):
            expected, got = fn(*cpu_args), fn(*tpu_args)
            tol = dict(rtol=1e-3, atol=1e-2) if case[5] == torch.float32 else {}
            torch.testing.assert_close(got.cpu() if label == "fwd" else [g.cpu() for g in got], expected, **tol)
            tpu_ms = best_ms(fn, tpu_args, "tpu", args.n, args.repeats)
            cpu_ms = best_ms(fn, cpu_args, "cpu", args.n, args.repeats)
            print(f"{case[0]:>28} {label:>9} {tpu_ms:9.2f} {cpu_ms:9.2f} {tpu_ms / cpu_ms:7.2f}x")


if __name__ == "__main__":
    main()
