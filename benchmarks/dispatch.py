"""Per-op dispatch cost: small ops on tpu against native CPU eager.

    python benchmarks/dispatch.py [--n 2000] [--size 32]

A 32x32 float32 op does almost no arithmetic, so its time is the framework's
per-op overhead: PyTorch's dispatcher plus, on tpu, the executor's cache
lookup and the PJRT launch. Each op is timed in Strict mode on a replayed
signature (the op cache): `a + b`; `a * s` with a Python float that changes
every call (a program input, not a constant); `a * 1.5`, the same float every
call (an input too, uploaded once and kept); the in-place `a.add_(b)`; and a
view read, `a.t() + b`. tpu ops are asynchronous, so two numbers are reported
for each: "launch" (the host returns from the op) and "+ sync" (every op has
also finished on the device).

The ops run through the launch queue (docs/modes.md, "The launch queue"): the
plugin's execute is made by a thread of ours, so the calling thread's CPU time
leaves it out. The same ops are then measured with the queue off
(TORCH_TPU_LAUNCH_QUEUE=0, in a second process started by this one; --no-peer
skips it) and the host CPU times compared.

The malloc in use is printed too: the plugin's execute allocates and frees
across its threads on every op, which glibc's malloc serves slowly; with
tcmalloc preloaded (LD_PRELOAD=libtcmalloc_minimal.so.4) a replayed op
costs its thread about a third less (docs/modes.md, "Host cost of one Strict op").
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch

import torch_tpu
from torch_tpu.info import malloc_in_use


def time_op(op, n, sync):
    """Seconds for n calls of op(i) (results dropped): (launched, finished,
    the calling thread's CPU time until launched). The thread's CPU time
    leaves out time it waited or was descheduled: on a busy machine it is the
    steadier measure of host cost."""
    sync()
    start, start_cpu = time.perf_counter(), time.thread_time()
    for i in range(n):
        op(i)
    launched, launched_cpu = time.perf_counter(), time.thread_time()
    sync()
    done = time.perf_counter()
    return launched - start, done - start, launched_cpu - start_cpu


def small_ops(a, b):
    """The ops timed, by name; each takes the loop index."""
    scalars = [1.0 + k / 1024 for k in range(1024)]  # a new float each call
    return {
        "add": lambda i: a + b,
        "mul by a changing float": lambda i: a * scalars[i & 1023],
        "mul by a repeated float": lambda i: a * 1.5,
        "in-place add_": lambda i: a.add_(b),
        "add of a transposed view": lambda i: a.t() + b,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="adds per measurement")
    p.add_argument("--size", type=int, default=32, help="the operands are size x size float32")
    p.add_argument("--repeats", type=int, default=5, help="measurements; the best is reported")
    p.add_argument("--no-peer", action="store_true", help="skip the run with the launch queue off")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the peer run's output
    args = p.parse_args()
    results = measure(args)
    if args.json:
        print(json.dumps(results))
        return
    queued = torch_tpu._C._launches_queued()
    print(
        f"  plugin: {torch_tpu.plugin_info().get('platform_name', '?')}, malloc: {malloc_in_use()}, "
        f"launch queue: {'on' if queued else 'off'}"
    )
    if args.no_peer or not queued:
        return
    env = dict(os.environ, TORCH_TPU_LAUNCH_QUEUE="0")
    cmd = [sys.executable, __file__, "--n", str(args.n), "--size", str(args.size), "--repeats", str(args.repeats)]
    peer = json.loads(subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, check=True).stdout)
    print("With the launch queue off (TORCH_TPU_LAUNCH_QUEUE=0, measured next, same machine):")
    for name, off in peer.items():
        on = results[name]
        print(
            f"  {name:26s} launch {off['launch_us']:6.2f} us, + sync {off['total_us']:6.2f} us,"
            f" host CPU {off['thread_us']:5.2f} us; queue on / off:"
            f" host CPU {on['thread_us'] / off['thread_us']:4.2f}x, + sync {on['total_us'] / off['total_us']:4.2f}x"
        )


def measure(args):
    """Times every op; prints the table unless --json. Returns, per op,
    microseconds per call: launch_us, total_us, thread_us (tpu), cpu_us."""

    a_cpu, b_cpu = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
    a_tpu, b_tpu = a_cpu.to("tpu"), b_cpu.to("tpu")
    no_sync = lambda: None  # noqa: E731
    tpu_sync = torch_tpu.synchronize
    us = lambda seconds: seconds / args.n * 1e6  # noqa: E731

    say = (lambda *a, **k: None) if args.json else print
    say(f"{args.size}x{args.size} float32 operands, {args.n} calls, best of {args.repeats}; Strict mode")
    say(f"  {'op':26s} {'cpu eager':>10s} {'tpu launch':>18s} {'tpu + sync':>18s} {'host CPU time':>27s}")
    cpu_ops, tpu_ops = small_ops(a_cpu, b_cpu), small_ops(a_tpu, b_tpu)
    results = {}
    for name in cpu_ops:
        # Warm up: the first tpu calls compile and capture the program; later ones replay it.
        time_op(cpu_ops[name], 100, no_sync)
        time_op(tpu_ops[name], 100, tpu_sync)
        cpu_runs = [time_op(cpu_ops[name], args.n, no_sync) for _ in range(args.repeats)]
        cpu, cpu_thread = min(r[1] for r in cpu_runs), min(r[2] for r in cpu_runs)
        runs = [time_op(tpu_ops[name], args.n, tpu_sync) for _ in range(args.repeats)]
        launch, total, thread = (min(r[k] for r in runs) for k in range(3))
        say(
            f"  {name:26s} {us(cpu):7.2f} us {us(launch):7.2f} us ({launch / cpu:4.1f}x)"
            f" {us(total):7.2f} us ({total / cpu:4.1f}x)"
            f"  cpu {us(cpu_thread):5.2f}, tpu {us(thread):5.2f} us ({thread / cpu_thread:3.1f}x)"
        )
        results[name] = {"launch_us": us(launch), "total_us": us(total), "thread_us": us(thread), "cpu_us": us(cpu)}
    return results


if __name__ == "__main__":
    main()
