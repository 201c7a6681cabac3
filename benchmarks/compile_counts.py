"""Programs compiled, per mode: by each of the example GPT's first training
steps, and by a loop over x[t] (an RNN-style read of a view at a new storage
offset each step). Each (workload, mode) runs in its own process with an
empty disk cache, so every count is a cold user's. Fewer is better: a step
that compiles 200 programs is a user's first impression.

    python benchmarks/compile_counts.py [--gpt-steps 4] [--loop-steps 50]
"""

import argparse
import os
import subprocess
import sys
import tempfile

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
MODES = ("strict", "defer_and_fuse")


def gpt_compiles_per_step(mode, steps):
    import torch
    import train_gpt

    import torch_tpu

    torch_tpu.set_eager_mode(mode)
    data = train_gpt.CharDataset()
    config = train_gpt.GPTConfig(vocab_size=data.vocab_size)
    g = torch.Generator().manual_seed(0)
    model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 0)
    batches = [train_gpt.get_batch(data.data, 8, config.block_size, g, "tpu") for _ in range(steps)]
    torch_tpu.sync()
    counts = []
    for x, y in batches:
        before = torch_tpu.metrics()["compiles"]
        train_gpt.train_step(model, optimizer, x, y).item()
        torch_tpu.sync()
        counts.append(torch_tpu.metrics()["compiles"] - before)
    return counts


def loop_compiles(mode, steps):
    import torch

    import torch_tpu

    torch_tpu.set_eager_mode(mode)
    x = torch.randn(steps, 16).to("tpu")
    h = torch.zeros(16).to("tpu")
    torch_tpu.sync()
    before = torch_tpu.metrics()["compiles"]
    for t in range(steps):
        h.copy_(torch.tanh(x[t] + h * 0.5))
        h.sum().item()
    torch_tpu.sync()
    return [torch_tpu.metrics()["compiles"] - before]


WORKLOADS = {"gpt": gpt_compiles_per_step, "loop": loop_compiles}


def child(workload, mode, steps):
    sys.path.insert(0, EXAMPLES)
    print(" ".join(str(n) for n in WORKLOADS[workload](mode, steps)))


def measure(workload, mode, steps):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
        out = subprocess.run(
            [sys.executable, __file__, "--child", workload, mode, str(steps)],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        ).stdout
    return [int(n) for n in out.strip().splitlines()[-1].split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpt-steps", type=int, default=4)
    parser.add_argument("--loop-steps", type=int, default=50)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print("| workload | mode | programs compiled |")
    print("| --- | --- | --- |")
    for mode in MODES:
        counts = measure("gpt", mode, args.gpt_steps)
        print(f"| example GPT, steps 1..{args.gpt_steps} | {mode} | {counts} |", flush=True)
    for mode in MODES:
        (count,) = measure("loop", mode, args.loop_steps)
        print(f"| {args.loop_steps}-step loop over x[t] | {mode} | {count} |", flush=True)


if __name__ == "__main__":
    main()
