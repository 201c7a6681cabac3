"""Eager AdamW step on the GPT example's parameters: tpu (Strict and
DeferAndFuse, foreach and fused implementations) against native CPU eager.

    python benchmarks/optimizer_step.py [--steps 50] [--rounds 5] [train_gpt.py size flags]

An optimizer step is many small elementwise ops over every parameter, so on
tpu its time is mostly per-op cost: `foreach=True` (PyTorch's default on
tpu and CUDA) runs about a dozen _foreach_* ops, each one program in Strict;
`fused=True` runs one _fused_adamw_ op. Rows run in interleaved rounds and
report their median round (this machine's speed drifts within a minute).
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

import torch

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import train_gpt  # noqa: E402


class Row:
    def __init__(self, config, device, mode, implementation):
        self.device, self.mode = device, mode
        torch.manual_seed(0)
        model = train_gpt.GPT(config).to(device)
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, **{implementation: True}
        )
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        self.run(3)  # warm-up: on tpu every program compiles here

    def run(self, steps):
        with torch_tpu.eager_mode(self.mode) if self.device == "tpu" else contextlib.nullcontext():
            for _ in range(steps):
                self.optimizer.step()
            if self.device == "tpu":
                torch_tpu.sync()

    def time(self, steps):
        start = time.perf_counter()
        self.run(steps)
        return (time.perf_counter() - start) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50, help="timed steps per row in each round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each row reports its median round")
    bench, rest = p.parse_known_args()
    args = train_gpt.parse_args(rest)
    config = train_gpt.config_from_args(args, train_gpt.CharDataset())
    rows = {
        "tpu strict foreach": ("tpu", "strict", "foreach"),
        "tpu strict fused": ("tpu", "strict", "fused"),
        "tpu defer_and_fuse foreach": ("tpu", "defer_and_fuse", "foreach"),
        "cpu foreach": ("cpu", None, "foreach"),
        "cpu fused": ("cpu", None, "fused"),
    }
    rows = {name: Row(config, *spec) for name, spec in rows.items()}
    n_params = sum(len(g["params"]) for g in rows["cpu foreach"].optimizer.param_groups)
    print(
        f"AdamW over {n_params} GPT parameters ({config.n_layer} layers, n_embd {config.n_embd}); "
        f"{bench.rounds} rounds of {bench.steps} steps per row"
    )
    times = {name: [] for name in rows}
    for _ in range(bench.rounds):
        for name, row in rows.items():
            times[name].append(row.time(bench.steps))
    cpu = statistics.median(times["cpu foreach"])
    for name, t in times.items():
        median = statistics.median(t)
        print(
            f"{name:>28}: {median * 1e3:7.2f} ms/step  (rounds {min(t) * 1e3:.2f}-{max(t) * 1e3:.2f})  "
            f"{median / cpu:5.2f}x cpu foreach"
        )


if __name__ == "__main__":
    main()
