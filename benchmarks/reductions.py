"""Sums on the CPU plugin, lowered for it and lowered as for a TPU
(TORCH_TPU_LOWERING_PLATFORM=tpu), next to CPU eager, in one run.

    python benchmarks/reductions.py [--n 200] [--repeats 3] [--rounds 3]

XLA:CPU rewrites a reduce with a reduced dim wider than 32 into windows of
32 along every reduced dim; a window over two adjacent dims (a Linear's bias
gradient: the column sum of a [16, 64, C] gradient, or of its [1024, C]
view) adds 512 numbers one after another per column. Lowered for the CPU
plugin, adjacent reduced dims are merged and kept behind a barrier
(csrc/lower/common/reduction.cpp); lowered as for a TPU they are not.

Each case is one compiled function of a [16, 64, C] input (its producer, a
multiply, fused with the sum as in a training step's program). Each case and
lowering runs in a process of its own (the platform is read once per
process), --rounds times, the lowerings in turn; every result is first
checked against CPU's. Rows: us per call, best of --repeats runs of --n
calls ending with a host read, best over the rounds, and the TPU
lowering's time over the CPU lowering's (above 1: the CPU lowering is
faster). The last row's sum is lowered the same way by both: its ratio
shows the run's noise.
"""

import argparse
import json
import os
import subprocess
import sys
import time

# (name, input shape, the function of the input)
CASES = [
    ("bias gradient: (x*2).sum((0,1)) of [16,64,256]", (16, 64, 256), "lambda x: (x * 2).sum((0, 1))"),
    ("its [1024,256] view: (x*2).view(1024,256).sum(0)", (16, 64, 256), "lambda x: (x * 2).view(1024, 256).sum(0)"),
    (
        "LayerNorm weight gradient: (x*y).sum((0,1)) of [16,64,64]",
        (16, 64, 64),
        "lambda x: (x * x.flip(-1)).sum((0, 1))",
    ),
    ("a 2-d column sum: (x*2).sum(0) of [1024,256]", (1024, 256), "lambda x: (x * 2).sum(0)"),
    ("row sum (unchanged): (x*2).sum(-1) of [16,64,64]", (16, 64, 64), "lambda x: (x * 2).sum(-1)"),
]


def best_us(fn, x, n, repeats, sync):
    fn(x)
    sync(fn(x))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            out = fn(x)
        sync(out)
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def run_case(case, n, repeats):
    """One case under this process's lowering: its us per call."""
    import torch

    import torch_tpu  # noqa: F401 (the tpu device)

    _name, shape, source = CASES[case]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    fn = torch.compile(eval(source), backend="tpu")
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), eval(source)(x), rtol=1e-5, atol=1e-4)
    print(json.dumps(best_us(fn, x.to("tpu"), n, repeats, lambda out: out.cpu())))


def cpu_eager(n, repeats):
    import torch

    torch.set_num_threads(2)
    return [best_us(eval(source), torch.randn(shape), n, repeats, lambda out: None) for _name, shape, source in CASES]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--case", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case is not None:
        run_case(args.case, args.n, args.repeats)
        return
    rows = {"cpu": [float("inf")] * len(CASES), "tpu": [float("inf")] * len(CASES)}
    for _ in range(args.rounds):  # the lowerings alternate, so a slow spell of the machine hits both
        for case in range(len(CASES)):
            for platform in ("cpu", "tpu"):
                env = dict(os.environ, TORCH_TPU_LOWERING_PLATFORM=platform)
                cmd = [
                    sys.executable,
                    __file__,
                    "--case",
                    str(case),
                    "--n",
                    str(args.n),
                    "--repeats",
                    str(args.repeats),
                ]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
                rows[platform][case] = min(rows[platform][case], json.loads(out.strip().splitlines()[-1]))
    rows["eager"] = cpu_eager(args.n, args.repeats)
    print(f"us per call, best of {args.rounds} processes x {args.repeats} x {args.n} calls")
    print(f"{'case':60} {'CPU lowering':>13} {'TPU lowering':>13} {'CPU eager':>10} {'TPU/CPU lowering':>17}")
    for i, (name, _shape, _source) in enumerate(CASES):
        cpu, tpu, eager = rows["cpu"][i], rows["tpu"][i], rows["eager"][i]
        print(f"{name:60} {cpu:13.1f} {tpu:13.1f} {eager:10.1f} {tpu / cpu:16.2f}x")


if __name__ == "__main__":
    main()
