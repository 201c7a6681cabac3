"""Training-step time of the example GPT on tpu against native CPU eager.

    python benchmarks/gpt_step.py [--steps 20] [--warmup 3] [train_gpt.py size flags]

Both devices run the model size of examples/train_gpt.py (its defaults, or the
same flags: --batch-size, --block-size, --n-layer, --n-head, --n-embd,
--precision) in one process. Warm-up steps are not timed: on tpu they compile
every op's program. The timed steps end with a synchronize, so the tpu time
includes the device work, not only the launches.
"""

import argparse
import os
import sys
import time

import torch

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import train_gpt  # noqa: E402


def sync(device):
    if device == "tpu":
        torch_tpu.synchronize()


def time_steps(config, device, batch_size, warmup, steps, dataset, seed=0):
    """Seconds per training step, after `warmup` untimed steps."""
    generator = torch.Generator().manual_seed(seed)
    model, optimizer = train_gpt.make_model_and_optimizer(config, device, seed)
    batches = [
        train_gpt.get_batch(dataset.data, batch_size, config.block_size, generator, device)
        for _ in range(warmup + steps)
    ]
    for x, y in batches[:warmup]:
        loss = train_gpt.train_step(model, optimizer, x, y)
    loss.item()
    sync(device)
    start = time.perf_counter()
    for x, y in batches[warmup:]:
        loss = train_gpt.train_step(model, optimizer, x, y)
    sync(device)
    loss.item()
    return (time.perf_counter() - start) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per device")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (tpu compiles here)")
    bench_args, rest = p.parse_known_args()
    args = train_gpt.parse_args(rest)
    torch.set_float32_matmul_precision(args.precision)
    dataset = train_gpt.CharDataset()
    config = train_gpt.config_from_args(args, dataset)
    tokens = args.batch_size * config.block_size
    print(
        f"GPT {config.n_layer} layers, {config.n_head} heads, n_embd {config.n_embd}, block {config.block_size}, "
        f"batch {args.batch_size}, matmul precision {args.precision}; {bench_args.steps} timed steps "
        f"after {bench_args.warmup} warm-up"
    )
    seconds = {}
    for device in ("cpu", "tpu"):
        seconds[device] = time_steps(config, device, args.batch_size, bench_args.warmup, bench_args.steps, dataset)
        print(f"  {device}: {seconds[device] * 1e3:9.1f} ms/step  {tokens / seconds[device]:10,.0f} tokens/s")
    print(f"  tpu/cpu step time: {seconds['tpu'] / seconds['cpu']:.2f}x")


if __name__ == "__main__":
    main()
