"""transformers' own model tests on tpu, against the same tests on CPU.

    python scripts/hf_model_tests.py --tests-dir DIR [--models llama,gpt2,...] [--jobs 1] [--timeout 3600]
        [--results DIR] [--report docs/hf_model_tests.md] [--report-only]

DIR is a transformers checkout (or any tree laid out like one): it holds
tests/models/<name>/test_modeling_<name>.py next to tests/test_modeling_common.py
and the mixins those import. transformers' test files are theirs, never ours,
so they are an input: the report names the transformers version, and DIR's
PROVENANCE file (if there is one) saying where each test file came from.

Each model's test file runs twice, each run its own `nice -n 10` pytest
process with a timeout: once with TRANSFORMERS_TEST_DEVICE=cpu and once with
TRANSFORMERS_TEST_DEVICE=tpu (and TRANSFORMERS_TEST_BACKEND=torch_tpu, so the
backend is imported even where torch's backend autoload is off). transformers
(5.24 on) fills its backend tables for tpu itself (torch.tpu.manual_seed,
torch.tpu.empty_cache, torch.accelerator.device_count and synchronize), so no
TRANSFORMERS_TEST_DEVICE_SPEC file is needed. The tpu runs set float32 matmul
precision "highest" (--tpu-matmul-precision): transformers' tests compare
outputs at 1e-5 as CUDA computes them, float32 matmuls in float32 (TF32 is off
by default), while tpu's default "medium" rounds operands to bfloat16 as a TPU
does (torch_tpu/precision.py). RUN_SLOW is removed from the
environment: slow tests stay skipped. HF_HUB_OFFLINE=1: tests that need the
Hub skip or fail alike on both devices.

Outcomes come from this file loaded into pytest as a plugin (`-p
sweeps.hf_model_tests`): one JSON line per test as it finishes, so a run that
aborts or times out still reports every test before the one it died in. A
run that dies is restarted without the tests already done (the one it died
in is recorded as "crashed"), at most --restarts times.

The report lists per model the tests passed on CPU, on tpu, and every test
that passes on CPU and not on tpu with its first error line; those whose
error names CUDA or a CUDA-only kernel (flash-attention, triton, bitsandbytes
...) are listed apart: not ours to fix.
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent  # where the test runs import this package from
REPO = SCRIPTS.parent
PLUGIN = "sweeps.hf_model_tests"  # this module, as a pytest plugin
OUTCOMES_ENV = "HF_MODEL_TESTS_OUTCOMES"
PRECISION_ENV = "HF_MODEL_TESTS_MATMUL_PRECISION"
DEFAULT_MODELS = "llama,gpt2,bert,vit,t5,qwen2"
DEVICES = ("cpu", "tpu")
PASSING = {"passed", "xfailed"}

# A failure whose first line says one of these needs CUDA or a CUDA-only kernel.
CUDA_ONLY = re.compile(
    r"cuda|nvidia|flash[_ -]?attn|flash[_ -]?attention|triton|bitsandbytes|deepspeed|mamba_ssm|causal_conv1d|"
    r"liger|apex|fbgemm_gpu|torchao|kernels? (?:hub|package)",
    re.IGNORECASE,
)


# --- the pytest plugin side: runs inside each pytest process ----------------------------------------------------


def _first_error_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        text = str(report.longrepr[2])
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _append_outcome(record):
    path = os.environ.get(OUTCOMES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()


def pytest_configure(config):
    precision = os.environ.get(PRECISION_ENV)
    if precision:
        import torch

        torch.set_float32_matmul_precision(precision)  # with torch_tpu loaded, tpu's precision too


def pytest_runtest_logstart(nodeid, location):
    _append_outcome({"nodeid": nodeid, "event": "start"})


def pytest_runtest_logreport(report):
    # One outcome per test: a failing setup or teardown is the test's error; the call's result otherwise.
    # A failing subtest (unittest's self.subTest, reported by pytest 9 on its own) fails its test.
    if type(report).__name__ == "SubtestReport":
        if report.failed:
            _append_outcome({"nodeid": report.nodeid, "subtest": "failed", "message": _first_error_line(report)})
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "setup" and report.failed:
            outcome = "error"
        message = "" if outcome == "passed" else _first_error_line(report)
        _append_outcome({"nodeid": report.nodeid, "outcome": outcome, "message": message})
    elif report.when == "teardown" and report.failed:
        _append_outcome({"nodeid": report.nodeid, "outcome": "error", "message": _first_error_line(report)})


# --- reading outcomes -------------------------------------------------------------------------------------------


def read_outcomes(path):
    """{nodeid: (outcome, first error line)} from a JSON-lines file; the last word on a test wins.

    A test that started and never reported is the one its process died in: "crashed".
    """
    outcomes, started, failed_subtests = {}, [], {}
    if not pathlib.Path(path).exists():
        return outcomes
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the half-written line of a killed process
        if record.get("event") == "start":
            started.append(record["nodeid"])
        elif "subtest" in record:
            failed_subtests.setdefault(record["nodeid"], record.get("message", ""))
        else:
            outcomes[record["nodeid"]] = (record["outcome"], record.get("message", ""))
    for nodeid, message in failed_subtests.items():
        if outcomes.get(nodeid, ("passed",))[0] == "passed":
            outcomes[nodeid] = ("failed", message)
    for nodeid in started:
        outcomes.setdefault(nodeid, ("crashed", "the pytest process died in this test"))
    return outcomes


def read_junit(path):
    """{nodeid-like 'Class::test': (outcome, first error line)} from a pytest --junitxml file."""
    import xml.etree.ElementTree as ET

    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                text = element.get("message") or element.text or ""
                message = next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
                break
        outcomes[name] = (outcome, message)
    return outcomes


def compare(cpu, tpu):
    """The comparison of one model's runs: counts and the tests that pass on CPU only."""
    cpu_passed = {t for t, (o, _) in cpu.items() if o in PASSING}
    tpu_passed = {t for t, (o, _) in tpu.items() if o in PASSING}
    differences, cuda_only = [], []
    for test in sorted(cpu_passed - tpu_passed):
        outcome, message = tpu.get(test, ("not run", "the tpu run ended before this test"))
        (cuda_only if CUDA_ONLY.search(message) else differences).append((test, outcome, message))
    accelerator_only_failed = [
        (test, outcome, message)
        for test, (outcome, message) in sorted(tpu.items())
        if outcome not in PASSING | {"skipped"} and cpu.get(test, ("skipped",))[0] == "skipped"
    ]
    return {
        "accelerator_only_failed": accelerator_only_failed,
        "collected_cpu": len(cpu),
        "collected_tpu": len(tpu),
        "cpu_passed": len(cpu_passed),
        "tpu_passed": len(tpu_passed),
        "both_passed": len(cpu_passed & tpu_passed),
        "tpu_only_passed": sorted(tpu_passed - cpu_passed),
        "differences": differences,
        "cuda_only": cuda_only,
    }


def percent(part, whole):
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


# --- running ----------------------------------------------------------------------------------------------------


def model_test_file(tests_dir, model):
    return pathlib.Path(tests_dir) / "tests" / "models" / model / f"test_modeling_{model}.py"


def device_env(device, outcomes_path, extra_pythonpath, matmul_precision=None):
    env = dict(os.environ)
    env.pop("RUN_SLOW", None)
    env.pop("TRANSFORMERS_TEST_DEVICE_SPEC", None)
    env["TRANSFORMERS_TEST_DEVICE"] = device
    if device == "tpu":
        env["TRANSFORMERS_TEST_BACKEND"] = "torch_tpu"
    else:
        env.pop("TRANSFORMERS_TEST_BACKEND", None)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env[OUTCOMES_ENV] = str(outcomes_path)
    env.pop(PRECISION_ENV, None)
    if device == "tpu" and matmul_precision:
        env[PRECISION_ENV] = matmul_precision
    paths = [str(SCRIPTS)] + list(extra_pythonpath)
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def build_pytest_command(python, target, deselected, args_file):
    """The pytest command line; tests already done go through an @args file (pytest reads @file arguments)."""
    command = ["nice", "-n", "10", python, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider", "-q"]
    command += ["-W", "ignore", "--tb=line", "-o", "log_cli=false"]
    if deselected:
        args_file.write_text("\n".join(f"--deselect={nodeid}" for nodeid in sorted(deselected)) + "\n")
        command.append(f"@{args_file}")
    return command + [target]


def run_device(tests_dir, model, device, results, timeout, restarts, python, extra_pythonpath, matmul_precision=None):
    """Runs one model's test file on one device; returns its outcomes and how the run ended."""
    outcomes_path = pathlib.Path(results) / f"{model}.{device}.jsonl"
    log_path = pathlib.Path(results) / f"{model}.{device}.log"
    outcomes_path.unlink(missing_ok=True)
    target = str(model_test_file(tests_dir, model).relative_to(tests_dir))
    env = device_env(device, outcomes_path, extra_pythonpath, matmul_precision)
    deadline = time.monotonic() + timeout
    ended = "completed"
    with open(log_path, "w", encoding="utf-8") as log:
        for attempt in range(restarts + 1):
            done = set(read_outcomes(outcomes_path))
            command = build_pytest_command(python, target, done, pathlib.Path(results) / f"{model}.{device}.args")
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            process = subprocess.Popen(
                command, cwd=tests_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                ended = f"timed out after {timeout} s"
                break
            # pytest's own exit codes: 0 all passed, 1 some failed, 5 none collected; anything else ended it early.
            if returncode in (0, 1, 5):
                ended = "completed" if attempt == 0 else f"completed after {attempt} restart(s)"
                break
            ended = f"exit status {returncode}"
            if len(read_outcomes(outcomes_path)) == len(done):
                break  # nothing new ran: a collection error, not a crash in a test
    outcomes = read_outcomes(outcomes_path)
    if ended.startswith("timed out"):
        for nodeid, (outcome, _) in outcomes.items():
            if outcome == "crashed":
                outcomes[nodeid] = ("timeout", f"the run hit its {timeout} s timeout in this test")
    return outcomes, ended


def read_back(results, model, device):
    """A device's run as an earlier invocation left it in the results directory."""
    summary_path = pathlib.Path(results) / f"{model}.json"
    summary = json.loads(summary_path.read_text()).get(device, {}) if summary_path.exists() else {}
    outcomes = read_outcomes(pathlib.Path(results) / f"{model}.{device}.jsonl")
    return {"ended": "(not run)", "seconds": 0, **summary, "outcomes": outcomes}


def run_model(args, model):
    path = model_test_file(args.tests_dir, model)
    if not path.exists():
        return model, {"missing": str(path)}
    runs = {}
    for device in DEVICES:
        if device not in getattr(args, "devices", DEVICES):
            runs[device] = read_back(args.results, model, device)
            continue
        started = time.monotonic()
        outcomes, ended = run_device(
            args.tests_dir,
            model,
            device,
            args.results,
            args.timeout,
            args.restarts,
            args.python,
            args.pythonpath,
            getattr(args, "tpu_matmul_precision", None),
        )
        runs[device] = {"outcomes": outcomes, "ended": ended, "seconds": round(time.monotonic() - started)}
        runs[device]["torch_tpu"] = torch_tpu_commit()
        if device == "tpu":
            runs[device]["matmul_precision"] = getattr(args, "tpu_matmul_precision", None) or "medium"
        print(f"{model} {device}: {len(outcomes)} tests, {ended}, {runs[device]['seconds']} s", flush=True)
    return model, runs


# --- the report -------------------------------------------------------------------------------------------------


def render_report(models, runs, header):
    """Markdown: the totals table, then per model its CPU-only passes with their first error lines."""
    lines = [*header, "", "## Totals", ""]
    lines.append(
        "| model | CPU passed | tpu passed | passed on both | tpu/CPU | CPU-pass tpu-fail: ours | needs CUDA |"
    )
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    sums = dict.fromkeys(("cpu", "tpu", "both", "diff", "cuda"), 0)
    details = []
    for model in models:
        run = runs.get(model, {})
        if "missing" in run or not run:
            lines.append(f"| {model} | - | - | - | - | no test file ({run.get('missing', 'not run')}) | |")
            continue
        cmp = compare(run["cpu"]["outcomes"], run["tpu"]["outcomes"])
        n_diff = len(cmp["differences"])
        n_cuda = len(cmp["cuda_only"])
        lines.append(
            f"| {model} | {cmp['cpu_passed']} | {cmp['tpu_passed']} | {cmp['both_passed']} | "
            f"{percent(cmp['both_passed'], cmp['cpu_passed'])} | {n_diff} | {n_cuda} |"
        )
        for key, value in zip(sums, (cmp["cpu_passed"], cmp["tpu_passed"], cmp["both_passed"], n_diff, n_cuda)):
            sums[key] += value
        details += ["", f"### {model}", ""]
        for device in DEVICES:
            d = run[device]
            details.append(
                f"- {device}: {len(d['outcomes'])} tests reported, {_count(d['outcomes'])}; "
                f"run {d['ended']} in {d['seconds']} s"
                + (f", float32 matmul precision {d['matmul_precision']}" if "matmul_precision" in d else "")
                + (f", torch_tpu at {d['torch_tpu']}" if "torch_tpu" in d else "")
            )
        if cmp["tpu_only_passed"]:
            details.append(f"- passed on tpu only: {', '.join(_short(t) for t in cmp['tpu_only_passed'])}")
        if cmp["differences"]:
            details += ["", "Passed on CPU, not on tpu:", ""]
            details += [f"- `{_short(t)}` ({o}): {_cell(m)}" for t, o, m in cmp["differences"]]
        if cmp["accelerator_only_failed"]:
            details += ["", "Skipped on CPU (accelerator-only tests), failed on tpu:", ""]
            details += [f"- `{_short(t)}` ({o}): {_cell(m)}" for t, o, m in cmp["accelerator_only_failed"]]
        if cmp["cuda_only"]:
            details += ["", "Passed on CPU, not on tpu, needing CUDA or a CUDA-only kernel (not ours):", ""]
            details += [f"- `{_short(t)}` ({o}): {_cell(m)}" for t, o, m in cmp["cuda_only"]]
    lines.append(
        f"| **all** | {sums['cpu']} | {sums['tpu']} | {sums['both']} | {percent(sums['both'], sums['cpu'])} | "
        f"{sums['diff']} | {sums['cuda']} |"
    )
    return "\n".join(lines + ["", "## Per model"] + details) + "\n"


def _count(outcomes):
    counts = {}
    for outcome, _ in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))


def _short(nodeid):
    return nodeid.rsplit("/", 1)[-1].split("::", 1)[-1]


def _cell(message):
    return message.replace("|", "\\|").replace("`", "'") or "(no message)"


FINDINGS = "\n## Findings\n"


def kept_findings(report_path):
    """The report's hand-written "## Findings" section (causes, reproducers, fixes), kept across reruns."""
    text = report_path.read_text() if report_path.exists() else ""
    return text[text.index(FINDINGS) :] if FINDINGS in text else ""


def torch_tpu_commit():
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return head.stdout.strip()


def report_header(args, command):
    import torch
    import transformers

    lines = [
        "# transformers' own model tests on tpu",
        "",
        "Each model's test file from transformers' test suite runs twice, with `TRANSFORMERS_TEST_DEVICE=cpu` and",
        "with `TRANSFORMERS_TEST_DEVICE=tpu`; a test that passes on CPU should pass on tpu. Slow tests (`RUN_SLOW`)",
        "stay off, the Hub is offline. `tpu/CPU` is the share of the tests passing on CPU that also pass on tpu.",
        "The script and how it runs: `scripts/hf_model_tests.py` (its docstring).",
        "",
        f"- transformers {transformers.__version__}, torch {torch.__version__}; torch_tpu: each run's commit is on its "
        f"line under Per model (this report written at {torch_tpu_commit()})",
        f"- command: `{command}`",
    ]
    provenance = pathlib.Path(args.tests_dir) / "PROVENANCE"
    if provenance.exists():
        lines += ["- test files (the tests directory's PROVENANCE file):", ""]
        lines += [f"  {line}" if line.strip() else "" for line in provenance.read_text().splitlines()]
    else:
        lines.append(f"- test files: {args.tests_dir} (no PROVENANCE file)")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests-dir", required=True, type=pathlib.Path)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--devices", default="cpu,tpu", help="devices to run now; the others are read back from --results"
    )
    parser.add_argument("--timeout", type=int, default=3600, help="seconds for one model on one device")
    parser.add_argument("--restarts", type=int, default=5, help="restarts of a run that died in a test")
    parser.add_argument("--results", type=pathlib.Path, default=pathlib.Path("/tmp/hf_model_tests"))
    parser.add_argument("--report", type=pathlib.Path, default=REPO / "docs" / "hf_model_tests.md")
    parser.add_argument("--pythonpath", action="append", default=[], help="more import paths for the test runs")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--tpu-matmul-precision",
        default="highest",
        choices=("highest", "high", "medium"),
        help="float32 matmul precision of the tpu runs (default highest: see the docstring)",
    )
    parser.add_argument("--report-only", action="store_true", help="write the report from --results' outcomes")
    args = parser.parse_args(argv)
    args.tests_dir = args.tests_dir.resolve()
    args.results.mkdir(parents=True, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    args.devices = [d for d in args.devices.split(",") if d]
    # A report read back names the command that makes the runs it reads.
    words = [w for w in (argv if argv is not None else sys.argv[1:]) if w != "--report-only"]
    command = "python scripts/hf_model_tests.py " + shlex.join(words)

    runs = {}
    if args.report_only:
        for model in models:
            if all((args.results / f"{model}.{d}.jsonl").exists() for d in DEVICES):
                runs[model] = {d: read_back(args.results, model, d) for d in DEVICES}
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for model, run in pool.map(lambda m: run_model(args, m), models):
                runs[model] = run
                summary = {d: {k: v for k, v in r.items() if k != "outcomes"} for d, r in run.items() if d in DEVICES}
                (args.results / f"{model}.json").write_text(json.dumps(summary))
    report = render_report(models, runs, report_header(args, command))
    args.report.write_text(report + kept_findings(args.report))
    print(f"wrote {args.report}")


if __name__ == "__main__":
    main()
