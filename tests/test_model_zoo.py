"""The fast subset of scripts/model_zoo.py (the sweep over torchvision's
models and a timm selection): the same checks, in this process, on a few
small models of different kinds, and the sweep's bookkeeping."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import model_zoo  # noqa: E402


@pytest.mark.parametrize(
    "source,name,category",
    [
        ("torchvision", "squeezenet1_1", "classification"),
        ("torchvision", "shufflenet_v2_x0_5", "classification"),
        ("timm", "vit_tiny_patch16_224", "timm vit"),
        # Detection models (nms and roi_align inside a model) take two minutes
        # each on a cold cache: the sweep runs them, tests/ops/test_torchvision_ops.py
        # checks their ops.
    ],
)
def test_small_model_passes_eval_and_train(source, name, category):
    results = model_zoo.run_model(source, name, category)
    assert set(results) == {"eval", "train"}, results
    assert all(outcome == "pass" for outcome, _ in results.values()), results


def test_every_torchvision_model_is_listed_with_its_category():
    models = dict(model_zoo.torchvision_models())
    assert models["resnet18"] == "classification" and models["maskrcnn_resnet50_fpn"] == "detection"
    assert models["deeplabv3_resnet50"] == "segmentation" and models["r3d_18"] == "video"
    assert models["raft_small"] == "optical flow" and models["quantized_resnet18"] == "quantized"


def test_timm_selection_is_broad_and_exists():
    import timm

    selection = model_zoo.timm_models()
    names = [name for name, _ in selection]
    assert len(set(names)) == len(names) >= 100
    assert {family for _, family in selection} == {"timm convnet", "timm vit", "timm hybrid", "timm mlp"}
    assert set(names) <= set(timm.list_models())


def test_outcomes_name_the_missing_op_or_the_error():
    missing = NotImplementedError("The operator 'aten::_ctc_loss' is not currently implemented for the tpu device.")
    assert model_zoo.outcome(missing) == ("missing op", "aten::_ctc_loss")
    assert model_zoo.outcome(model_zoo.WrongValues("eval output tensor 0: off")) == (
        "wrong values",
        "eval output tensor 0: off",
    )
    assert model_zoo.outcome(RuntimeError("boom\nmore")) == ("error", "RuntimeError: boom")


def test_models_given_a_longer_timeout_are_in_the_zoo():
    names = {name for _, name, _ in model_zoo.all_models()}
    assert set(model_zoo.TIMEOUT_FACTOR) <= names, set(model_zoo.TIMEOUT_FACTOR) - names


def test_merged_report_keeps_earlier_rows_and_replaces_rerun_ones(tmp_path):
    # Coverage accumulates across runs: --merge (and --next) read the report's
    # rows back and this run's models replace or join them.
    record = model_zoo._record
    passing = {"eval": ("pass", ""), "train": ("pass", "")}
    in_float64 = {"eval": ("pass", ""), "train": ("pass", "in float64 (float32: gradient of fc.bias: 2e-4)")}
    earlier = [
        record("torchvision", "resnet18", "classification", 20.0, in_float64),
        record("timm", "rexnet_100", "timm convnet", 240.5, {"process": ("error", "timed out after 240 s")}),
        record("torchvision", "vgg11", "classification", 9.0, {**passing, "train": ("missing op", "aten::foo")}),
        record("torchvision", "quantized_resnet18", "", 0.0, {"build": ("cannot build", "CannotBuild: int8")}),
    ]
    path = str(tmp_path / "report.md")
    model_zoo.write_report(earlier, path, 270.0, 1, "python scripts/model_zoo.py")
    key = lambda r: (r["source"], r["name"])
    assert sorted(model_zoo.read_report(path), key=key) == sorted(earlier, key=key)
    later = [
        record("timm", "rexnet_100", "timm convnet", 300.0, passing),
        record("timm", "vit_tiny_patch16_224", "timm vit", 30.0, passing),
    ]
    model_zoo.write_report(model_zoo.merge(model_zoo.read_report(path), later), path, 330.0, 1, "", merged=True)
    merged = {r["name"]: r for r in model_zoo.read_report(path)}
    assert set(merged) == {"resnet18", "rexnet_100", "vgg11", "quantized_resnet18", "vit_tiny_patch16_224"}
    assert merged["rexnet_100"]["results"] == passing and merged["resnet18"]["results"] == in_float64
    with open(path) as f:
        text = f.read()
    assert "**timm: 2 of 2 models pass both checks (100.0%)**" in text
    assert "**torchvision: 1 of 2 models pass both checks (50.0%)**" in text
    assert "5 of the " in text and "run in batches whose results `--merge` accumulates" in text
