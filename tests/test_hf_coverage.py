"""The fast subset of scripts/hf_coverage.py (the sweep over every
architecture): the same checks, in this process, on a decoder and a vision
model, and the sweep's classification of outcomes."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import hf_coverage  # noqa: E402


@pytest.mark.parametrize("model_type", ["llama", "vit"])
def test_tiny_architecture_passes_every_check(model_type):
    (arch,) = hf_coverage.architectures({model_type})
    results = hf_coverage.run_model(*arch)
    assert "build" not in results, results
    expected = {"forward", "train", "compile"} | ({"generate"} if arch[3] else set())
    assert set(results) == expected
    assert all(outcome == "pass" for outcome, _ in results.values()), results


def test_every_architecture_is_listed_once_under_its_most_specific_head():
    archs = hf_coverage.architectures()
    types = [a[0] for a in archs]
    assert len(types) == len(set(types)) and len(types) > 500
    heads = {a[0]: a[1] for a in archs}
    assert heads["llama"] == "causal_lm" and heads["t5"] == "seq2seq_lm" and heads["vit"] == "image_classification"


def test_outcomes_name_the_missing_op_or_the_error():
    missing = NotImplementedError("The operator 'aten::_ctc_loss' is not currently implemented for the tpu device.")
    assert hf_coverage.outcome(missing) == ("missing op", "aten::_ctc_loss")
    assert hf_coverage.outcome(hf_coverage.WrongValues("forward tensor 0: off")) == (
        "wrong values",
        "forward tensor 0: off",
    )
    assert hf_coverage.outcome(RuntimeError("boom\nmore")) == ("error", "RuntimeError: boom")
