"""The example GPT's matmul shapes on tpu, on CPU eager and in JAX: time per
matmul, float32, for the batched attention products (64 heads-times-batch
of 64x16 @ 16x64 and 64x64 @ 64x16) and the unbatched Linear products.

Each measurement runs one program of --per-program independent matmuls of
the shape (a torch.compile'd function on tpu, a jax.jit'd one in JAX; CPU
eager runs the same function op by op), so a program's launch cost is
spread over that many products (more than a few and their fresh outputs'
page faults take over); it reports wall time per matmul, the
median of --rounds rounds, the three in turn each round, and tpu's ratio
to each peer.

XLA:CPU runs a batched dot as one Eigen contraction per batch element
(its DotThunk loops over the batch), so a product of 64 small matrices
costs 64 contractions' setup and hand-offs between its pool threads;
CPU eager's bmm is one ATen call for the whole batch. The "per batch
element" column divides tpu's time by the batch.

    python benchmarks/batched_matmul.py [--rounds 7] [--per-program 4] [--no-jax]
"""

import argparse
import statistics
import time

SHAPES = [  # (batch, m, k, n): where the default GPT step has them
    (64, 64, 16, 64, "attention scores, q @ k^T"),
    (64, 64, 64, 16, "attention output, att @ v"),
    (1, 1024, 64, 256, "MLP up projection"),
    (1, 1024, 256, 64, "MLP down projection"),
    (1, 1024, 64, 192, "qkv projection"),
]


def wall_per_call(call, finish, calls):
    for _ in range(3):
        out = call()
    finish(out)
    start = time.perf_counter()
    for _ in range(calls):
        out = call()
    finish(out)
    return (time.perf_counter() - start) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--per-program", type=int, default=4)
    p.add_argument("--calls", type=int, default=20, help="calls timed per round")
    p.add_argument("--no-jax", action="store_true")
    args = p.parse_args()

    import torch

    import torch_tpu

    torch.set_float32_matmul_precision("high")
    jax = None
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            print("(JAX not installed: its column is left out)")
    r = args.per_program

    def products(*pairs):
        return [torch.matmul(a, b) for a, b in zip(pairs[:r], pairs[r:])]

    compiled = torch.compile(products, backend="tpu")
    if jax is not None:
        jitted = jax.jit(lambda *pairs: [jnp.matmul(a, b) for a, b in zip(pairs[:r], pairs[r:])])

    print(
        f"{r} independent float32 matmuls per program, wall time per matmul, median of {args.rounds} rounds; "
        f"plugin {torch_tpu.plugin_info()['platform_name']}"
    )
    print(f"  {'batch x (m x k @ k x n)':>26} {'tpu':>10} {'cpu eager':>10} {'jax':>10}   tpu per batch element")
    for batch, m, k, n, where in SHAPES:
        generator = torch.Generator().manual_seed(0)
        lhs = [torch.randn(batch, m, k, generator=generator) for _ in range(r)]
        rhs = [torch.randn(batch, k, n, generator=generator) for _ in range(r)]
        on_tpu = [t.to("tpu") for t in lhs + rhs]
        # Checked equal first: a fast wrong answer is not a result.
        got = compiled(*on_tpu)
        torch.testing.assert_close(got[0].cpu(), lhs[0] @ rhs[0], rtol=1e-4, atol=1e-4)
        runs = {
            "tpu": (lambda: compiled(*on_tpu), lambda out: (out[-1].cpu(), torch_tpu.sync())),
            "cpu eager": (lambda: products(*lhs, *rhs), lambda out: None),
        }
        if jax is not None:
            on_jax = [jnp.asarray(t.numpy()) for t in lhs + rhs]
            runs["jax"] = (lambda: jitted(*on_jax), lambda out: out[-1].block_until_ready())
        times = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, (call, finish) in runs.items():
                times[name].append(wall_per_call(call, finish, args.calls) / r)
        us = {name: statistics.median(t) * 1e6 for name, t in times.items()}
        cells = "".join(f" {us[name]:8.1f}us" if name in us else f" {'-':>10}" for name in ("tpu", "cpu eager", "jax"))
        ratios = ", ".join(f"{us['tpu'] / us[name]:.2f}x {name}" for name in us if name != "tpu")
        print(f"  {f'{batch} x ({m}x{k} @ {k}x{n})':>26}{cells}   {us['tpu'] / batch:6.2f}us   tpu {ratios}  ({where})")


if __name__ == "__main__":
    main()
