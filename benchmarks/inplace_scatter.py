"""An in-place scatter's cost against the size of the tensor it updates:
`index_copy_` of 32 rows of 32 floats into caches of 16K, 256K and 1M rows
(2 MiB to 128 MiB), as vLLM writes its paged KV cache every step
(torch_tpu/vllm/attention.py). tpu in Strict and DeferAndFuse (each op
followed by a wait for its result), optionally a compiled function, and CPU;
each into the whole cache and into `kv[1]`, a view of half of a [2, rows,
32] storage, as vLLM's layer caches are. Median of --steps timed calls after
warm-up; ratios to CPU printed.

    python benchmarks/inplace_scatter.py [--rows 16384 262144 1048576] [--steps 20] [--compiled]
                                         [--dtype bfloat16]
"""

import argparse
import statistics
import time

import torch

import torch_tpu

WIDTH, UPDATED = 32, 32


def targets(rows, device, dtype):
    """(name, the tensor index_copy_ writes) pairs over fresh storages."""
    whole = torch.zeros(rows, WIDTH, device=device, dtype=dtype)
    kv = torch.zeros(2, rows, WIDTH, device=device, dtype=dtype)
    return [("whole", whole), ("kv[1]", kv[1])]


def wait(device):
    if device == "tpu":
        torch_tpu.sync()
        torch.tpu.synchronize()


def median_ms(step, device, warmup, steps):
    for _ in range(warmup):
        step()
    wait(device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        wait(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(rows, device, mode, dtype, warmup, steps):
    """{target name: ms per index_copy_}."""
    if device == "tpu" and mode != "compiled":
        torch_tpu.set_eager_mode(mode)
    generator = torch.Generator().manual_seed(0)
    index = torch.randperm(rows, generator=generator)[:UPDATED].to(device)
    source = torch.randn(UPDATED, WIDTH, generator=generator).to(device, dtype)
    out = {}
    for name, target in targets(rows, device, dtype):
        if mode == "compiled":
            torch._dynamo.reset()

            @torch.compile
            def write(cache, index, source):
                cache.index_copy_(0, index, source)

            out[name] = median_ms(lambda: write(target, index, source), device, warmup, steps)
        else:
            out[name] = median_ms(lambda: target.index_copy_(0, index, source), device, warmup, steps)
    if device == "tpu":
        torch_tpu.set_eager_mode("strict")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[16384, 262144, 1048576])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compiled", action="store_true", help="also time a torch.compile'd index_copy_")
    parser.add_argument("--dtype", default="float32", help="the cache's dtype (float32, bfloat16, ...)")
    args = parser.parse_args()
    rows_of = [("tpu", "strict"), ("tpu", "defer_and_fuse")]
    if args.compiled:
        rows_of.append(("tpu", "compiled"))
    rows_of.append(("cpu", "eager"))
    dtype = getattr(torch, args.dtype)
    print(f"index_copy_ of {UPDATED} rows x {WIDTH} {args.dtype}, ms per call (median of {args.steps}); x = tpu / cpu")
    print(f"{'rows':>9} {'MiB':>5} {'target':<6} " + " ".join(f"{d + ' ' + m:>22}" for d, m in rows_of))
    for rows in args.rows:
        results = {(d, m): measure(rows, d, m, dtype, args.warmup, args.steps) for d, m in rows_of}
        for name in ("whole", "kv[1]"):
            cpu = results[("cpu", "eager")][name]
            cells = []
            for key in rows_of:
                ms = results[key][name]
                cells.append(f"{ms:9.3f}" + (f" ({ms / cpu:7.1f}x)" if key[0] == "tpu" else " " * 11))
            mib = rows * WIDTH * dtype.itemsize / 2**20
            print(f"{rows:>9} {mib:>5.0f} {name:<6} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
