"""Running a sweep's items: each item's checks in a subprocess of its own
(`python -m sweeps.<sweep> --child ...`, which prints its results on one
RESULT line), with a timeout and a memory limit, `workers` at a time, with a
progress line per item and each record appended to a JSON-lines file as it
completes, so a sweep cut short keeps what it measured."""

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

from sweeps import jsonl_records

# The folder that holds this package: an item's subprocess imports its sweep from it.
SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env():
    """The environment an item's subprocess runs in: XLA:CPU's LLVM
    optimizations off unless XLA_FLAGS names a level, as in the test suite
    (tests/conftest.py): the same HLO in half the compile time, which is most
    of a sweep's time; values equal but for an ulp here and there. The
    package is importable there (the child is `python -m sweeps.<sweep>`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SCRIPTS] + [p for p in [env.get("PYTHONPATH")] if p])
    if "xla_backend_optimization_level" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    return env


# Resident memory one item's subprocess may use, set by run_all: 80% of the
# machine's memory shared among the workers. glm5_next once took 19 GB at its
# "tiny" sizes; past the limit the item is killed and recorded, where the
# kernel's OOM killer could take the sweep (or the machine) down with it.
memory_limit = None
# An item known to need more than that (model_zoo.LARGE_MEMORY) may use 95% of
# the machine's memory when it is the sweep's only worker: nothing of the sweep
# runs beside it. With more workers it gets the share, and is killed past it.
large_memory_limit = None


def _machine_memory():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _resident(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_child(cmd, timeout, large=False):
    """Runs one item's subprocess and returns its results, {check: (outcome,
    detail)}: those it printed on its RESULT line, or {"process": ("error",
    why)} when it died, ran past `timeout` seconds, or passed memory_limit
    (large_memory_limit for a `large` item, where it is set).
    Its output goes to files, not pipes, so a child that writes a lot never
    blocks while it is watched."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=child_env())
        deadline = time.monotonic() + timeout
        limit = (large and large_memory_limit) or memory_limit
        why = None
        while proc.poll() is None:
            if limit and _resident(proc.pid) > limit:
                why = f"killed past the memory limit, {limit / 2**30:.1f} GiB per worker"
            elif time.monotonic() > deadline:
                why = f"timed out after {timeout} s"
            if why:
                proc.kill()
                proc.wait()
                return {"process": ("error", why)}
            time.sleep(0.25)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        tail = (stderr or stdout).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return {"process": ("error", f"process died (exit code {proc.returncode}): {tail[0][:200]}")}
    return {k: tuple(v) for k, v in json.loads(line[7:]).items()}


def print_result(results):
    """The child's side of run_child: its results, {check: (outcome, detail)}, on the RESULT line."""
    print("RESULT " + json.dumps(results), flush=True)


def run_item(module, child, timeout, large=False):
    """Runs `python -m module --child child` as run_child does: (its wall time in seconds, its results)."""
    started = time.time()
    results = run_child([sys.executable, "-m", module, "--child", child], timeout, large)
    return round(time.time() - started, 1), results


def run_all(items, run_one, timeout, workers, describe, jsonl=None):
    """Runs run_one(item, timeout) for every item; returns the records in
    the order they completed. describe(record) -> (name, status) for the
    progress line."""
    global memory_limit, large_memory_limit
    memory_limit = int(0.8 * _machine_memory() / max(1, workers))
    large_memory_limit = int(0.95 * _machine_memory()) if workers == 1 else None
    records = []
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(run_one, item, timeout) for item in items]
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            record = future.result()
            records.append(record)
            name, status = describe(record)
            print(f"[{i}/{len(items)}] {name}: {status} ({record['seconds']} s)", flush=True)
            if jsonl:
                jsonl_records.append(jsonl, record)
    return records
