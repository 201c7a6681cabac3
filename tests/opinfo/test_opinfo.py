"""CI light sweep of PyTorch's OpInfo database on the tpu device.

For each OpInfo, one sample per dtype (float32, bfloat16) runs on tpu and on
CPU. The test asserts what tests/opinfo/expected.json (written by the full
sweep, scripts/op_coverage.py) says is supported: every (OpInfo, dtype) marked
"pass" must still pass — a regression test. Entries marked "missing" or
"fail:<reason>" are not run; an OpInfo with no "pass" entry is skipped with
the recorded reasons. After a lowering lands, rerun scripts/op_coverage.py to
raise the expectations.

expected.json says which torch's OpInfo database made it ("_made_with").
Under another torch release, whose database lacks some of those OpInfos
(torch 2.14 removed cholesky's and qr's) and has new ones, those entries
skip, naming both releases; the others are held to as recorded.
"""

import collections
import json
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

import torch_tpu  # noqa: E402

EXPECTED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected.json")
LIGHT_DTYPES = ("float32", "bfloat16")
# A sample the harness cannot compare (sparse input) is passed over; at most
# this many are tried per dtype.
MAX_TRIES = 3

with open(EXPECTED_PATH) as f:
    EXPECTED = json.load(f)
EXPECTED_TORCH = EXPECTED.pop("_made_with", {}).get("torch")
THIS_TORCH = harness.torch_release()
# Entries another torch's op_db lacks or adds skip; without a record of the
# torch that made the expectations, every entry is held to.
OTHER_TORCH = EXPECTED_TORCH not in (None, THIS_TORCH)

COUNTS = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def _fallback_off_and_counts(request):
    """The CPU fallback is off, so a lowering that disappears fails as
    missing; the counts are printed at the end of the module."""
    previous = torch_tpu.cpu_fallback(False)
    yield
    torch_tpu.cpu_fallback(previous)
    expected = collections.Counter()
    for entry in EXPECTED.values():
        for d in LIGHT_DTYPES:
            if d in entry:
                expected[entry[d].split(":")[0]] += 1
    line = (
        f"opinfo light sweep: {COUNTS['pass']} (op, dtype) passed, {COUNTS['failed']} regressed, "
        f"{COUNTS['skip']} not comparable; expected.json float32+bfloat16: {expected['pass']} pass, "
        f"{expected['missing']} missing, {expected['fail']} fail"
    )
    request.config.pluginmanager.register(_CountsLine(line), "opinfo_light_counts")


class _CountsLine:
    """A plugin printing the counts in pytest's terminal summary (output
    during a test is captured)."""

    def __init__(self, line):
        self.line = line

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(self.line)


def _light_outcome(key, op, dtype_name):
    """Outcome of the first comparable sample of dtype."""
    outcome = {"status": "skip", "detail": "no samples"}
    for sample in harness.forward_samples(op, harness.DTYPES_BY_NAME[dtype_name], limit=MAX_TRIES):
        outcome = harness.run_forward(key, op, sample, harness.DTYPES_BY_NAME[dtype_name])
        if outcome["status"] != "skip":
            break
    return outcome


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_opinfo_sample_still_matches_cpu(key):
    entry = EXPECTED[key]
    checked = [d for d in LIGHT_DTYPES if entry.get(d) == "pass"]
    if not checked:
        pytest.skip("expected.json: " + "; ".join(f"{d}={entry.get(d, 'unsupported')}" for d in LIGHT_DTYPES))
    op = harness.opinfos().get(key)
    if op is None and OTHER_TORCH:
        pytest.skip(f"an OpInfo of torch {EXPECTED_TORCH}'s op_db (expected.json's), not of torch {THIS_TORCH}'s")
    assert op is not None, f"{key} is in expected.json but not in this torch's op_db: rerun scripts/op_coverage.py"
    failures = []
    for dtype_name in checked:
        outcome = _light_outcome(key, op, dtype_name)
        if outcome["status"] == "pass":
            COUNTS["pass"] += 1
        elif outcome["status"] == "skip":
            COUNTS["skip"] += 1
        else:
            COUNTS["failed"] += 1
            failures.append(f"{dtype_name}: {outcome['status']}: {outcome.get('detail')}")
    assert not failures, f"{key} passed in the full sweep, now: " + "; ".join(failures)


def test_expected_json_covers_every_opinfo():
    """A new torch brings new OpInfos: the expectations must be regenerated."""
    absent = sorted(set(harness.opinfos()) - set(EXPECTED))
    if absent and OTHER_TORCH:
        pytest.skip(
            f"torch {THIS_TORCH}'s op_db has OpInfos that torch {EXPECTED_TORCH}'s (expected.json's) has not: {absent}"
        )
    assert not absent, f"OpInfos without expectations (rerun scripts/op_coverage.py): {absent[:10]}"


def test_expected_json_says_which_torch_made_it():
    # scripts/op_coverage.py records the sweep's torch release with its results.
    assert EXPECTED_TORCH is not None, "expected.json has no '_made_with': {'torch': release} entry"


def test_harness_counts_a_wrong_result_as_wrong():
    op = harness.opinfos()["neg"]
    sample = harness.forward_samples(op, torch.float32, limit=1)[0]
    sample.output_process_fn_grad = lambda out: out + 1 if out.device.type == "tpu" else out
    assert harness.run_forward("neg", op, sample, torch.float32)["status"] == "wrong"


def test_harness_counts_a_missing_lowering_as_missing():
    message = (
        "The operator 'aten::foo.out' is not currently implemented for the tpu device. "
        "Enable the CPU fallback with torch_tpu.cpu_fallback(True)"
    )
    status, _, missing = harness.classify_exception(NotImplementedError(message))
    assert (status, missing) == ("missing", "aten::foo.out")
    assert harness.classify_exception(RuntimeError("boom"))[0] == "error"


def test_harness_compares_unspecified_tie_order_by_the_values_picked():
    op = harness.opinfos()["sort"]
    sample = harness.forward_samples(op, torch.float32, limit=1)[0]
    sample.input = torch.tensor([2.0, 1.0, 2.0, 1.0])
    sample.args, sample.kwargs = (0,), {}
    cpu_values, cpu_indices = torch.sort(sample.input, 0)
    other_tie_order = (cpu_values, cpu_indices[[1, 0, 3, 2]])
    assert harness._picked_values("sort", sample, other_tie_order)[1].equal(cpu_values)
    wrong_order = (cpu_values, cpu_indices.flip(0))
    assert not harness._picked_values("sort", sample, wrong_order)[1].equal(cpu_values)
    sample.kwargs = {"stable": True}  # a stable sort's indices stay compared exactly
    assert harness._picked_values("sort", sample, other_tie_order)[1].equal(other_tie_order[1])


def test_harness_compares_per_device_statistics_in_cpu_dtype():
    expected = (torch.ones(2, dtype=torch.bfloat16), torch.full((2,), 0.5, dtype=torch.bfloat16))
    actual = (torch.ones(2, dtype=torch.bfloat16), torch.full((2,), 0.5))
    assert harness.compare(actual, expected, float32_results=(1,)) is None
    assert "dtype" in harness.compare(actual, expected)


def _neg_float16_sample(cpu_error, tpu_error):
    """neg's first float16 sample, its result shifted by cpu_error on CPU and
    tpu_error on tpu; the float64 reference stays exact."""
    op = harness.opinfos()["neg"]
    sample = harness.forward_samples(op, torch.float16, limit=1)[0]

    def shifted(out):
        if out.dtype == torch.float64:
            return out
        return out + (tpu_error if out.device.type == "tpu" else cpu_error)

    sample.output_process_fn_grad = shifted
    return op, sample


def test_harness_passes_a_low_precision_result_closer_to_float64_than_cpus():
    op, sample = _neg_float16_sample(cpu_error=0.25, tpu_error=0.0)
    outcome = harness.run_forward("neg", op, sample, torch.float16)
    assert outcome == {"status": "pass", "detail": "differs from CPU, at least as close to float64"}


def test_harness_counts_a_low_precision_result_farther_from_float64_than_cpus_as_wrong():
    op, sample = _neg_float16_sample(cpu_error=0.25, tpu_error=-0.5)
    assert harness.run_forward("neg", op, sample, torch.float16)["status"] == "wrong"
    op, sample = _neg_float16_sample(cpu_error=float("nan"), tpu_error=0.0)
    assert harness.run_forward("neg", op, sample, torch.float16)["status"] == "wrong"
