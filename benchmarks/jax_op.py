"""A jnp RMSNorm as a custom op (torch_tpu.pallas.jax_op) against the same
math as torch ops, inside a small residual block (linear, norm, linear), in
DeferAndFuse and compiled: the jax_op's StableHLO fuses into the program like
any lowering, so it should be no slower. Forward (under no_grad), then a
training step (forward and backward: the jax_op's backward is jax.vjp's
pullback over the residuals its forward kept), best of --repeats runs of
--n calls ending with a sync; ratios printed.

    python benchmarks/jax_op.py [--n 200] [--repeats 5] [--batch 64] [--dim 512]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import torch
import torch.nn as nn

import torch_tpu
from torch_tpu.pallas import jax_op


@jax_op("benchmark::rms_norm", autograd=True)
def jax_rms_norm(x, weight, eps: float):
    normed = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return normed * weight


def torch_rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class Block(nn.Module):
    def __init__(self, dim, norm):
        super().__init__()
        self.up, self.down, self.norm = nn.Linear(dim, dim), nn.Linear(dim, dim), norm
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x + self.down(self.norm(self.up(x), self.weight, 1e-6).relu())


def seconds_per_call(fns, x, n, repeats, train):
    """Best seconds per call of each of `fns`, timed in turns, so that load
    from other processes falls on both sides of the ratio alike. `train`:
    each call is a forward and a backward (gradients accumulate)."""

    def call(fn):
        if train:
            fn(x).sum().backward()
        else:
            fn(x)

    best = [float("inf")] * len(fns)
    with torch.set_grad_enabled(train):
        for fn in fns:
            for _ in range(3):
                call(fn)
        torch_tpu.sync()
        for _ in range(repeats):
            for k, fn in enumerate(fns):
                start = time.perf_counter()
                for _ in range(n):
                    call(fn)
                torch_tpu.sync()
                best[k] = min(best[k], (time.perf_counter() - start) / n)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dim", type=int, default=512)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.dim).tpu()
    torch_block = Block(args.dim, torch_rms_norm).tpu()
    jax_block = Block(args.dim, jax_rms_norm).tpu()
    jax_block.load_state_dict(torch_block.state_dict())

    print(f"RMSNorm block, x [{args.batch}, {args.dim}], best of {args.repeats} x {args.n} calls")
    for train in (False, True):
        for mode in ("defer_and_fuse", "compiled"):
            if mode == "compiled":
                torch._dynamo.reset()
                fns = [torch.compile(block, backend="tpu") for block in (torch_block, jax_block)]
                torch_time, jax_time = seconds_per_call(fns, x, args.n, args.repeats, train)
            else:
                with torch_tpu.eager_mode(mode):
                    blocks = [torch_block, jax_block]
                    torch_time, jax_time = seconds_per_call(blocks, x, args.n, args.repeats, train)
            step = "forward+backward" if train else "forward"
            print(
                f"  {step:16s} {mode:15s} torch ops {torch_time * 1e6:8.1f} us   jax_op {jax_time * 1e6:8.1f} us"
                f"   jax_op/torch {jax_time / torch_time:.2f}x"
            )


if __name__ == "__main__":
    main()
