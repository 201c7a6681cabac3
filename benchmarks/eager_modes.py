"""The GPT example's training speed in each tpu eager mode and on native CPU,
peak live device bytes per mode, and time to the first step (model, optimizer
and one training step, after imports) with a cold and a warm on-disk
compilation cache, each in a fresh process. One run, ratios printed.

    python benchmarks/eager_modes.py [--steps 20] [--warmup 3] [train_gpt.py size flags]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch

import torch_tpu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import train_gpt  # noqa: E402


def steps_per_second(config, device, mode, batch_size, warmup, steps, dataset):
    """(steps/s, peak live device bytes during the timed steps, tpu metrics of the timed steps)."""
    if device == "tpu":
        torch_tpu.set_eager_mode(mode)
    generator = torch.Generator().manual_seed(0)
    model, optimizer = train_gpt.make_model_and_optimizer(config, device, 0)
    batches = [
        train_gpt.get_batch(dataset.data, batch_size, config.block_size, generator, device)
        for _ in range(warmup + steps)
    ]
    for x, y in batches[:warmup]:
        loss = train_gpt.train_step(model, optimizer, x, y)
    loss.item()
    if device == "tpu":
        torch_tpu.sync()
        torch_tpu.reset_metrics()
    start = time.perf_counter()
    for x, y in batches[warmup:]:
        loss = train_gpt.train_step(model, optimizer, x, y)
    loss.item()
    if device == "tpu":
        torch_tpu.sync()
    elapsed = time.perf_counter() - start
    counts = torch_tpu.metrics() if device == "tpu" else {}
    peak = counts.get("peak_device_bytes", 0)
    if device == "tpu":
        torch_tpu.set_eager_mode("strict")
    return steps / elapsed, peak, counts


def per_step_line(rate, steps, counts):
    """Host cost per op and what one step launches: wall time of the timed
    steps over the ops they dispatched (Strict: launched one by one;
    DeferAndFuse: recorded, then launched fused at each flush)."""
    ops = counts["ops_dispatched"] / steps
    programs = counts["programs_executed"] / steps
    return (
        f"{'':>22}{ops:.0f} ops/step, {1e6 / rate / ops:.1f} us/op of step time, {programs:.1f} programs/step, "
        f"{counts.get('op_cache_replays', 0) / steps:.0f} op-cache replays/step, {counts['compiles']} compiles"
    )


FIRST_STEP = """
import sys, time
sys.path.insert(0, {examples!r})
import torch, torch_tpu, train_gpt
import torch._dynamo  # imported by every optimizer constructor: a PyTorch start-up cost, not a cache effect
torch_tpu.set_eager_mode({mode!r})
ds = train_gpt.CharDataset()
cfg = train_gpt.GPTConfig(vocab_size=ds.vocab_size, block_size={block}, n_layer={layers}, n_head={heads},
                          n_embd={embd}, dropout=0.0)
t = time.perf_counter()
model, opt = train_gpt.make_model_and_optimizer(cfg, "tpu", 0)
x, y = train_gpt.get_batch(ds.data, {batch}, {block}, torch.Generator().manual_seed(0), "tpu")
train_gpt.train_step(model, opt, x, y).item()
print(time.perf_counter() - t)
"""


def first_step_seconds(args, mode, cache_dir):
    code = FIRST_STEP.format(
        examples=os.path.join(HERE, "..", "examples"),
        mode=mode,
        block=args.block_size,
        layers=args.n_layer,
        heads=args.n_head,
        embd=args.n_embd,
        batch=args.batch_size,
    )
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (programs compile here)")
    bench, rest = p.parse_known_args()
    args = train_gpt.parse_args(rest)  # the example's size flags and defaults
    args.steps, args.warmup = bench.steps, bench.warmup
    torch.set_float32_matmul_precision(args.precision)
    dataset = train_gpt.CharDataset()
    config = train_gpt.config_from_args(args, dataset)
    config.dropout = 0.0
    print(
        f"GPT: {config.n_layer} layers, n_embd {config.n_embd}, block {config.block_size}, batch "
        f"{args.batch_size}; {args.steps} timed steps after {args.warmup} warm-up steps"
    )
    results = {}
    for name, device, mode in (
        ("tpu strict", "tpu", "strict"),
        ("tpu defer_and_fuse", "tpu", "defer_and_fuse"),
        ("cpu eager", "cpu", None),
    ):
        results[name] = steps_per_second(config, device, mode, args.batch_size, args.warmup, args.steps, dataset)
        rate, peak, counts = results[name]
        print(f"{name:>20}: {rate:7.2f} steps/s" + (f", peak live device bytes {peak:,}" if device == "tpu" else ""))
        if device == "tpu":
            print(per_step_line(rate, args.steps, counts))
    strict, fused, cpu = (results[k][0] for k in ("tpu strict", "tpu defer_and_fuse", "cpu eager"))
    print(
        f"DeferAndFuse / Strict: {fused / strict:.2f}x;  DeferAndFuse / CPU eager: {fused / cpu:.2f}x;  "
        f"Strict / CPU eager: {strict / cpu:.2f}x"
    )
    print(f"peak live bytes, DeferAndFuse / Strict: {results['tpu defer_and_fuse'][1] / results['tpu strict'][1]:.2f}")
    for mode in ("strict", "defer_and_fuse"):
        with tempfile.TemporaryDirectory() as cache:
            cold = first_step_seconds(args, mode, cache)
            warm = first_step_seconds(args, mode, cache)
        print(f"first step ({mode}): cold cache {cold:.2f} s, warm cache {warm:.2f} s, {cold / warm:.1f}x faster warm")


if __name__ == "__main__":
    main()
