"""GPT example training steps/s: torch.compile on tpu against DeferAndFuse and
Strict on tpu, native CPU eager and torch.compile (Inductor) on CPU. One run,
ratios printed. "+step" rows also compile the optimizer step (with its step
counts on the device, capturable=True), so the whole training step is
compiled programs.

Every row runs at each float32 matmul precision in --precisions, set the same
way on both devices (torch.set_float32_matmul_precision): "high" multiplies
in float32 on CPU and on XLA:CPU (the example's default); "medium", tpu's
default, multiplies bf16-rounded operands on both (CPU PyTorch through
oneDNN's bf16 path on CPUs that have one).

Rows are timed in --rounds interleaved rounds of --steps steps each (every
row's model built and warmed once), and each row reports its median round:
on a shared 2-core machine the speed drifts by 20% and more within a minute,
and back-to-back rows would compare different moments.

    python benchmarks/compile.py [--steps 30] [--rounds 5] [--warmup 3] [--precisions high,medium]
        [train_gpt.py size flags]
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
    """One benchmark row: its model, optimizer and batches, warmed up (every
    program compiled) at construction; `time(steps)` runs that many training
    steps and returns their seconds."""

    def __init__(self, config, device, mode, compile_model, compile_step, batch_size, warmup, steps, dataset):
        self.device, self.mode = device, mode
        generator = torch.Generator().manual_seed(0)
        self.model, self.optimizer = train_gpt.make_model_and_optimizer(config, device, 0)
        self.step_model = torch.compile(self.model) if compile_model else self.model  # tpu or Inductor by device
        if compile_step:
            # What Dynamo does by itself for CUDA optimizers: step counts on the
            # device, so the compiled step is one program with no CPU work.
            for group in self.optimizer.param_groups:
                group["capturable"] = True
            self.optimizer.step = torch.compile(self.optimizer.step)
        self.batches = [
            train_gpt.get_batch(dataset.data, batch_size, config.block_size, generator, device)
            for _ in range(max(warmup, steps))
        ]
        self.run(self.batches[:warmup])

    def run(self, batches):
        with torch_tpu.eager_mode(self.mode) if self.device == "tpu" else contextlib.nullcontext():
            for x, y in batches:
                loss = train_gpt.train_step(self.step_model, self.optimizer, x, y)
            loss.item()
            if self.device == "tpu":
                torch_tpu.sync()

    def time(self, steps):
        start = time.perf_counter()
        self.run(self.batches[:steps])
        return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30, help="timed steps per row in each round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each row reports its median round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (programs compile here)")
    p.add_argument(
        "--precisions", default="high,medium", help="float32 matmul precisions to run every row at, comma-separated"
    )
    bench, rest = p.parse_known_args()
    args = train_gpt.parse_args(rest)  # the example's size flags and defaults
    args.steps, args.warmup = bench.steps, bench.warmup
    dataset = train_gpt.CharDataset()
    config = train_gpt.config_from_args(args, dataset)
    config.dropout = 0.0
    print(
        f"GPT: {config.n_layer} layers, n_embd {config.n_embd}, block {config.block_size}, batch "
        f"{args.batch_size}; {bench.rounds} rounds of {args.steps} timed steps per row after {args.warmup} "
        "warm-up steps"
    )
    # (name, device, eager mode, torch.compile the model, torch.compile the optimizer step)
    runs = [
        ("tpu compiled", "tpu", "strict", True, False),
        ("tpu compiled+step", "tpu", "strict", True, True),
        ("tpu defer_and_fuse", "tpu", "defer_and_fuse", False, False),
        ("tpu strict", "tpu", "strict", False, False),
        ("cpu eager", "cpu", None, False, False),
        ("cpu inductor", "cpu", None, True, False),
        ("cpu inductor+step", "cpu", None, True, True),
    ]
    for precision in bench.precisions.split(","):
        torch.set_float32_matmul_precision(precision)
        print(f"float32 matmul precision {precision!r}:")
        torch._dynamo.reset()
        rows = {
            name: Row(
                config, device, mode, compile_model, compile_step, args.batch_size, args.warmup, args.steps, dataset
            )
            for name, device, mode, compile_model, compile_step in runs
        }
        rates = {name: [] for name in rows}
        for _ in range(bench.rounds):
            for name, row in rows.items():
                rates[name].append(args.steps / row.time(args.steps))
        rate = {name: statistics.median(r) for name, r in rates.items()}
        for name, r in rates.items():
            print(f"{name:>20}: {rate[name]:7.2f} steps/s  (rounds {min(r):.2f}-{max(r):.2f})")
        for c in ("tpu compiled", "tpu compiled+step"):
            print(
                f"{c} / defer_and_fuse: {rate[c] / rate['tpu defer_and_fuse']:.2f}x;  / strict: "
                f"{rate[c] / rate['tpu strict']:.2f}x;  / cpu eager: {rate[c] / rate['cpu eager']:.2f}x;  "
                f"/ cpu inductor: {rate[c] / rate['cpu inductor']:.2f}x;  / cpu inductor+step: "
                f"{rate[c] / rate['cpu inductor+step']:.2f}x"
            )


if __name__ == "__main__":
    main()
