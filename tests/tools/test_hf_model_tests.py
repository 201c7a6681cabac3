"""scripts/hf_model_tests.py's machinery: outcomes read back from its pytest
plugin (a run that dies keeps what ran), a junit file read the same way, the
CPU/tpu comparison with CUDA-only failures apart, the report, and one real
run of a toy test file on both devices. transformers' own test files are not
ours and CI has no copy of them: the real runs are the script's
(docs/hf_model_tests.md)."""

import argparse
import json
import sys
import textwrap

from sweeps import hf_model_tests

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.models.toy.test_modeling_toy.ToyModelTest" name="test_forward" time="0.1"/>
  <testcase classname="tests.models.toy.test_modeling_toy.ToyModelTest" name="test_sdpa" time="0.1">
    <failure message="AssertionError: Tensor-likes are not close!&#10;Mismatched elements: 3 / 8">trace</failure>
  </testcase>
  <testcase classname="tests.models.toy.test_modeling_toy.ToyModelTest" name="test_flash" time="0.1">
    <failure message="RuntimeError: FlashAttention only supports Ampere GPUs or newer.">trace</failure>
  </testcase>
  <testcase classname="tests.models.toy.test_modeling_toy.ToyModelTest" name="test_hub" time="0.0">
    <skipped type="pytest.skip" message="offline">skip</skipped>
  </testcase>
</testsuite></testsuites>
"""


def test_junit_outcomes_give_each_test_its_first_error_line(tmp_path):
    path = tmp_path / "tpu.xml"
    path.write_text(JUNIT)
    outcomes = hf_model_tests.read_junit(path)
    assert outcomes == {
        "ToyModelTest::test_forward": ("passed", ""),
        "ToyModelTest::test_sdpa": ("failed", "AssertionError: Tensor-likes are not close!"),
        "ToyModelTest::test_flash": ("failed", "RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
        "ToyModelTest::test_hub": ("skipped", "offline"),
    }


def test_comparison_lists_cpu_only_passes_and_cuda_failures_apart(tmp_path):
    (tmp_path / "tpu.xml").write_text(JUNIT)
    tpu = hf_model_tests.read_junit(tmp_path / "tpu.xml")
    cpu = {test: ("passed", "") for test in tpu}
    cpu["ToyModelTest::test_hub"] = ("skipped", "offline")
    cpu["ToyModelTest::test_gone"] = ("passed", "")
    result = hf_model_tests.compare(cpu, tpu)
    assert (result["cpu_passed"], result["tpu_passed"], result["both_passed"]) == (4, 1, 1)
    assert result["differences"] == [
        ("ToyModelTest::test_gone", "not run", "the tpu run ended before this test"),
        ("ToyModelTest::test_sdpa", "failed", "AssertionError: Tensor-likes are not close!"),
    ]
    assert [test for test, _, _ in result["cuda_only"]] == ["ToyModelTest::test_flash"]


def test_a_run_that_died_keeps_its_outcomes_and_names_the_test_it_died_in(tmp_path):
    path = tmp_path / "toy.tpu.jsonl"
    records = [
        {"nodeid": "t.py::A::test_a", "event": "start"},
        {"nodeid": "t.py::A::test_a", "outcome": "passed", "message": ""},
        {"nodeid": "t.py::A::test_b", "event": "start"},
        {"nodeid": "t.py::A::test_b", "subtest": "failed", "message": "AssertionError: 1 != 2"},
        {"nodeid": "t.py::A::test_b", "outcome": "passed", "message": ""},
        {"nodeid": "t.py::A::test_c", "event": "start"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"nodeid": "t.py::A::te')
    assert hf_model_tests.read_outcomes(path) == {
        "t.py::A::test_a": ("passed", ""),
        "t.py::A::test_b": ("failed", "AssertionError: 1 != 2"),
        "t.py::A::test_c": ("crashed", "the pytest process died in this test"),
    }


def test_report_has_the_totals_and_every_difference():
    cpu = {"f.py::T::test_a": ("passed", ""), "f.py::T::test_b": ("passed", ""), "f.py::T::test_c": ("passed", "")}
    tpu = {
        "f.py::T::test_a": ("passed", ""),
        "f.py::T::test_b": ("failed", "RuntimeError: wrong | value"),
        "f.py::T::test_c": ("failed", "AssertionError: Torch not compiled with CUDA enabled"),
    }
    runs = {"toy": {d: {"outcomes": o, "ended": "completed", "seconds": 1} for d, o in (("cpu", cpu), ("tpu", tpu))}}
    report = hf_model_tests.render_report(["toy", "absent"], runs, ["# title"])
    assert "| toy | 3 | 1 | 1 | 33.3% | 1 | 1 |" in report
    assert "| **all** | 3 | 1 | 1 | 33.3% | 1 | 1 |" in report
    assert "- `T::test_b` (failed): RuntimeError: wrong \\| value" in report
    cuda_part = report.split("CUDA-only kernel (not ours):")[1]
    assert "T::test_c" in cuda_part and "T::test_b" not in cuda_part
    assert "| absent | - |" in report


TOY_TESTS = """
import os
import unittest

import torch
from transformers.testing_utils import torch_device


class ToyModelTest(unittest.TestCase):
    def test_1_same_values_on_every_device(self):
        x = torch.arange(6.0, device=torch_device).reshape(2, 3)
        torch.testing.assert_close((x @ x.T).cpu(), torch.tensor([[5.0, 14.0], [14.0, 50.0]]))

    def test_2_device_is_cpu(self):
        self.assertEqual(torch_device, "cpu")

    def test_3_dies_on_tpu(self):
        if torch_device == "tpu":
            os.abort()

    def test_4_needs_cuda_off_cpu(self):
        if torch_device != "cpu":
            torch.empty(1, device="cuda")

    def test_5_runs_after_the_abort(self):
        self.assertEqual(torch.ones(2, device=torch_device).sum().item(), 2.0)

    def test_6_tpu_runs_at_the_precision_asked_for(self):
        if torch_device == "tpu":
            import torch_tpu

            self.assertEqual(torch_tpu.get_matmul_precision(), "high")
"""


def test_a_real_run_compares_both_devices_and_restarts_past_a_crash(tmp_path):
    toy = tmp_path / "tests" / "models" / "toy"
    toy.mkdir(parents=True)
    (toy / "test_modeling_toy.py").write_text(textwrap.dedent(TOY_TESTS))
    results = tmp_path / "results"
    results.mkdir()
    args = argparse.Namespace(
        tests_dir=tmp_path,
        results=results,
        timeout=600,
        restarts=2,
        python=sys.executable,
        pythonpath=[],
        tpu_matmul_precision="high",
    )
    _, runs = hf_model_tests.run_model(args, "toy")
    assert runs["cpu"]["ended"] == "completed"
    assert runs["tpu"]["ended"] == "completed after 1 restart(s)"
    tpu = {test.rsplit("::", 1)[1]: outcome for test, (outcome, _) in runs["tpu"]["outcomes"].items()}
    assert tpu == {
        "test_1_same_values_on_every_device": "passed",
        "test_2_device_is_cpu": "failed",
        "test_3_dies_on_tpu": "crashed",
        "test_4_needs_cuda_off_cpu": "failed",
        "test_5_runs_after_the_abort": "passed",
        "test_6_tpu_runs_at_the_precision_asked_for": "passed",
    }
    assert runs["tpu"]["matmul_precision"] == "high"
    assert runs["tpu"]["torch_tpu"] == hf_model_tests.torch_tpu_commit() != ""
    result = hf_model_tests.compare(runs["cpu"]["outcomes"], runs["tpu"]["outcomes"])
    assert result["cpu_passed"] == 6 and result["both_passed"] == 3
    assert [t.rsplit("::", 1)[1] for t, _, _ in result["differences"]] == ["test_2_device_is_cpu", "test_3_dies_on_tpu"]
    assert [t.rsplit("::", 1)[1] for t, _, _ in result["cuda_only"]] == ["test_4_needs_cuda_off_cpu"]
    assert (
        "'tpu' != 'cpu'" in dict((t.rsplit("::", 1)[1], m) for t, _, m in result["differences"])["test_2_device_is_cpu"]
    )


def test_each_run_names_the_torch_tpu_commit_it_ran_at():
    # Models are run over days and read back together: a device's line says which torch_tpu it ran.
    outcomes = {"f.py::T::test_a": ("passed", "")}
    runs = {
        "old": {
            d: {"outcomes": outcomes, "ended": "completed", "seconds": 1, "torch_tpu": "417d60d"}
            for d in ("cpu", "tpu")
        },
        "unrecorded": {d: {"outcomes": outcomes, "ended": "completed", "seconds": 1} for d in ("cpu", "tpu")},
    }
    report = hf_model_tests.render_report(["old", "unrecorded"], runs, ["# title"])
    old, unrecorded = report.split("### old")[1].split("### unrecorded")
    assert old.count("run completed in 1 s, torch_tpu at 417d60d") == 2
    assert "torch_tpu at" not in unrecorded


def test_rewriting_the_report_keeps_its_findings_section(tmp_path):
    report = tmp_path / "report.md"
    assert hf_model_tests.kept_findings(report) == ""
    report.write_text("# old totals\n\n## Findings\n\n- aten::foo: fixed\n")
    assert hf_model_tests.kept_findings(report) == "\n## Findings\n\n- aten::foo: fixed\n"


def test_accelerator_only_tests_that_fail_on_tpu_are_listed():
    cpu = {"f.py::T::test_offload": ("skipped", "test requires accelerator"), "f.py::T::test_a": ("passed", "")}
    tpu = {
        "f.py::T::test_offload": ("failed", "AssertionError: Tensor-likes are not close!"),
        "f.py::T::test_a": ("passed", ""),
    }
    result = hf_model_tests.compare(cpu, tpu)
    assert result["accelerator_only_failed"] == [
        ("f.py::T::test_offload", "failed", "AssertionError: Tensor-likes are not close!")
    ]
    assert result["differences"] == [] and result["both_passed"] == 1
