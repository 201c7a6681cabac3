"""The worker loop the coverage sweeps share (scripts/hf_coverage.py,
scripts/model_zoo.py): each item's checks run in a subprocess of their own
(the sweep's `run_one`), `workers` at a time, with a progress line per item
and each record appended to a JSON-lines file as it completes, so a sweep cut
short keeps what it measured."""

import concurrent.futures
import json
import os
import re
import subprocess
import tempfile
import time


def child_env():
    """The environment an item's subprocess runs in: XLA:CPU's LLVM
    optimizations off unless XLA_FLAGS names a level, as in the test suite
    (tests/conftest.py): the same HLO in half the compile time, which is most
    of a sweep's time; values equal but for an ulp here and there."""
    env = dict(os.environ)
    if "xla_backend_optimization_level" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    return env


def optimization_note(merged):
    """The report's sentence on how its programs were compiled."""
    level = re.search(r"xla_backend_optimization_level=(\d+)", child_env()["XLA_FLAGS"]).group(1)
    flag = f"XLA:CPU's LLVM optimization level {level} (`--xla_backend_optimization_level`)"
    if merged:
        return f"The last batch's programs were compiled at {flag}; earlier batches may have run at the default, 2."
    return f"Programs compiled at {flag}."


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
                with open(jsonl, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return records


# --- report cells: one format, written and read back ------------------------------
# A sweep's report is also its record store: --merge reads the rows of an
# earlier report back, so a later run adds to its coverage.

PASS_IN_FLOAT64 = "pass (float64)"
_OUTCOMES = ("wrong values", "missing op", "error")
_PROCESS_FAILURES = ("process died", "timed out after", "killed past the memory limit")


def format_cell(outcome, detail):
    """One check's (outcome, detail) as its report cell."""
    if outcome == "pass" and detail.startswith("in float64 ("):
        outcome, detail = PASS_IN_FLOAT64, detail[len("in float64 (") : -1]
    if outcome in ("pass", "-"):
        return outcome
    return f"{outcome}: {detail}".replace("|", "/").replace("\n", " ")[:160]


def parse_cell(cell):
    """A report cell back into (outcome, detail); None for "-" (a check that does not apply)."""
    if cell == "-":
        return None
    if cell == "pass":
        return ("pass", "")
    if cell.startswith(PASS_IN_FLOAT64 + ": "):
        return ("pass", f"in float64 ({cell[len(PASS_IN_FLOAT64) + 2 :]})")
    for o in _OUTCOMES:
        if cell.startswith(o + ": "):
            return (o, cell[len(o) + 2 :])
    raise ValueError(f"unrecognized report cell {cell!r}")


def parse_check_cells(checks, cells):
    """A row's check cells back into {check: (outcome, detail)}. A process
    that died or timed out is one "process" result (the row repeats it in
    every cell)."""
    results = {}
    for check, cell in zip(checks, cells):
        parsed = parse_cell(cell)
        if parsed is None:
            continue
        if parsed[0] == "error" and parsed[1].startswith(_PROCESS_FAILURES):
            return {"process": parsed}
        results[check] = parsed
    return results


def report_rows(path, excluded_heading, header):
    """(section, cells) for each row of a report's tables: section "checks"
    before the line starting with `excluded_heading`, "excluded" after; rule
    rows and header rows (first cell `header`) left out."""
    section = "checks"
    with open(path) as f:
        for line in f:
            if line.startswith(excluded_heading):
                section = "excluded"
            if not line.startswith("| ") or line.startswith("| ---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] != header:
                yield section, cells


def merge(earlier, later, key):
    """earlier's records with later's in place of those with the same key(record)."""
    merged = {key(r): r for r in earlier}
    merged.update({key(r): r for r in later})
    return list(merged.values())


def select(items, earlier, item_key, record_key, next_count=None, limit=None):
    """The items a run sweeps: with `next_count`, the first that many whose
    item_key(item) no earlier record's record_key(record) lists; with
    `limit`, the first `limit` of those."""
    if next_count:
        listed = {record_key(r) for r in earlier}
        items = [i for i in items if item_key(i) not in listed][:next_count]
    return items[:limit] if limit else items


def read_jsonl(path, key):
    """The records a sweep appended to `path` (--jsonl), the last one per
    key(record) winning (a rerun with --only appends)."""
    latest = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                latest[key(record)] = record
    return list(latest.values())


def mean_square_loss(tensors):
    """The sweeps' loss for a model without one of its own: the sum of its
    outputs' mean squares, in their own dtype (float64 in a float64 check:
    float32 would round the loss to 1e-7 of itself, differently on each
    device), half types in float32. Empty outputs (glm5_next's cache of
    an indexer that saw no pooled keys) have no mean square and are left
    out: their mean, 0 / 0, would make both devices' losses NaN."""
    import torch

    return sum(
        (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t).pow(2).mean() for t in tensors if t.numel()
    )


def largest_error(x, reference):
    """The largest elementwise distance of `x` from `reference` (float64)."""
    return (x.detach().cpu().double() - reference).abs().max().item()


def rms_error(x, reference):
    """The root mean square distance of `x` from `reference` (float64)."""
    return (x.detach().cpu().double() - reference).pow(2).mean().sqrt().item()


def twice(reference):
    """worst_against_float64's default bound: tpu's error within twice CPU's."""
    return 2.0


def dynamos_multiplier(reference):
    """The bound Dynamo's accuracy check sets on float32 results
    (torch._dynamo.utils.same, get_multiplier): tpu's error within twice
    CPU's, three times for a tensor of under 1000 elements or a 1 x 1
    convolution's weight (4-d, its last two dims 1), where "noise might
    dominate our error metric": one activation past a ReLU kink moves a small
    tensor's root mean square a long way."""
    small = reference.numel() < 1000 or (reference.dim() == 4 and tuple(reference.shape[-2:]) == (1, 1))
    return 3.0 if small else 2.0


def worst_against_float64(actual, expected, reference, error=largest_error, multiplier=twice):
    """Whether tpu's float32 outputs are as accurate as CPU's: given the tensors of
    each (in order) and of a float64 reference (the CPU model in float64), the
    worst (tpu error, CPU error) pair, by their ratio, if every tpu tensor's
    error from the reference (`error`: the largest, or rms_error) is within
    `multiplier(reference tensor)` times CPU's own (twice, by default) plus
    1e-5 of the reference's magnitude; None if one is not, or if the shapes
    disagree.

    Dynamo's accuracy check (torch._dynamo.utils.same with fp64_ref) is
    rms_error with dynamos_multiplier and an absolute 1e-5 (its tolerance over
    10); the default here takes the largest error, and the slack is relative
    to the output's magnitude, since random deep nets' outputs reach 1e4. The
    slack matters where CPU happens to be nearly exact: Mask R-CNN's ten
    detection scores, near 1, are 2.1e-6 from float64's on CPU and 9.2e-6 on
    tpu. An ill-conditioned float32 result differs between devices by its own
    rounding; a lowering error lands far from the reference."""
    if not (len(actual) == len(expected) == len(reference)):
        return None
    errors = []
    for x, y, z in zip(actual, expected, reference):
        if not (x.shape == y.shape == z.shape):
            return None
        if not z.numel():
            continue
        z = z.detach().cpu().double()
        tpu_error, cpu_error = error(x, z), error(y, z)
        if not tpu_error <= multiplier(z) * cpu_error + 1e-5 * z.abs().max().item():
            return None
        errors.append((tpu_error, cpu_error))
    return max(errors, key=lambda e: e[0] / max(e[1], 1e-300), default=(0.0, 0.0))
