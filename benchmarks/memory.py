"""Memory of a training step: peak device bytes of the example GPT's step in
each eager mode and compiled, next to CPU PyTorch's and JAX's for the same
step; then whether live device bytes grow over many steps.

    python benchmarks/memory.py [--size default|matmul] [--leak-steps 10000]

Peak: after two untimed steps (the optimizer's state exists), the peak is
reset and one step runs; `torch.tpu.max_memory_allocated()` is the peak of
tensor storage on the device during it, `memory_allocated()` what stays
live between steps (weights, gradients set to None, AdamW's moments).
CPU PyTorch keeps no peak statistics, so its row comes from the profiler's
memory events (`profile_memory=True`: the CPU allocator reports each
allocation with the bytes allocated since profiling began): the bytes live
before the step (weights, gradients, AdamW's moments) plus the highest
"Total Allocated" during it. JAX's row is XLA's own accounting of the
jitted step (`compiled.memory_analysis()`): arguments + outputs - donated
aliases + temporaries.

Growth: a small MLP with AdamW runs --leak-steps steps in Strict and in
DeferAndFuse; live device bytes are read every --leak-steps/50 steps (after
a synchronize) and the least-squares slope is printed in bytes per 1,000
steps. A slope of 0 with equal first and last readings means nothing leaks.
"""

import argparse
import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import jax_peer  # noqa: E402
import train_gpt  # noqa: E402


def tpu_peak(config, batches, mode, compiled):
    row = jax_peer.TorchRow(config, batches, mode, compiled)
    row.run(row.batches[:2])
    torch.tpu.reset_peak_memory_stats()
    row.run(row.batches[2:3])
    return torch.tpu.max_memory_allocated(), torch.tpu.memory_allocated()


def cpu_peak(config, batches):
    model, optimizer = train_gpt.make_model_and_optimizer(config, "cpu", 0)
    for x, y in batches[:2]:
        train_gpt.train_step(model, optimizer, x, y)
    live_tensors = [p for p in model.parameters()] + [p.grad for p in model.parameters() if p.grad is not None]
    live_tensors += [t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in live_tensors}
    live = sum(storages.values())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_gpt.train_step(model, optimizer, *batches[2])
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.json")
        prof.export_chrome_trace(trace)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
    during = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return live + max(during, default=0), live


def jax_peak(config, batches, precision):
    import jax.numpy as jnp

    model, _ = train_gpt.make_model_and_optimizer(config, "cpu", 0)
    row = jax_peer.JaxRow(config, model, batches, precision)
    x, y = row.batches[0]
    compiled = row.step.lower(row.p, row.m, row.v, row.count, x, y).compile()
    analysis = compiled.memory_analysis()
    peak = (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )
    live = sum(a.nbytes for tree in (row.p, row.m, row.v) for a in tree.values()) + jnp.asarray(0.0).nbytes
    return peak, live


def leak_slope(mode, steps, readings=50):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.Linear(128, 8)
    ).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64, device="tpu"), torch.randint(0, 8, (32,), device="tpu")
    every = max(1, steps // readings)
    points = []
    with torch_tpu.eager_mode(mode):
        for step in range(1, steps + 1):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % every == 0:
                torch_tpu.sync()
                points.append((step, torch.tpu.memory_allocated()))
    n = len(points)
    mean_s = sum(s for s, _ in points) / n
    mean_b = sum(b for _, b in points) / n
    slope = sum((s - mean_s) * (b - mean_b) for s, b in points) / sum((s - mean_s) ** 2 for s, _ in points)
    return slope * 1000, points[0][1], points[-1][1], max(b for _, b in points)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="default", choices=sorted(jax_peer.SIZES))
    ap.add_argument("--leak-steps", type=int, default=10000)
    ap.add_argument("--precision", default="highest")
    args = ap.parse_args()
    torch.set_float32_matmul_precision(args.precision)
    config, batches = jax_peer.size_config(args.size, train_gpt.CharDataset(), 3)
    shape = jax_peer.SIZES[args.size]
    print(
        f"GPT {args.size}: {config.n_layer} layers, n_embd {config.n_embd}, block {config.block_size}, batch "
        f"{shape['batch_size']}; peak bytes of one training step after two (AdamW state allocated)"
    )
    rows = {
        "tpu strict": tpu_peak(config, batches, "strict", False),
        "tpu defer_and_fuse": tpu_peak(config, batches, "defer_and_fuse", False),
        "tpu compiled": tpu_peak(config, batches, "strict", True),
        "jax jit (XLA's accounting)": jax_peak(config, batches, args.precision),
        "cpu eager (profiler)": cpu_peak(config, batches),
    }
    for name, (peak, live) in rows.items():
        print(f"{name:>28}: peak {peak / 2**20:8.2f} MiB, live between steps {live / 2**20:8.2f} MiB")
    if args.leak_steps:
        print(f"\nlive device bytes over {args.leak_steps} steps of a 3-layer MLP with AdamW:")
        for mode in ("strict", "defer_and_fuse"):
            slope, first, last, most = leak_slope(mode, args.leak_steps)
            print(
                f"{mode:>16}: slope {slope:+.1f} bytes per 1,000 steps; first reading {first} B, last {last} B, "
                f"highest {most} B"
            )


if __name__ == "__main__":
    main()
