"""Runs the full OpInfo sweep on the tpu device and writes the coverage report.

    .venv/bin/python scripts/op_coverage.py [--jobs 2] [--ops add,sum] [--out docs/op_coverage.md]
    .venv/bin/python scripts/op_coverage.py --ops cross,mse_loss --units float16 --merge-expected
    .venv/bin/python scripts/op_coverage.py --totals

Every OpInfo of PyTorch's op_db, every sample of every dtype in
tests/opinfo/harness.DTYPES the OpInfo supports on CPU, float32 backward
where the OpInfo supports autograd, and its error_inputs; CPU fallback off.
Writes docs/op_coverage.md and tests/opinfo/expected.json (the expectations
the CI light sweep, tests/opinfo/test_opinfo.py, holds the build to).
With --ops only those OpInfos run and nothing is written unless --out is given;
with --ops and --update, those OpInfos rerun and replace their outcomes in the
last full sweep's results (kept in --workdir; a run with --ops alone leaves
them as they are, and --update refuses a workdir that holds no full sweep),
and the report and the expectations are rewritten from the merged results.
--units restricts a run to some of an OpInfo's units (forward dtype names,
"backward", "errors"); with --ops and --merge-expected, the units that ran
replace their entries in tests/opinfo/expected.json and every other entry is
kept (no full sweep's results needed). --totals prints the pass rates
tests/opinfo/expected.json records.
"""

import argparse
import collections
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "opinfo"))

import harness  # noqa: E402

import torch_tpu  # noqa: E402

FORWARD_DTYPES = [harness.DTYPE_NAMES[d] for d in harness.DTYPES]
RAN = ("pass", "wrong", "error", "timeout", "crash")  # outcomes of samples that were not skipped


def units(records):
    """{(kind, dtype): Counter of statuses} and {(kind, dtype): [records]}."""
    by_unit = collections.defaultdict(list)
    for r in records:
        by_unit[(r["kind"], r["dtype"])].append(r)
    return {u: collections.Counter(r["status"] for r in rs) for u, rs in by_unit.items()}, by_unit


def unit_status(records):
    """'pass' | 'missing' | 'fail:<reason>' of one (op, kind, dtype) group:
    pass when every sample that ran passed; missing when the only failures
    are missing lowerings."""
    counts = collections.Counter(r["status"] for r in records)
    ran = sum(counts[s] for s in RAN) + counts["missing"]
    if ran == 0:
        reasons = sorted({r.get("detail", "") for r in records})
        return "fail:skipped: " + (reasons[0] if reasons else "no samples")[:100]
    if counts["pass"] == ran:
        return "pass"
    bad = [r for r in records if r["status"] in ("wrong", "error", "timeout", "crash")]
    if not bad:
        return "missing"
    first = bad[0]
    return f"fail:{len(bad)}/{ran} {first['status']}: sample {first['i']}: {first.get('detail', '')}"[:200]


def op_class(records):
    """native: every forward sample ran on tpu without a missing lowering;
    missing: none did; fallback-needed: some did, the rest need the CPU
    fallback."""
    fwd = [r for r in records if r["kind"] == "forward" and r["status"] != "skip"]
    missing = sum(r["status"] == "missing" for r in fwd)
    if not fwd:
        return "n/a"
    if missing == 0:
        return "native"
    if missing == len(fwd):
        return "missing"
    return "fallback-needed"


def base_name(overload):
    """aten::erfinv.out -> aten::erfinv: one lowering serves every overload."""
    name = overload.split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def pct(n, d):
    return f"{n}/{d} ({100.0 * n / d:.1f}%)" if d else "0/0"


def summarize(results, keys):
    rows = []
    totals = collections.Counter()
    blocked = collections.defaultdict(set)
    overloads = collections.defaultdict(set)
    expected = {}
    for key in keys:
        records = results.get(key, [])
        counts, by_unit = units(records)
        exp = {}
        for (kind, dtype), rs in sorted(by_unit.items()):
            if kind == "forward":
                exp[dtype] = unit_status(rs)
            elif kind == "backward":
                exp["backward:float32"] = unit_status(rs)
            elif kind == "error":
                exp["error_inputs"] = unit_status(rs)
            elif kind == "op":
                exp["op"] = unit_status(rs)
        expected[key] = exp
        for r in records:
            if r.get("missing"):
                blocked[base_name(r["missing"])].add(key)
                overloads[base_name(r["missing"])].add(r["missing"])
        totals.update(expected_totals({key: exp}))
        cls = op_class(records)
        totals["class_" + cls] += 1
        rows.append((key, cls, counts, exp))
    return rows, totals, blocked, overloads, expected


EXPECTED_SLOTS = (
    ("float32", "float32"),
    ("bfloat16", "bfloat16"),
    ("float16", "float16"),
    ("complex64", "complex64"),
    ("complex128", "complex128"),
    ("backward:float32", "backward"),
    ("error_inputs", "errors"),
)


def expected_totals(expected):
    """Counter of <name>_total / <name>_pass over an expectations dict: an
    OpInfo counts for a slot when it has a runnable sample of it."""
    totals = collections.Counter()
    for exp in expected.values():
        for slot, name in EXPECTED_SLOTS:
            if slot in exp and not exp[slot].startswith("fail:skipped"):
                totals[name + "_total"] += 1
                totals[name + "_pass"] += exp[slot] == "pass"
    return totals


def totals_line(totals):
    return ", ".join(
        f"{name} {pct(totals[name + '_pass'], totals[name + '_total'])}"
        for _, name in EXPECTED_SLOTS
        if totals[name + "_total"]
    )


def merge_expected(path, expected, ran_slots):
    """Replaces the slots that ran (ran_slots: {opkey: slots}) in the
    expectations file; every other entry stays as recorded."""
    with open(path) as f:
        merged = json.load(f)
    made_with = merged.get("_made_with", {}).get("torch")
    if made_with not in (None, harness.torch_release()):
        sys.exit(f"{path} holds torch {made_with}'s OpInfos: merge into it under that torch")
    for key, slots in ran_slots.items():
        entry = merged.setdefault(key, {})
        for slot in slots:
            entry.pop(slot, None)
            if slot in expected.get(key, {}):
                entry[slot] = expected[key][slot]
    with open(path, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
        f.write("\n")
    return merged


def cell(counts, unit):
    c = counts.get(unit)
    if not c:
        return ""
    ran = sum(c[s] for s in RAN) + c["missing"]
    text = f"{c['pass']}/{ran}"
    if c["missing"]:
        text += f" m{c['missing']}"
    bad = c["wrong"] + c["error"] + c["timeout"] + c["crash"]
    if bad:
        text += f" **f{bad}**"
    return text


def cached_programs():
    """How many compiled programs the persistent cache holds (None when it is
    off): a sweep over a warm cache loads them instead of compiling, which is
    most of a cold sweep's time."""
    directory = torch_tpu.cache_stats()["disk"]["directory"]
    if not directory or not os.path.isdir(directory):
        return None
    return sum(len(files) for _, _, files in os.walk(directory))


def write_report(path, rows, totals, blocked, overloads, crashes, elapsed, jobs, cache_at_start=None):
    n_ops = len(rows)
    lines = [
        "# tpu op coverage (generated)",
        "",
        "Generated by `scripts/op_coverage.py` from PyTorch's OpInfo database "
        "(`torch.testing._internal.common_methods_invocations.op_db`, which includes the linalg, fft, "
        "special and signal databases); CPU fallback off, so an op without a lowering counts as missing. "
        "Do not edit by hand.",
        "",
        f"- OpInfos: {n_ops}; native ATen overloads (`torch_tpu.lowered_ops()`): {len(torch_tpu.lowered_ops())}",
        f"- OpInfos passing every float32 sample: {pct(totals['float32_pass'], totals['float32_total'])}",
        f"- OpInfos passing every bfloat16 sample: {pct(totals['bfloat16_pass'], totals['bfloat16_total'])}",
        f"- OpInfos passing every float16 sample: {pct(totals['float16_pass'], totals['float16_total'])}",
        f"- OpInfos passing every complex64 sample: {pct(totals['complex64_pass'], totals['complex64_total'])}",
        f"- OpInfos passing every complex128 sample: {pct(totals['complex128_pass'], totals['complex128_total'])}",
        f"- OpInfos passing every float32 backward sample: {pct(totals['backward_pass'], totals['backward_total'])}",
        f"- OpInfos whose every error input raises CPU's exception type: "
        f"{pct(totals['errors_pass'], totals['errors_total'])}",
        f"- OpInfos by forward class: native {totals['class_native']}, fallback-needed "
        f"{totals['class_fallback-needed']}, missing {totals['class_missing']}, no runnable sample "
        f"{totals['class_n/a']}",
        f"- Sweep: {elapsed / 60:.1f} min with {jobs} worker processes, "
        + (
            "compilation cache state not recorded"
            if cache_at_start is None
            else f"{cache_at_start} programs in the disk compilation cache at the start"
            + (" (cold: every program compiled)" if cache_at_start == 0 else " (warm: most programs loaded)")
        )
        + f"; crashes (process died): {len(crashes)}",
        "",
        "Percentages are over the OpInfos that have at least one runnable sample of that kind. "
        "Class: *native* = every forward sample ran on tpu (right or wrong) without a missing lowering; "
        "*missing* = none did; *fallback-needed* = some did, the rest need `torch_tpu.cpu_fallback(True)`.",
        "",
        "## Most blocking missing lowerings",
        "",
        "Missing ATen op (overloads seen) and how many OpInfos it blocks (at least one sample raised "
        "NotImplementedError naming it).",
        "",
        "| missing op | OpInfos blocked | overloads |",
        "| --- | ---: | --- |",
    ]
    for name, ops in sorted(blocked.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:60]:
        lines.append(f"| `{name}` | {len(ops)} | {', '.join(sorted(o.split('::')[1] for o in overloads[name]))} |")
    if crashes:
        lines += [
            "",
            "## Crashes",
            "",
            "Each killed its worker process; rerun one with "
            "`python tests/opinfo/harness.py --repro OP KIND DTYPE INDEX`.",
            "",
        ]
        for c in crashes:
            lines.append(
                f"- `{c['op']}` {c['kind']} {c['dtype']} sample {c['i']}: {c['status']}: {c.get('detail', '')}"
            )
    lines += [
        "",
        "## Per OpInfo",
        "",
        "Cells: samples passed / samples run; `mN` = N samples hit a missing lowering; "
        "**fN** = N samples wrong, raised another error, timed out or crashed.",
        "",
        "| OpInfo | class | " + " | ".join(FORWARD_DTYPES) + " | backward f32 | error inputs | first failure |",
        "| --- | --- | " + " | ".join("---" for _ in FORWARD_DTYPES) + " | --- | --- | --- |",
    ]
    for key, cls, counts, exp in rows:
        cells = [cell(counts, ("forward", d)) for d in FORWARD_DTYPES]
        cells += [cell(counts, ("backward", "float32")), cell(counts, ("error", "-"))]
        fails = [v[5:] for v in exp.values() if v.startswith("fail:") and not v.startswith("fail:skipped")]
        first = fails[0].replace("|", "\\|").replace("\n", " ")[:140] if fails else ""
        lines.append(f"| `{key}` | {cls} | " + " | ".join(cells) + f" | {first} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--ops", help="comma-separated OpInfo keys (default: all)")
    parser.add_argument("--out", help="report path (default docs/op_coverage.md on a full run)")
    parser.add_argument("--expected", help="expectations path (default tests/opinfo/expected.json on a full run)")
    parser.add_argument("--workdir", default="/tmp/torch_tpu_op_coverage")
    parser.add_argument("--update", action="store_true", help="merge --ops into the last full sweep's results")
    parser.add_argument("--units", help="comma-separated units to run: forward dtype names, backward, errors")
    parser.add_argument(
        "--merge-expected", action="store_true", help="replace the --ops units that ran in the expectations file"
    )
    parser.add_argument("--totals", action="store_true", help="print the expectations file's pass rates")
    args = parser.parse_args()

    default_expected = os.path.join(ROOT, "tests", "opinfo", "expected.json")
    if args.totals:
        with open(args.expected or default_expected) as f:
            print(totals_line(expected_totals(json.load(f))))
        return
    units = args.units.split(",") if args.units else FORWARD_DTYPES + ["backward", "errors"]
    dtypes = [harness.DTYPES_BY_NAME[u] for u in units if u in harness.DTYPES_BY_NAME]
    if (args.update or not args.ops) and args.units:
        parser.error("--units restricts a run to part of the OpInfos' units: use it with --ops (and --merge-expected)")

    keys = args.ops.split(",") if args.ops else sorted(harness.opinfos())
    full = not args.ops or args.update
    out = args.out or (os.path.join(ROOT, "docs", "op_coverage.md") if full else None)
    expected_path = args.expected or (os.path.join(ROOT, "tests", "opinfo", "expected.json") if full else None)

    # Only a full sweep's results (or results merged into them by --update)
    # are kept in the workdir: --update rewrites the whole report from them.
    saved_path = os.path.join(args.workdir, "results.json")
    saved = None
    if args.update:
        try:
            with open(saved_path) as f:
                saved = json.load(f)
        except (OSError, ValueError) as err:
            parser.error(f"--update needs a full sweep's results in {saved_path}: {err}")
        missing = set(harness.opinfos()) - set(saved["results"]) - set(keys)
        if missing:
            parser.error(
                f"--update: {saved_path} lacks {len(missing)} OpInfos (e.g. {sorted(missing)[0]}): "
                "it holds no full sweep; run one first"
            )

    cache_at_start = cached_programs()
    start = time.time()
    done = [0]

    def progress(key, records):
        done[0] += 1
        if done[0] % 20 == 0 or not full:
            print(f"[{time.time() - start:7.0f}s] {done[0]}/{len(keys)} {key}", file=sys.stderr, flush=True)

    results, crashes = harness.run_sweep(
        keys,
        args.workdir,
        jobs=args.jobs,
        dtypes=dtypes,
        backward="backward" in units,
        errors="errors" in units,
        progress=progress,
    )
    elapsed = time.time() - start
    if saved is not None:
        crashes = [c for c in saved["crashes"] if c["op"] not in keys] + crashes
        results = dict(saved["results"], **results)
        keys, elapsed = sorted(harness.opinfos()), saved["elapsed"]
        cache_at_start = saved.get("cache_at_start")
    if full:
        # Every OpInfo the sweep ran, those without a runnable sample on tpu
        # (CUDA-only ones: _scaled_mm, flash attention) as an empty list, so
        # --update can tell a full sweep's results from a targeted run's.
        results = {key: results.get(key, []) for key in keys}
        with open(saved_path, "w") as f:
            json.dump({"results": results, "crashes": crashes, "elapsed": elapsed, "cache_at_start": cache_at_start}, f)
    rows, totals, blocked, overloads, expected = summarize(results, keys)
    if args.merge_expected:
        slot_of = {d: d for d in FORWARD_DTYPES}
        slot_of.update(backward="backward:float32", errors="error_inputs")
        merged = merge_expected(
            args.expected or default_expected, expected, {k: [slot_of[u] for u in units] for k in keys}
        )
        for key in keys:
            print(key, json.dumps({k: v[:100] for k, v in expected[key].items()}))
        print("expectations now:", totals_line(expected_totals(merged)))
        return
    if out:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        write_report(out, rows, totals, blocked, overloads, crashes, elapsed, args.jobs, cache_at_start)
    if expected_path:
        expected["_made_with"] = {"torch": harness.torch_release()}  # tests/opinfo/test_opinfo.py reads it
        with open(expected_path, "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
    print(
        f"{len(keys)} OpInfos in {elapsed / 60:.1f} min; float32 "
        f"{pct(totals['float32_pass'], totals['float32_total'])}, bfloat16 "
        f"{pct(totals['bfloat16_pass'], totals['bfloat16_total'])}, float16 "
        f"{pct(totals['float16_pass'], totals['float16_total'])}, backward "
        f"{pct(totals['backward_pass'], totals['backward_total'])}, errors "
        f"{pct(totals['errors_pass'], totals['errors_total'])}; crashes {len(crashes)}"
    )
    for name, ops in sorted(blocked.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:30]:
        print(f"  {len(ops):4d}  {name}")


if __name__ == "__main__":
    main()
