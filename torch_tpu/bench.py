"""Times your own training or inference step on tpu in each execution mode.

    python -m torch_tpu.bench my_step.py [--steps 20] [--warmup 1] [--rounds 1]
        [--modes strict,defer,compiled] [--warm-cache] [--json] [-- script args]

The script defines `make_step(device)`: it builds the model, optimizer and
inputs on `device` (a `torch.device("tpu")`) and returns `step`, a callable
taking no arguments that runs one step (forward, backward, optimizer step:
whatever one step of yours is). Its return value is ignored; reading a value
inside it (`loss.item()`) is a host wait, and is counted as one. The script
is imported, not run: code under `if __name__ == "__main__":` does not run,
and `sys.argv` is the script's name followed by the arguments after `--`.

Modes: "strict" (each op launches at once), "defer" (DeferAndFuse: ops fuse
into one program per step) and "compiled" (`torch.compile(step,
backend="tpu")`, run in Strict). Each mode runs in a fresh process with an
empty compilation cache (a temporary TORCH_TPU_CACHE_DIR), so no mode finds
programs another mode, or an earlier run, compiled: the first-step time is a
cold start. `--warm-cache` uses your configured cache instead (what a second
run of your job sees).

Per mode: steps/s over the timed steps (ending when the device is done;
with `--rounds R`, the median of R rounds of `--steps` steps),
the first step's seconds (compiling its programs, then running it), programs
compiled in all and in the timed steps (non-zero there means something
recompiles every step: see TORCH_TPU_LOG_COMPILES), XLA's compile seconds,
programs launched per step, peak device memory (`torch.tpu.max_memory_allocated`
after `reset_peak_memory_stats`, over all steps) and host waits per timed
step (times the host waited for the device: `.item()`, `.cpu()`, printing a
tensor, a synchronize; the benchmark's own final wait is not counted).

From Python, `run(step)` measures a step callable in this process and
`run_script(path)` does what the command does.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch

import torch_tpu

MODES = ("strict", "defer_and_fuse", "compiled")
_MODE_NAMES = {"defer": "defer_and_fuse", **{m: m for m in MODES}}

# What each mode's result holds (the CLI's --json rows and run()'s dicts).
FIELDS = (
    "mode",
    "steps",
    "rounds",
    "steps_per_second",
    "first_step_seconds",
    "programs_compiled",
    "programs_compiled_in_timed_steps",
    "compile_seconds",
    "programs_per_step",
    "peak_memory_bytes",
    "host_waits_per_step",
    "fresh_process",
)


def mode_name(name):
    """The canonical name of a mode ("defer" is "defer_and_fuse")."""
    try:
        return _MODE_NAMES[name.strip()]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}: expected strict, defer or compiled") from None


def measure(step, mode, steps=20, warmup=1, rounds=1):
    """Times `step` (a callable taking no arguments) in `mode` in this
    process and returns one result dict (see FIELDS). With `rounds` > 1,
    `steps` steps are timed that many times and steps/s is the median round
    (a shared or throttling machine drifts within a minute)."""
    mode = mode_name(mode)
    for name, value, least in (("steps", steps, 1), ("warmup", warmup, 0), ("rounds", rounds, 1)):
        if value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}")
    fn = torch.compile(step, backend="tpu") if mode == "compiled" else step
    with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
        torch_tpu.sync()
        torch.tpu.reset_peak_memory_stats()
        # Read after the reset: counters are only ever compared as differences.
        start = torch_tpu.metrics()
        t = time.perf_counter()
        fn()
        torch_tpu.sync()
        first_step = time.perf_counter() - t
        for _ in range(warmup):
            fn()
        torch_tpu.sync()
        before = torch_tpu.metrics()
        rates, host_waits = [], 0
        for _ in range(rounds):
            round_start = torch_tpu.metrics()
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            launched = torch_tpu.metrics()  # before the final wait, which is ours, not the step's
            torch_tpu.sync()
            rates.append(steps / (time.perf_counter() - t))
            host_waits += launched["host_waits"] - round_start["host_waits"]
        end = torch_tpu.metrics()
        peak = torch.tpu.max_memory_allocated()
    timed = steps * rounds
    return {
        "mode": mode,
        "steps": steps,
        "rounds": rounds,
        "steps_per_second": statistics.median(rates),
        "first_step_seconds": first_step,
        "programs_compiled": end["compiles"] - start["compiles"],
        "programs_compiled_in_timed_steps": end["compiles"] - before["compiles"],
        "compile_seconds": end["compile_seconds"] - start["compile_seconds"],
        "programs_per_step": (end["programs_executed"] - before["programs_executed"]) / timed,
        "peak_memory_bytes": peak,
        "host_waits_per_step": host_waits / timed,
        "fresh_process": False,
    }


def run(step, steps=20, warmup=1, modes=MODES, rounds=1):
    """Times `step` (a callable taking no arguments) in each of `modes`, one
    after another in this process; returns one dict per mode (see FIELDS).

    In one process the modes share the compilation cache, and the step's
    state (a model that trains on) carries from one mode to the next: a
    later mode may find programs an earlier one compiled (ops outside the
    step's fused or compiled program). `run_script` runs each mode in a
    fresh process instead."""
    return [measure(step, mode, steps, warmup, rounds) for mode in (mode_name(m) for m in modes)]


def load_make_step(path, argv=()):
    """The `make_step` of the script at `path`, imported as a module (its
    directory first on sys.path, sys.argv = [path, *argv])."""
    path = os.path.abspath(path)
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path, *argv]
    spec = importlib.util.spec_from_file_location("torch_tpu_bench_script", path)
    if spec is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    make_step = getattr(module, "make_step", None)
    if not callable(make_step):
        raise TypeError(
            f"{path} defines no make_step(device): define one that builds the model on device and returns "
            "step(), a callable running one step"
        )
    return make_step


def _worker(args):
    """One mode of run_script, in its own process: writes the result (or
    the error) to args.result."""
    try:
        step = load_make_step(args.script, args.script_args)(torch.device("tpu"))
        if not callable(step):
            raise TypeError(f"make_step returned {type(step).__name__}, not a callable step")
        result = measure(step, args.worker, args.steps, args.warmup, args.rounds)
        result["fresh_process"] = True
    except Exception as e:
        traceback.print_exc()  # where in the user's code, on the command's stderr
        result = {"mode": mode_name(args.worker), "error": f"{type(e).__name__}: {e}"}
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0 if "error" not in result else 1


def run_script(path, steps=20, warmup=1, modes=MODES, warm_cache=False, script_args=(), quiet=False, rounds=1):
    """Times the `make_step` of the script at `path` in each of `modes`, each
    in a fresh process (with an empty compilation cache unless
    `warm_cache`); returns one dict per mode (see FIELDS), or for a mode
    that failed {"mode", "error"}. `quiet` hides the script's output."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such script: {path}")
    results = []
    for mode in (mode_name(m) for m in modes):
        with tempfile.TemporaryDirectory(prefix="torch_tpu_bench_") as scratch:
            env = dict(os.environ)
            if not warm_cache:
                env["TORCH_TPU_CACHE_DIR"] = os.path.join(scratch, "cache")
            result_file = os.path.join(scratch, "result.json")
            command = [sys.executable, "-m", "torch_tpu.bench", "--worker", mode, "--result", result_file]
            command += ["--steps", str(steps), "--warmup", str(warmup), "--rounds", str(rounds)]
            command += [path, "--", *script_args]
            output = subprocess.DEVNULL if quiet else None
            r = subprocess.run(command, env=env, stdout=output, stderr=output)
            try:
                with open(result_file) as f:
                    results.append(json.load(f))
            except (OSError, ValueError):
                died = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
                results.append({"mode": mode, "error": f"the process ended ({died}) before reporting"})
    return results


def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def format_table(results):
    columns = (
        ("mode", "mode", "{}"),
        ("steps/s", "steps_per_second", "{:.2f}"),
        ("first step s", "first_step_seconds", "{:.2f}"),
        ("compiled", "programs_compiled", "{}"),
        ("compiled in timed", "programs_compiled_in_timed_steps", "{}"),
        ("compile s", "compile_seconds", "{:.2f}"),
        ("programs/step", "programs_per_step", "{:.1f}"),
        ("peak memory", "peak_memory_bytes", None),
        ("host waits/step", "host_waits_per_step", "{:.1f}"),
    )
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["mode"], "failed: " + r["error"].strip().splitlines()[0]])
            continue
        row = []
        for _, key, fmt in columns:
            row.append(_bytes(r[key]) if fmt is None else fmt.format(r[key]))
        rows.append(row)
    headers = [c[0] for c in columns]
    widths = [max([len(h)] + [len(row[i]) for row in rows if len(row) == len(headers)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    for row in rows:
        if len(row) != len(headers):
            lines.append(f"{row[0].ljust(widths[0])}  {row[1]}")
        else:
            lines.append("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def notes(results):
    """What a row says a user could act on."""
    out = []
    for r in results:
        if r.get("programs_compiled_in_timed_steps"):
            out.append(
                f"{r['mode']}: {r['programs_compiled_in_timed_steps']} programs compiled during the timed steps: "
                "something differs from step to step (a shape, a dtype, a Python number); TORCH_TPU_LOG_COMPILES=1 "
                "says what"
            )
        if r.get("host_waits_per_step"):
            out.append(
                f"{r['mode']}: the step waits for the device {r['host_waits_per_step']:g} time(s) per step "
                "(.item(), .cpu(), printing or branching on a tensor)"
            )
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.bench", description=__doc__.splitlines()[0])
    parser.add_argument("script", help="a Python file defining make_step(device)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per mode (default 20)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps after the first (default 1)")
    parser.add_argument("--rounds", type=int, default=1, help="time --steps steps this many times; median (default 1)")
    parser.add_argument("--modes", default="strict,defer,compiled", help="comma-separated: strict, defer, compiled")
    parser.add_argument("--warm-cache", action="store_true", help="use the configured compilation cache")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.script_args = script_args
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1, --warmup at least 0")
    if args.worker:
        return _worker(args)
    try:
        modes = [mode_name(m) for m in args.modes.split(",") if m.strip()]
    except ValueError as e:
        parser.error(str(e))
    results = run_script(
        args.script, args.steps, args.warmup, modes, args.warm_cache, script_args, quiet=args.json, rounds=args.rounds
    )
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        cache = "your compilation cache" if args.warm_cache else "an empty compilation cache"
        timed = f"{args.steps} timed steps"
        if args.rounds > 1:
            timed = f"the median of {args.rounds} rounds of {args.steps} timed steps"
        print(
            f"{os.path.basename(args.script)}: {timed} after the first and {args.warmup} warm-up step(s); "
            f"each mode in a fresh process with {cache}"
        )
        print(format_table(results))
        for note in notes(results):
            print(note)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
