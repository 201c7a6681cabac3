"""The fast subset of scripts/hf_coverage.py (the sweep over every
architecture): the same checks, in this process, on a decoder and a vision
model, and the sweep's classification of outcomes."""

import sys

import pytest
import torch
from sweeps import child_process, hf_coverage


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


def test_merged_report_keeps_earlier_rows_and_replaces_rerun_ones(tmp_path):
    # Coverage accumulates across runs: --merge reads the report's rows back
    # and this run's architectures replace or join them.
    record = hf_coverage._record
    passing = {"forward": ("pass", ""), "train": ("pass", ""), "compile": ("pass", "")}
    earlier = [
        record("llama", "causal_lm", "LlamaForCausalLM", 20.0, {**passing, "generate": ("pass", "")}),
        record("bert", "masked_lm", "BertForMaskedLM", 10.0, {**passing, "train": ("missing op", "aten::foo")}),
        record("opt", "causal_lm", "OPTForCausalLM", 5.0, {"process": ("error", "timed out after 600 s")}),
        record("swin", "", "", 0.0, {"build": ("cannot build tiny", "IndexError: list index out of range")}),
    ]
    path = str(tmp_path / "report.md")
    hf_coverage.write_report(earlier, path, 35.0, 1)
    assert sorted(hf_coverage.read_report(path), key=lambda r: r["model_type"]) == sorted(
        earlier, key=lambda r: r["model_type"]
    )
    later = [
        record("bert", "masked_lm", "BertForMaskedLM", 12.0, passing),
        record("swin", "image_classification", "SwinForImageClassification", 50.0, passing),
    ]
    hf_coverage.write_report(hf_coverage.merge(hf_coverage.read_report(path), later), path, 62.0, 1, merged=True)
    merged = {r["model_type"]: r for r in hf_coverage.read_report(path)}
    assert set(merged) == {"llama", "bert", "opt", "swin"}
    assert merged["bert"]["results"] == passing and merged["swin"]["results"] == passing
    assert merged["opt"]["results"] == earlier[2]["results"]
    with open(path) as f:
        text = f.read()
    assert "**3 of 4 architectures that build tiny pass every check (75.0%)**" in text
    assert "4 of the " in text and "1 min in all" in text


def test_train_equal_in_float64_only_is_a_pass_the_report_names_and_reads_back(tmp_path):
    record = hf_coverage._record
    noise = "in float64 (float32: encoder.bias after AdamW tensor 0: Greatest absolute difference: 2e-05)"
    records = [
        record("llama", "causal_lm", "LlamaForCausalLM", 20.0, {"forward": ("pass", ""), "train": ("pass", noise)}),
        record("bert", "masked_lm", "BertForMaskedLM", 10.0, {"forward": ("pass", ""), "train": ("pass", "")}),
    ]
    path = str(tmp_path / "report.md")
    hf_coverage.write_report(records, path, 30.0, 1)
    with open(path) as f:
        text = f.read()
    assert "**2 of 2 architectures that build tiny pass every check (100.0%)**, 1 of them training equal" in text
    assert "| pass (float64): float32: encoder.bias after AdamW" in text
    back = {r["model_type"]: r for r in hf_coverage.read_report(path)}
    assert back["llama"]["results"]["train"] == ("pass", noise)
    assert back["bert"]["results"]["train"] == ("pass", "")


def test_a_dual_encoder_gets_the_other_modality_its_forward_requires():
    # CLIPModel embeds text and images together: its main input alone is not enough to run it.
    import transformers

    config = hf_coverage.shrink(transformers.AutoConfig.for_model("clip"))
    model = transformers.CLIPModel(config)
    alone, _ = hf_coverage.make_inputs(model, config, "base")
    both, _ = hf_coverage.make_inputs(model, config, "base", layout=("companions",))
    assert set(alone) == {"input_ids"}
    assert set(both) == {"input_ids", "pixel_values"}
    size = config.vision_config.image_size
    assert both["pixel_values"].shape == (hf_coverage.BATCH, 3, size, size)
    model(**both)


def test_tiny_layer_types_keep_every_kind_a_hybrid_mixes():
    # bailing_hybrid has full attention every sixth layer: its first two layers alone have none, and then its
    # cache cannot tell a sequence length.
    hybrid = ["linear_attention"] * 5 + ["full_attention"] + ["linear_attention"] * 5
    assert hf_coverage._tiny_layer_types(hybrid, 2) == ["linear_attention", "full_attention"]
    assert hf_coverage._tiny_layer_types(["full_attention"] * 8, 2) == ["full_attention"] * 2
    assert hf_coverage._tiny_layer_types(["a", "b", "c", "a"], 2) == ["a", "b"]


def test_per_stage_drop_rates_are_turned_off_too():
    # CvT's stochastic depth is a list per stage ([0.0, 0.0, 0.1]): left on, train mode drops different paths on
    # each device and the train check compared two random draws.
    transformers = pytest.importorskip("transformers")
    config = hf_coverage.shrink(transformers.AutoConfig.for_model("cvt"))
    assert list(config.drop_path_rate) == [0.0] * 3
    assert list(config.drop_rate) == [0.0] * 3


def test_a_sub_config_gets_the_overrides_of_its_own_model_type():
    # VibeVoice's audio tower is an acoustic tokenizer config: at the shrinker's sizes alone (six stages doubling
    # to 2048 filters, tuples it leaves alone) a sweep child passed 9 GB. Its overrides reach it inside VibeVoice
    # as they reach the tokenizer built by itself, noise scale included.
    transformers = pytest.importorskip("transformers")
    config = hf_coverage.shrink(transformers.AutoConfig.for_model("vibevoice"))
    for tokenizer in (config.audio_config, config.semantic_model_config):
        assert tokenizer.num_filters == 8 and list(tokenizer.downsampling_ratios) == [2, 2]
        assert tokenizer.vae_std == 0.0
    assert config.audio_token_id < hf_coverage.TINY["vocab_size"]
    alone = hf_coverage.shrink(transformers.AutoConfig.for_model("vibevoice_acoustic_tokenizer"))
    assert list(alone.depths) == [1, 1, 1]


def test_a_model_whose_generate_takes_other_inputs_gets_them():
    # Pop2Piano's generate takes embedded audio features and a composer its generation config must map to a
    # feature token; a config built from scratch has no such map.
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("pop2piano", "Pop2PianoForConditionalGeneration")
    inputs = hf_coverage.GENERATE_INPUTS["pop2piano"](config, (model,), {})
    assert inputs["input_features"].shape == (1, hf_coverage.SEQ, config.d_model)
    assert len(model.generation_config.composer_to_feature_token) == config.composer_vocab_size
    tokens = model.eval().generate(**inputs, max_new_tokens=2, do_sample=False)
    assert tokens.shape[0] == 1


class _Synthesizer(torch.nn.Module):
    """A generate that returns waveforms from noise drawn on the host, as VibeVoice's does."""

    def __init__(self, gain=1.0):
        super().__init__()
        self.gain = gain

    def generate(self, input_ids, attention_mask=None, **kwargs):
        noise = torch.randn(input_ids.shape[0], 8).to(input_ids.device)
        return [noise * 1e-5 * self.gain]


def test_generated_waveforms_are_compared_at_their_own_scale_with_the_same_host_draws():
    import torch_tpu  # noqa: F401

    config = type("Config", (), {"model_type": "synthesizer", "pad_token_id": 0})()
    inputs = {"input_ids": torch.ones(2, 4, dtype=torch.long)}
    hf_coverage.check_generate(_Synthesizer(), _Synthesizer(), inputs, config)
    # Waveforms of 1e-5 that are 1% off: within any absolute tolerance, not within their own scale's.
    with pytest.raises(hf_coverage.WrongValues, match="waveforms"):
        hf_coverage.check_generate(_Synthesizer(), _Synthesizer(gain=1.01), inputs, config)


class _Cancelling(torch.nn.Module):
    """(x + 1e7) - 1e7: float32 keeps x only to about 1 (its rounding), float64 exactly."""

    def forward(self, x):
        return {"out": (x + 1e7) - 1e7}


def test_a_result_as_near_a_float64_reference_as_cpus_own_passes_and_a_far_one_fails():
    # An ill-conditioned model: tpu's float32 result may differ from CPU's by
    # CPU's own rounding error (cpmant); one as exact as float64 passes, with
    # a note, and one farther than twice CPU's error is wrong.
    model, x = _Cancelling(), {"x": torch.linspace(-3, 3, 64)}
    expected = model(**x)
    assert (expected["out"] - x["x"]).abs().max() > 0.1  # CPU's float32 error
    reference = hf_coverage._float64_reference(model, x)
    with pytest.raises(hf_coverage.PassInFloat64, match="from a float64 reference"):
        hf_coverage._close_or_as_accurate_as_cpu({"out": x["x"].clone()}, expected, reference, "forward")
    with pytest.raises(hf_coverage.WrongValues):
        hf_coverage._close_or_as_accurate_as_cpu({"out": x["x"] + 2.0}, expected, reference, "forward")
    hf_coverage._close_or_as_accurate_as_cpu({"out": expected["out"].clone()}, expected, reference, "forward")


def test_a_sweep_child_is_recorded_when_it_dies_times_out_or_passes_the_memory_limit(monkeypatch):
    def child(code):
        return [sys.executable, "-c", code]

    ok = child_process.run_child(child('print(\'RESULT {"forward": ["pass", ""]}\')'), timeout=60)
    assert ok == {"forward": ("pass", "")}
    died = child_process.run_child(child("import sys; print('boom', file=sys.stderr); sys.exit(3)"), timeout=60)
    assert died == {"process": ("error", "process died (exit code 3): boom")}
    slow = child_process.run_child(child("import time; time.sleep(60)"), timeout=1)
    assert slow == {"process": ("error", "timed out after 1 s")}
    monkeypatch.setattr(child_process, "memory_limit", 200 * 2**20)
    hog = "import time; x = bytearray(400 * 2**20); time.sleep(60)"  # touched pages: 400 MiB resident
    assert child_process.run_child(child(hog), timeout=60)["process"][1].startswith("killed past the memory limit")
