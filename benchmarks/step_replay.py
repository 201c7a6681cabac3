"""DeferAndFuse's step replay (csrc/exec/step_replay.h) against recording
every step, Strict and torch.compile: training steps/s of a small
transformer encoder and of the example GPT, and the host's CPU time per
step and per op (the calling thread's, so a busy machine inflates it less
than wall time), and how busy the device is (the share of the wall time
in which a program runs, from torch.profiler's program events over a few
more steps after the timed ones): near 100% where the step waits on its
programs, less where on the host; and the host-to-device uploads a step
makes (its batch is uploaded before the timed steps: what is left is the
numbers and random states its launches read); and the process's page
faults and system CPU per step (every thread's: on the CPU plugin, fresh
device buffers whose pages malloc gave back fault in again;
TORCH_TPU_GLIBC_MALLOC_TUNING=0 shows glibc's defaults).

Each row runs in a process of its own (replay is switched off by
TORCH_TPU_STEP_REPLAY=0, read once per process), built and warmed up
there; the rows run in turn, --repeats times, and each row reports its
best run.

    python benchmarks/step_replay.py [--steps 20] [--warmup 4] [--repeats 2] [--workloads encoder,gpt] [--read-loss]
                                     [--malloc as-is|glibc|preloaded|both] [--paired N]

--read-loss reads the loss on the host after every step, as a loop that logs
it does; each row then also prints the host waits per step (one: the read,
with the pending index range checks read in the same wait).

--malloc glibc runs every row on glibc's malloc (LD_PRELOAD cleared);
--malloc preloaded on the tcmalloc or jemalloc the doctor would preload
(torch_tpu.info.preloadable_malloc, as scripts/train.sh does); --malloc
both runs each row with the two in turn and prints a table for each. The
default leaves the environment's LD_PRELOAD as it is. On a 2-core machine
the calling thread shares the cores with the CPU plugin's threads, so its
malloc's cost shows in the step time.

--paired N measures the ratios another way: one process, Strict and
DeferAndFuse on one model and compiled on a second one built the same
way, in rounds of one burst each of --steps steps (each burst after
--warmup steps in its mode; a mode switch syncs), N rounds, the order
rotating. It prints each mode's median steps/s and the median and range
of DeferAndFuse's ratio to each peer within a round. A round runs within
a few seconds, so a machine whose speed drifts over minutes (other load,
clock) moves both sides of each ratio alike, which the best-of rows
above, minutes apart, do not promise.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {
    "strict": ("strict", False, "1"),
    "defer_and_fuse": ("defer_and_fuse", False, "1"),
    "defer_and_fuse, recorded every step": ("defer_and_fuse", False, "0"),
    "compiled (model and optimizer step)": ("strict", True, "1"),
}


def encoder(device, compiled):
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(device)
    head = torch.nn.Linear(64, 10).to(device)
    params = list(model.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3, capturable=compiled)
    generator = torch.Generator().manual_seed(0)

    def batch():
        x = torch.randn(16, 32, 64, generator=generator).to(device)
        y = torch.randint(0, 10, (16 * 32,), generator=generator).to(device)
        return x, y

    def forward(x, y):
        return torch.nn.functional.cross_entropy(head(model(x)).flatten(0, 1), y)

    return forward, optimizer, batch


def gpt(device, compiled):
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import train_gpt

    dataset = train_gpt.CharDataset()
    args = train_gpt.parse_args([])
    config = train_gpt.config_from_args(args, dataset)
    config.dropout = 0.0
    model, optimizer = train_gpt.make_model_and_optimizer(config, device, 0)
    if compiled:
        for group in optimizer.param_groups:
            group["capturable"] = True
    generator = torch.Generator().manual_seed(0)

    def batch():
        return train_gpt.get_batch(dataset.data, args.batch_size, config.block_size, generator, device)

    def forward(x, y):
        return model(x, y)[1]

    return forward, optimizer, batch


PROFILED_STEPS = 5


def device_busy(train_step, batches, read_loss):
    """The share of a few more steps' wall time (run after the timed ones, so
    the profiler's cost stays out of those) in which a tpu program was
    running: the union of torch.profiler's program events
    (torch_tpu/profiler.py: each from when its program could start to its
    completion). Near 1 where the step waits on its programs, less where on
    the host."""
    from torch.profiler import ProfilerActivity, profile

    import torch_tpu

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        wall = time.perf_counter()
        for x, y in batches:
            loss = train_step(x, y)
            if read_loss:
                loss.item()
        loss.item()
        torch_tpu.sync()
        wall = time.perf_counter() - wall
    spans = sorted((e.time_range.start, e.time_range.end) for e in torch_tpu.profiler.program_events(prof))
    busy_us, reached = 0, float("-inf")
    for start, end in spans:
        busy_us += max(0, end - max(start, reached))
        reached = max(reached, end)
    return busy_us * 1e-6 / wall


def training_step(workload, compiled):
    """The workload's train_step(x, y) -> detached loss, and its batch()."""
    import torch

    forward, optimizer, batch = {"encoder": encoder, "gpt": gpt}[workload]("tpu", compiled)
    step_forward = torch.compile(forward) if compiled else forward
    optimizer_step = torch.compile(optimizer.step) if compiled else optimizer.step

    def train_step(x, y):
        loss = step_forward(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer_step()
        return loss.detach()

    return train_step, batch


def run_row(workload, mode, compiled, steps, warmup, read_loss):
    """One row, in this process: a JSON line of its numbers."""
    import torch

    import torch_tpu

    torch.set_float32_matmul_precision("high")
    torch_tpu.set_eager_mode(mode)
    train_step, batch = training_step(workload, compiled)
    batches = [batch() for _ in range(warmup + max(steps, PROFILED_STEPS))]

    for x, y in batches[:warmup]:
        loss = train_step(x, y)
    loss.item()
    torch_tpu.sync()
    torch_tpu.reset_metrics()
    wall, cpu, usage = time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_SELF)
    for x, y in batches[warmup : warmup + steps]:
        loss = train_step(x, y)
        if read_loss:
            loss.item()
    host = time.thread_time() - cpu
    process = resource.getrusage(resource.RUSAGE_SELF)  # every thread's: the plugin's too
    waits = torch_tpu.metrics()["host_waits"]  # the timed steps' own
    loss.item()
    torch_tpu.sync()
    wall = time.perf_counter() - wall
    m = torch_tpu.metrics()
    busy = device_busy(train_step, batches[warmup:][:PROFILED_STEPS], read_loss)
    print(
        json.dumps(
            {
                "steps_per_s": steps / wall,
                "host_s_per_step": host / steps,
                "page_faults_per_step": (process.ru_minflt - usage.ru_minflt) / steps,
                "system_s_per_step": (process.ru_stime - usage.ru_stime) / steps,
                "ops_per_step": m["ops_dispatched"] / steps,
                "replays_per_step": m["step_replays"] / steps,
                "replayed_ops_per_step": m["step_replay_ops"] / steps,
                "programs_per_step": m["programs_executed"] / steps,
                "host_waits_per_step": waits / steps,
                "uploads_per_step": m["uploads"] / steps,
                "device_busy": busy,
            }
        )
    )


PAIRED_MODES = ("strict", "defer_and_fuse", "compiled")


def run_paired(workload, rounds, steps, warmup):
    """--paired, in this process: a JSON line of each mode's steps/s per burst.
    Strict and DeferAndFuse train one model; compiled trains a second one
    (its optimizer capturable, as in its row), built the same way."""
    import torch

    import torch_tpu

    torch.set_float32_matmul_precision("high")
    eager_step, batch = training_step(workload, compiled=False)
    compiled_step, _ = training_step(workload, compiled=True)
    batches = [batch() for _ in range(warmup + steps)]

    def burst(mode):
        train_step = compiled_step if mode == "compiled" else eager_step
        torch_tpu.set_eager_mode("strict" if mode == "compiled" else mode)  # syncs the last burst's work
        for x, y in batches[:warmup]:
            loss = train_step(x, y)
        loss.item()
        torch_tpu.sync()
        wall = time.perf_counter()
        for x, y in batches[warmup:]:
            loss = train_step(x, y)
        loss.item()
        torch_tpu.sync()
        return steps / (time.perf_counter() - wall)

    rates = {mode: [] for mode in PAIRED_MODES}
    for round_ in range(rounds):
        # Each mode goes first, second and last in turn.
        shift = round_ % len(PAIRED_MODES)
        for mode in PAIRED_MODES[shift:] + PAIRED_MODES[:shift]:
            rates[mode].append(burst(mode))
    print(json.dumps(rates))


def print_paired(rates):
    fused = rates["defer_and_fuse"]
    medians = ", ".join(f"{mode} {statistics.median(r):.2f}" for mode, r in rates.items())
    print(f"  steps/s (median of {len(fused)} bursts): {medians}")
    for peer in ("strict", "compiled"):
        ratios = [f / p for f, p in zip(fused, rates[peer])]
        print(
            f"  DeferAndFuse / {peer} within each round: median {statistics.median(ratios):.2f}x, "
            f"range {min(ratios):.2f}-{max(ratios):.2f}x"
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workloads", default="encoder,gpt")
    p.add_argument("--read-loss", action="store_true", help="read the loss on the host after every step")
    p.add_argument("--malloc", choices=("as-is", "glibc", "preloaded", "both"), default="as-is")
    p.add_argument("--paired", type=int, metavar="N", help="N rounds of Strict, DeferAndFuse, compiled bursts")
    p.add_argument("--row", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.row and args.paired:
        run_paired(args.row, args.paired, args.steps, args.warmup)
        return
    if args.row:
        workload, row = args.row.split(":", 1)
        mode, compiled, _ = ROWS[row]
        run_row(workload, mode, compiled, args.steps, args.warmup, args.read_loss)
        return
    mallocs = {"as-is": ["as-is"], "glibc": ["glibc"], "preloaded": ["preloaded"], "both": ["glibc", "preloaded"]}
    mallocs = mallocs[args.malloc]
    preload = None
    if "preloaded" in mallocs:
        from torch_tpu.info import preloadable_malloc

        preload = preloadable_malloc()
        if not preload:
            sys.exit("--malloc preloaded: no tcmalloc or jemalloc installed (Debian: apt install libtcmalloc-minimal4)")

    def row_env(malloc, replay):
        env = dict(os.environ, TORCH_TPU_STEP_REPLAY=replay)
        if malloc == "glibc":
            env.pop("LD_PRELOAD", None)
        elif malloc == "preloaded":
            env["LD_PRELOAD"] = preload
        return env

    allocator = {"as-is": "", "glibc": ", glibc malloc", "preloaded": f", {os.path.basename(preload or '')}"}
    for workload in args.workloads.split(","):
        if args.paired:
            for malloc in mallocs:
                cmd = [sys.executable, __file__, "--row", workload, "--paired", str(args.paired)]
                cmd += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
                out = subprocess.run(cmd, env=row_env(malloc, "1"), capture_output=True, text=True, check=True)
                print(
                    f"{workload}, paired: {args.paired} rounds of {args.steps}-step bursts, each after "
                    f"{args.warmup} warm-up steps in its mode, one process" + allocator[malloc]
                )
                print_paired(json.loads(out.stdout.strip().splitlines()[-1]))
            continue
        best = {malloc: {} for malloc in mallocs}
        for _ in range(args.repeats):
            for row, (_, _, replay) in ROWS.items():
                for malloc in mallocs:  # in turn, so a change in the machine's speed falls on both
                    cmd = [sys.executable, __file__, "--row", f"{workload}:{row}", "--steps", str(args.steps)]
                    cmd += ["--warmup", str(args.warmup)] + (["--read-loss"] if args.read_loss else [])
                    out = subprocess.run(cmd, env=row_env(malloc, replay), capture_output=True, text=True, check=True)
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                    if row not in best[malloc] or result["steps_per_s"] > best[malloc][row]["steps_per_s"]:
                        best[malloc][row] = result
        for malloc in mallocs:
            print(
                f"{workload}: {args.steps} timed steps after {args.warmup} warm-up steps, best of {args.repeats}"
                + allocator[malloc]
            )
            print_rows(best[malloc], args.read_loss)


def print_rows(best, read_loss):
    for row, r in best.items():
        per_op = r["host_s_per_step"] / max(r["ops_per_step"], 1) * 1e6
        print(
            f"  {row:>36}: {r['steps_per_s']:7.2f} steps/s, host {r['host_s_per_step'] * 1e3:7.2f} ms/step "
            f"({per_op:5.2f} us per op of {r['ops_per_step']:.0f}), {r['programs_per_step']:.1f} programs/step, "
            f"{r['replays_per_step']:.1f} replayed flushes/step, {r['uploads_per_step']:.1f} uploads/step, "
            f"device busy {r['device_busy']:.0%}, {r['page_faults_per_step']:.0f} page faults and "
            f"{r['system_s_per_step'] * 1e3:.2f} ms system CPU/step"
            + (f", {r['host_waits_per_step']:.1f} host waits/step" if read_loss else "")
        )
    rate = {row: r["steps_per_s"] for row, r in best.items()}
    fused, recorded = rate["defer_and_fuse"], rate["defer_and_fuse, recorded every step"]
    compiled, strict = rate["compiled (model and optimizer step)"], rate["strict"]
    print(
        f"  DeferAndFuse / compiled {fused / compiled:.2f}x, DeferAndFuse / Strict {fused / strict:.2f}x, "
        f"replayed / recorded {fused / recorded:.2f}x (recorded / compiled {recorded / compiled:.2f}x)"
    )


if __name__ == "__main__":
    main()
