"""The fast subset of scripts/hf_coverage.py (the sweep over every
architecture): the same checks, in this process, on a decoder and a vision
model, and the sweep's classification of outcomes."""

import sys

import pytest
import torch
from sweeps import child_process, hf_coverage


# A decoder, a vision model, and families built by per-model recipes (scripts/sweeps/hf_inputs.py): a vision
# tower over a patch grid (grid_thw), a forecaster over lagged time series, a layout model (word boxes), a
# spectrogram transformer (overlapping patches of a mel spectrogram), BLIP-2's Q-Former alone (queries over
# image features), an audio encoder that reads a mask of real frames next to its features.
@pytest.mark.parametrize(
    "model_type",
    [
        "llama",
        "vit",
        "qwen2_5_vl_vision",
        "time_series_transformer",
        "bros",
        "audio-spectrogram-transformer",
        "blip_2_qformer",
        "fun_asr_nano_encoder",
    ],
)
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


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_a_float64_check_computes_in_float64_what_a_model_forces_into_float32(device):
    # xclip's attention: softmax(w, dtype=torch.float32).to(query.dtype) rounds a float64 model to float32.
    torch.manual_seed(0)
    scores = torch.randn(3, 5, dtype=torch.float64) * 4
    exact = torch.softmax(scores, dim=-1)

    def attention(w):
        return torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(w.dtype)

    outside = attention(scores.to(device)).cpu()
    assert (outside - exact).abs().max() > 1e-9  # float32 rounding
    with hf_coverage._in_float64():
        inside = attention(scores.to(device))
        made = (scores.to(device).float(), scores.to(device).type(torch.float32), torch.ones(2, dtype=torch.float32))
    assert inside.dtype == torch.float64
    torch.testing.assert_close(inside.cpu(), exact, rtol=1e-15, atol=1e-15)
    assert [t.dtype for t in made] == [torch.float64] * 3
    assert scores.to(device).float().dtype == torch.float32  # float32 runs are unchanged


@pytest.mark.parametrize("model_type", ["pp_doclayout_v3", "pp_doclayout_v4"])
def test_a_document_layout_detector_builds_with_distinct_encoder_scores(model_type):
    # Its init (conv and batch norm weights at std 0.01) left the encoder output near 1e-16 and all its scores
    # equal, so torch.topk's choice among ties decided every later output.
    pytest.importorskip("transformers")
    (arch,) = hf_coverage.architectures({model_type})
    config, model = hf_coverage.build(model_type, arch[2])
    _, inputs, _ = hf_coverage._inputs_the_cpu_model_runs_on(model, config, arch[1], model_type)
    scores = []
    model.enc_score_head.register_forward_hook(lambda module, args, out: scores.append(out.max(-1).values))
    with torch.no_grad():
        model.eval()(**inputs)
    ranked = scores[0].sort(-1, descending=True).values
    assert ranked.shape == (2, 84)  # 8 x 8, 4 x 4 and 2 x 2 feature maps of 64-pixel images
    assert (ranked[:, 7] - ranked[:, 8]).min() > 1e-3  # the 8 queries topk keeps are well apart from the rest


def test_a_model_without_a_forward_is_checked_on_what_its_pipeline_calls():
    pytest.importorskip("transformers")
    (arch,) = hf_coverage.architectures({"glm_image_vqmodel"})
    config, model = hf_coverage.build("glm_image_vqmodel", arch[2])
    _, inputs, _ = hf_coverage._inputs_the_cpu_model_runs_on(model, config, arch[1], "glm_image_vqmodel")
    torch.testing.assert_close(model(**inputs).quantized_last_hidden_state, model.encode(**inputs)[1])
    (arch,) = hf_coverage.architectures({"bark"})
    config, model = hf_coverage.build("bark", arch[2])
    _, inputs, _ = hf_coverage._inputs_the_cpu_model_runs_on(model, config, arch[1], "bark")
    semantic, coarse, fine = model(**inputs)
    torch.testing.assert_close(semantic, model.semantic(inputs["semantic_ids"]).logits)
    torch.testing.assert_close(coarse, model.coarse_acoustics(inputs["coarse_ids"]).logits)
    torch.testing.assert_close(fine, model.fine_acoustics(7, inputs["fine_ids"]).logits)


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


def test_a_composite_models_head_builds_from_its_own_sub_config():
    # Qwen3.5's model_type names the vision-language config; its causal LM head is built from the text config
    # inside it (built from the composite one, it raised AttributeError: no vocab_size).
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("qwen3_5", "Qwen3_5ForCausalLM")
    assert config.model_type == "qwen3_5_text"
    assert model.config.vocab_size == hf_coverage.TINY["vocab_size"]


def test_a_recipe_gives_the_inputs_the_generic_builder_cannot():
    # A patch-grid vision tower takes packed patches and each image's grid; its recipe's first candidate that
    # the CPU model runs on is the sweep's layout.
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("qwen2_5_vl_vision", "Qwen2_5_VisionTransformerPretrainedModel")
    layout, inputs, labels = hf_coverage._inputs_the_cpu_model_runs_on(model, config, "base", "qwen2_5_vl_vision")
    assert layout[0] == "recipe" and labels is None
    grid = inputs["grid_thw"]
    assert inputs["hidden_states"].shape[0] == int(grid.prod(-1).sum())
    # A forecaster's config gets the prediction length it must be given, and its inputs the lags it reads.
    config, model = hf_coverage.build("time_series_transformer", "TimeSeriesTransformerModel")
    assert config.prediction_length == 4
    _, inputs, _ = hf_coverage._inputs_the_cpu_model_runs_on(model, config, "base", "time_series_transformer")
    assert inputs["past_values"].shape[1] == config.context_length + max(config.lags_sequence)


def test_a_backbone_cut_to_fewer_stages_names_only_the_stages_it_keeps():
    # MaskFormer's Swin backbone lists four stages as outputs; the shrinker keeps two, and the detector rebuilds
    # the backbone config and refuses outputs of stages it no longer has (ValueError before the fix).
    transformers = pytest.importorskip("transformers")
    config = hf_coverage.shrink(transformers.AutoConfig.for_model("mask2former"))
    backbone = config.backbone_config
    assert backbone.stage_names == ["stem", "stage1", "stage2"]
    assert set(backbone.out_features) <= set(backbone.stage_names[1:])


def test_a_real_time_detector_reads_the_stages_its_tiny_backbone_has():
    # RT-DETR's encoder reads the backbone's last three stages at widths the shrinker does not know
    # (encoder_in_channels, 512 to 2048): the recipe sizes both, and the tiny detector runs on CPU.
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("rt_detr", "RTDetrModel")
    backbone = config.backbone_config
    assert list(config.encoder_in_channels) == [backbone.hidden_sizes[i - 1] for i in backbone.out_indices]
    inputs, _ = hf_coverage.make_inputs(model, config, "base")
    with torch.no_grad():
        out = model.eval()(**inputs)
    assert out.last_hidden_state.shape == (hf_coverage.BATCH, config.num_queries, config.d_model)


def test_a_composite_gets_the_multimodal_rope_split_its_text_models_code_reads():
    # glm46v builds its text model (glm4v_text) from the auto mapping, so its own module never names
    # mrope_section; the split is still sized for the tiny head (it was the default [8, 12, 12] for 8 frequencies).
    pytest.importorskip("transformers")
    config, _ = hf_coverage.build("glm46v", "Glm46VForConditionalGeneration")
    text = config.text_config
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    factor = text.rope_parameters.get("partial_rotary_factor", 1.0) or 1.0
    assert sum(text.rope_parameters["mrope_section"]) == int(head_dim * factor) // 2


def test_every_random_drop_is_off_whatever_the_config_calls_it():
    # The train check compares the math: a drop drawn on each device's own generator differs. Grounding DINO
    # spells its fusion layers' stochastic depth "fusion_droppath" (it was left at 0.1, and its train check
    # failed by 1e-4 on the text features).
    transformers = pytest.importorskip("transformers")
    config = hf_coverage.shrink(transformers.AutoConfig.for_model("grounding-dino"))
    drops = {k: v for k, v in vars(config).items() if "drop" in k and isinstance(v, float)}
    assert drops and all(v == 0.0 for v in drops.values()), drops


def test_layers_that_reuse_another_layers_keys_keep_a_layer_of_each_kind_that_stores_them():
    # Gemma 3n's last num_kv_shared_layers layers (15 of 30) reuse the keys and values of an earlier layer of their
    # kind; cut to two layers the model raised ValueError when built. Its fix keeps four, the last two sharing.
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("gemma3n_text", "Gemma3nForCausalLM")
    modes = config.kv_sharing_modes
    assert modes.count("reuse") == 2 and modes.count("store") == 2
    with torch.no_grad():
        logits = model(input_ids=torch.randint(2, 100, (2, 8))).logits
    assert logits.shape == (2, 8, config.vocab_size)


def test_a_class_transformers_does_not_export_is_taken_from_its_modeling_module():
    # The auto mapping names VoxtralRealtimeTextModel, which transformers' top level does not export
    # (AttributeError before the fix).
    pytest.importorskip("transformers")
    _, model = hf_coverage.build("voxtral_realtime_text", "VoxtralRealtimeTextModel")
    assert type(model).__name__ == "VoxtralRealtimeTextModel"


def test_a_cache_that_keeps_its_layers_by_name_gives_their_tensors():
    # A streaming convolution's padding cache (voxtral_realtime) keeps its layers in a dict; iterating it gave
    # their names, and vars() of a name raised TypeError.
    class Layer:
        def __init__(self):
            self.padding = torch.ones(2, 3)

    class PaddingCache:
        layers = {"conv0": Layer(), "conv1": Layer()}

    assert [t.shape for t in hf_coverage._tensors(PaddingCache())] == [(2, 3), (2, 3)]


def test_nested_inputs_move_and_change_dtype_through_their_dicts_and_tuples():
    # A Gemma 4 assistant takes shared_kv_states, {layer kind: (keys, values)}; moving inputs tensor by tensor
    # raised AttributeError ('dict' object has no attribute 'to').
    keys, values, ids = torch.randn(2, 3), torch.randn(2, 3), torch.arange(4)
    inputs = {"inputs_embeds": torch.randn(2, 1, 4), "shared_kv_states": {"full_attention": (keys, values)}, "ids": ids}
    doubled = hf_coverage._in_dtype(inputs, torch.float64)
    assert doubled["shared_kv_states"]["full_attention"][1].dtype == torch.float64
    assert isinstance(doubled["shared_kv_states"]["full_attention"], tuple)
    assert doubled["ids"].dtype == torch.int64 and doubled["inputs_embeds"].dtype == torch.float64
    torch.testing.assert_close(doubled["shared_kv_states"]["full_attention"][0], keys.double())


def test_a_model_with_neither_a_loss_nor_a_floating_output_has_no_train_check():
    # wavtokenizer_encoder outputs only the codes its quantizer picks by argmin: its train check took the int 0 for
    # a loss ("'int' object has no attribute 'backward'").
    class Codes(torch.nn.Module):
        def __init__(self, floating):
            super().__init__()
            self.floating = floating
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.proj(x)
            return {"codes": y.argmax(-1), **({"y": y} if self.floating else {})}

    x = {"x": torch.randn(2, 4)}
    assert not hf_coverage._trains(Codes(False), x, None)
    assert hf_coverage._trains(Codes(True), x, None)
    assert hf_coverage._trains(Codes(False), x, torch.tensor([0, 1]))


def test_fastspeech2s_length_regulator_keeps_its_input_dtype_and_transformers_values():
    # transformers' regulator builds float32 states whatever the input's dtype, so the float64 train check failed
    # on CPU too ("Input type (float) and bias type (double)").
    modeling = pytest.importorskip("transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer")
    original = modeling.length_regulator  # before build() replaces it
    if original is hf_coverage._length_regulator_in_its_dtype:
        pytest.skip("the sweep replaced it in this process already")
    torch.manual_seed(0)
    states = torch.randn(3, 5, 4)
    durations = torch.randint(0, 4, (3, 5))
    durations[2] = 0
    for speed in (1.0, 1.7):
        expected = original(states, durations.clone(), speed)
        torch.testing.assert_close(hf_coverage._length_regulator_in_its_dtype(states, durations, speed), expected)
    zeros = torch.zeros(2, 5, dtype=torch.long)
    expected = original(states[:2], zeros.clone())
    torch.testing.assert_close(hf_coverage._length_regulator_in_its_dtype(states[:2], zeros), expected)
    assert hf_coverage._length_regulator_in_its_dtype(states.double(), durations).dtype == torch.float64


def test_an_assistant_is_checked_on_its_drafting_inputs_without_a_generate_of_its_own():
    # Gemma 4's assistant refused its own default config, then read inputs_embeds and the target's shared keys and
    # values, which the sweep did not give; it drafts inside its target's generate only.
    pytest.importorskip("transformers")
    (arch,) = hf_coverage.architectures({"gemma4_assistant"})
    results = hf_coverage.run_model(*arch)
    assert set(results) == {"forward", "train", "compile"}, results
    assert all(outcome == "pass" for outcome, _ in results.values()), results


def test_musicgens_generate_takes_a_row_per_codebook_and_its_start_token():
    # MusicGen's decoder reads num_codebooks rows per sample; generate on one row raised RuntimeError (shape
    # '[-1, 2, 8]' is invalid), and without a decoder start token TypeError.
    pytest.importorskip("transformers")
    config, model = hf_coverage.build("musicgen", "MusicgenForCausalLM")
    rows = hf_coverage._rows_per_sample(config)
    assert rows == config.num_codebooks == 2
    inputs = hf_coverage.GENERATE_INPUTS[config.model_type](config, (model,), {})
    assert inputs == {} and model.generation_config.decoder_start_token_id == config.bos_token_id
    ids = torch.randint(2, 100, (2 * rows, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    tokens = model.eval().generate(input_ids=ids, attention_mask=mask, max_new_tokens=2, do_sample=False)
    assert tokens.shape[:2] == (2, rows)  # (batch, codebooks, steps)


def test_a_video_tracker_segments_a_prompted_frame_and_the_next_from_its_memory_as_on_cpu():
    # SAM 2's video model takes a stateful inference session, not tensors: its recipe's forward builds one on the
    # model's device, prompts frame 0 with a point per object and segments frame 1 from frame 0's memory.
    pytest.importorskip("transformers")
    import torch_tpu

    (arch,) = hf_coverage.architectures({"sam2_video"})
    config, cpu = hf_coverage.build("sam2_video", arch[2])
    _, inputs, labels = hf_coverage._inputs_the_cpu_model_runs_on(cpu, config, arch[1], "sam2_video")
    assert labels is None and "sam2_video" in hf_coverage.INFERENCE_ONLY  # nothing to train
    _, tpu = hf_coverage.build("sam2_video", arch[2])
    tpu.load_state_dict(cpu.state_dict())
    with torch_tpu.matmul_precision("highest"):
        hf_coverage.check_forward(cpu, tpu.to("tpu"), inputs)  # raises WrongValues where tpu differs
        # Compiled, the inference_mode forward runs under no_grad (AOT Autograd refused it); the third call replays.
        hf_coverage.check_compile(cpu, tpu, inputs)
    with torch.no_grad():
        masks = cpu(**inputs)
        elsewhere = cpu(**{**inputs, "point_coords": (inputs["point_coords"] + 17) % config.image_size})
    assert [tuple(t.shape) for t in masks] == [(2, 1, 16, 16), (2, 1)] * 2  # frames 0 and 1: masks, object scores
    assert (masks[1] > 0).all() and (masks[3] > 0).all()  # both objects in view: the masks are the decoder's
    assert masks[2].abs().max() > 0.5  # logits near 1, far above the check's tolerance
    # Frame 1 has no prompt: another point on frame 0 changes its masks through the memory alone.
    assert (elsewhere[2] - masks[2]).abs().max() > 1e-2
