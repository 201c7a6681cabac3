"""Hugging Face coverage: every architecture in transformers' auto mappings,
built tiny, on tpu against the same weights on CPU.

    python scripts/hf_coverage.py [--workers 2] [--timeout 900] [--only llama,gpt2] [--limit N]
        [--next N] [--merge] [--report docs/hf_coverage.md] [--jsonl hf_coverage.jsonl]

With --merge the report's rows are read back and this run's architectures
replace or join them, so coverage accumulates across runs; --next N runs
the first N architectures (in name order) the report does not list yet.

Each model type gets one head: the first mapping below that lists it (a
causal LM over a masked LM over the bare model), so every architecture is
counted once. Its config is transformers' default shrunk by `shrink` (hidden
sizes, layers, heads, vocabularies, image and audio sizes, recursively
through sub-configs), with per-model overrides where a config has
constraints. The checks, all at matmul precision "highest":

  forward   every floating output equals CPU's;
  generate  (generative heads) greedy tokens equal CPU's, one prompt and a
            left-padded batch of two (not for an assistant, DRAFTERS, which
            drafts inside its target model's generate);
  train     loss, every gradient and every parameter after one AdamW step
            (not for a model with neither a loss nor a floating output, nor
            for one whose forward runs under torch.inference_mode,
            INFERENCE_ONLY);
  compile   torch.compile(backend="tpu") outputs equal eager CPU's, and a
            third call replays the captured program (no trace).

Each model runs in its own subprocess with a timeout, so a crash or hang is
recorded, not fatal. Outcomes per check: pass, wrong values, missing op
(named), error (named); a model whose tiny config or inputs cannot be built
is "cannot build tiny" and excluded from the rate. The report's totals are at
its top. tests/tools/test_hf_coverage.py runs a fast subset in-process.
"""

import contextlib
import copy
import functools
import inspect
import os
import sys

import torch

from sweeps import accuracy, child_process, command_line, hf_inputs, report
from sweeps.outcomes import CannotBuild, PassInFloat64, WrongValues, excluded, not_built, outcome, passed, run_check

# (head, mapping name in transformers.models.auto.modeling_auto, generates)
HEADS = [
    ("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", True),
    ("seq2seq_lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", True),
    ("speech_seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", True),
    ("masked_lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", False),
    ("image_classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", False),
    ("base", "MODEL_MAPPING_NAMES", False),
]
CHECKS = ("forward", "generate", "train", "compile")
# The report's layout; it reads its records back for --merge.
LEDGER = report.Ledger(
    CHECKS,
    columns=[("architecture", "model_type"), ("head", "head"), ("class", "class")],
    excluded_heading="## Cannot build tiny",
    excluded_columns=[("architecture", "model_type")],
    not_built="cannot build tiny",
    name="model_type",
    items="architectures",
)
read_report = LEDGER.read
merge = LEDGER.merge

# Config fields shrunk wherever they appear (sub-configs included), to these values.
TINY = {
    "hidden_size": 64,
    "d_model": 64,
    "n_embd": 64,
    "dim": 64,
    "embed_dim": 64,
    "intermediate_size": 128,
    "ffn_dim": 128,
    "d_ff": 128,
    "n_inner": 128,
    "hidden_dim": 128,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_layers": 2,
    "n_layer": 2,
    "n_layers": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_decoder_layers": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "d_kv": 16,
    "vocab_size": 128,
    # The LM head's width where the embedding is padded past it (inkling2): it may not exceed the vocabulary.
    "unpadded_vocab_size": 128,
    "decoder_vocab_size": 128,
    "rotary_dim": 8,
    "max_position_embeddings": 64,
    "n_positions": 64,
    "num_local_experts": 4,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "image_size": 32,
    "patch_size": 8,
    "num_mel_bins": 16,
    "max_source_positions": 16,
    "max_target_positions": 32,
    # Multi-head latent attention (deepseek_v2/v3): the rotary part must match head_dim, which these
    # configs set to qk_rope_head_dim; qk_head_dim is the derived nope + rope width.
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "qk_head_dim": 32,
    "v_head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    # Widths one sub-config reads from another (a Q-Former's cross-attention over the vision tower, a
    # vision merger's output into the text model): every hidden size above is 64, so these are too.
    "encoder_hidden_size": 64,
    "out_hidden_size": 64,
    "word_embed_proj_dim": 64,
    "num_heads": 4,
    # EfficientNet scaling (efficientnet, align's vision tower default to B7: 2x wide, 3.1x deep, 62M
    # parameters): B0's.
    "width_coefficient": 1.0,
    "depth_coefficient": 1.0,
    # Mamba-2 mixers (hybrids): heads * head width = expand (2) * hidden_size.
    "mamba_n_heads": 4,
    "mamba_d_head": 32,
    "mamba_d_state": 16,
    # Grouped routing (deepseek_v3): the experts split into n_group groups, of which topk_group are kept.
    "n_group": 2,
    "topk_group": 1,
    # Sparse-attention indexers (deepseek_v32, glm5_next, ...): each query keeps index_topk keys, chosen in
    # pools of index_kpool, and the output is always index_topk wide, so the default 2048 makes every tiny
    # layer gather 2048 keys per query (11 GB for glm5_next); 8 keys in pools of 2 cover the whole sequence.
    "index_topk": 8,
    "index_kpool": 2,
    "index_head_dim": 16,
    "index_n_heads": 4,
    # Linear-attention layers (gated delta nets: qwen3_next, glm5_next, ...): heads * head width is the layer's
    # inner width (8192 for glm5_next's defaults) and its recurrent state is head width squared per head. Value
    # heads must be a multiple of key heads.
    "linear_num_heads": 4,
    "linear_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
}
# Fields that are lists (one entry per stage or layer) shrunk to their first entries.
TINY_LISTS = {"depths": 2, "hidden_sizes": 2, "layer_types": 2, "mlp_layer_types": 2, "indexer_types": 2}
# Of those, the lists of per-layer kinds: the tiny model keeps one layer of each kind it mixes (see
# _tiny_layer_types), so a model whose first layers are dense still builds a sparse (MoE) one.
PER_LAYER_KINDS = ("layer_types", "mlp_layer_types", "indexer_types")
OVERRIDES = {
    # model_type: {field: value} applied after shrinking
    "gpt2": {"n_ctx": 64},
    # Its LM head projects to hidden_size - embedding_size, and the bottleneck
    # (true_hidden_size) must divide among the heads.
    "mobilebert": {"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32},
    # Two stages (its per-stage fields are tuples, which TINY_LISTS leaves alone), each stage's heads
    # dividing its width embed_dim * 2**stage; hidden_size is the last stage's width; windows of 4 tile
    # both stages' patch grids (8x8 and 4x4 for 32-pixel images in patches of 4).
    "swin": {"depths": [2, 2], "num_heads": [2, 4], "embed_dim": 32, "hidden_size": 64, "window_size": 4},
    "donut-swin": {"depths": [2, 2], "num_heads": [2, 4], "embed_dim": 32, "hidden_size": 64, "window_size": 4},
    "swinv2": {"depths": [2, 2], "num_heads": [2, 4], "embed_dim": 32, "hidden_size": 64, "window_size": 4},
    "maskformer-swin": {"depths": [2, 2], "num_heads": [2, 4], "embed_dim": 32, "hidden_size": 64, "window_size": 4},
    # Its residual groups keep one width (embed_dim) throughout.
    "swin2sr": {"depths": [2, 2], "num_heads": [2, 2], "embed_dim": 32, "window_size": 4},
    # Without attention layers (its default) its cache cannot tell a sequence length.
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    # Its flow and duration predictor sample noise from each device's own generator: at scale 0 they are exact.
    "vits": {"noise_scale": 0.0, "noise_scale_duration": 0.0},
    # Attention every 8th layer from the 4th by default: here the second of two.
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    # Its image size is a (640, 640) pair, which the shrinker's int image_size leaves alone (a sweep child ran
    # past 900 s). 64 pixels, not 32: at 32 its five stride-2 stages end at 1x1, where train-mode batch norm over
    # two samples makes gradients of 4e4 from a loss of 0.9, and float64 rounding shows past the check on both
    # devices (tpu 2.5e-5 off CPU, CPU 6e-6 off itself with the batch reversed); at 64 they agree to 1e-14.
    "textnet": {"image_size": 64},
    # Its text projection must match the image embedding: B0's last stage, 320 wide.
    "align": {"projection_dim": 320},
    # Its vision tower's weights drawn at std 0.02 shrink the activations about 10x per block, so B0's 16 blocks
    # pool image features of 2e-25, whose norm underflows to 0 in float32, and the normalized embeddings and logits
    # are NaN (on CPU too): 0.2 keeps them near 1e-2. 64 pixels, as textnet's: at 32 its last stages are 1 x 1, where
    # train-mode batch norm over two samples amplifies rounding past the train check on both devices. Its batch norms
    # take TensorFlow's momentum (0.99, the share of the old statistics kept) as PyTorch's (the share of the batch's),
    # so one train-mode step replaces the running statistics with the batch's, variances near 1e-6 at these weights,
    # and the compile check's eval forward after training then grows 4x a block (to 2e6) and amplifies float32
    # rounding past its tolerance on both devices: 0.01, TensorFlow's 0.99 in PyTorch's terms.
    "align_vision_model": {"initializer_range": 0.2, "image_size": 64, "batch_norm_momentum": 0.01},
    # The width of its head, round_filters(1280) at B0's width coefficient.
    "efficientnet": {"hidden_dim": 1280},
    # ESM's vocabulary (its default config leaves it None): 33 tokens, padding 1.
    "esm": {"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32},
    # Its experts per token default to None (a checkpoint names them).
    "deepseek_v2": {"num_experts_per_tok": 2},
    # Mamba-2 heads: num_heads * head_dim = expand (2) * hidden_size, in groups that divide the heads.
    "mamba2": {"num_heads": 4, "head_dim": 32, "n_groups": 1},
    # One input, one looped and one output layer (defaults: 8 input, 20 looped and 8 output layers).
    "dory": {
        "num_hidden_layers": 3,
        "n_input_layers": 1,
        "n_recurrent_layers": 1,
        "n_output_layers": 1,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    },
    # Hybrids whose first two layers hold no attention layer, so their cache cannot tell a sequence length (as
    # bamba's): one layer of each kind. The shrinker cuts layer_types to its first two; zamba's and recurrent
    # gemma's lists go by other names.
    "lfm3": {"layer_types": ["conv", "full_attention"]},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # Zamba's hybrid layers share one transformer block, which its tied-weights table ties from the first hybrid
    # layer into the others: with one hybrid layer there is nothing to tie and building raises, so two.
    # Widths both derive from the default hidden_size when the config is made: the shared block's attention runs
    # on the input and the first embedding concatenated (2 x hidden_size), its heads 2 x hidden_size // heads wide,
    # the Mamba dt rank hidden_size / 16; Zamba 2's Mamba-2 heads are expand (2) x hidden_size // n_mamba_heads.
    "zamba": {
        "num_hidden_layers": 3,
        "layers_block_type": ["linear_attention", "hybrid", "hybrid"],
        "attention_hidden_size": 128,
        "attention_head_dim": 32,
        "mamba_dt_rank": 4,
    },
    "zamba2": {
        "num_hidden_layers": 3,
        "layers_block_type": ["linear_attention", "hybrid", "hybrid"],
        "hybrid_layer_ids": [1, 2],
        "attention_hidden_size": 128,
        "attention_head_dim": 32,
        "kv_channels": 16,
        "mamba_headdim": 16,
    },
    # Widths the shrinker does not know by these names, which must equal hidden_size. xLSTM's cache sizes its
    # states by hidden_size * qk_dim_factor rounded up to a multiple of 64, its layers without rounding: at
    # hidden_size 64 a factor of 1 (0.5 by default) keeps the two equal. Its layers are num_blocks (32) too.
    "xlstm": {"embedding_dim": 64, "qk_dim_factor": 1.0, "num_blocks": 2},
    "rwkv": {"attention_hidden_size": 64},
    # Mamba-2 heads * head width = expand (2) * hidden_size (the default head width, 64, is below the shrinker's),
    # which is the mixer's inner width, mamba_d_ssm (1024 by default).
    "falcon_h1": {"mamba_d_head": 32, "mamba_d_ssm": 128},
    # Routed and shared experts and experts per token its default leaves None (a checkpoint names them).
    "dots1": {"n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2},
    # Its layer kinds default to None (a checkpoint lists them) and its first two layers are dense: one convolution
    # and one attention layer, the second a mixture of experts.
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # Its sparse attention's indexer (QSA) defaults to None in every field (a checkpoint sets them): 4 index heads
    # over one key head 16 wide, choosing 8 keys from blocks of 2.
    "qwen4_exp_text": {
        "indexer_n_heads": 4,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 16,
        "indexer_budget": 8,
        "indexer_compress_ratio": 2,
    },
    # Its query and key norms span hidden_size, so every head is a key head.
    "esmc": {"num_key_value_heads": 4},
    # Its decoder's cross-attention has its own widths (16 heads of 128 over the encoder's 1024).
    "dia_decoder": {
        "cross_num_attention_heads": 4,
        "cross_head_dim": 16,
        "cross_num_key_value_heads": 4,
        "cross_hidden_size": 64,
    },
    # Its attention runs over its backbone's last stage, out_features[-1] (256) wide, which its rotary embedding and
    # aggregation read as hidden_size: the default widths (its stages are per-block lists the shrinker leaves).
    "efficientloftr": {
        "hidden_size": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "intermediate_size": 512,
    },
    # Its projector's settings default to None (a checkpoint sets them): vision layers 0 and 1 injected into text
    # layers 0 and 1, query windows half the key windows, one 32-pixel resolution, spatial groups over both layers.
    "granite4_vision": {
        "deepstack_layer_map": [[0, 0], [1, 1]],
        "downsample_rate": "1/2",
        "image_grid_pinpoints": [[32, 32]],
        "spatial_target_layers": [0, 1, 0, 1],
    },
    # Its text attention has no grouped keys (keys and values for every head), as esmc.
    "unlimited_ocr_text": {"num_key_value_heads": 4},
    # Its experts default to None (a checkpoint sets them; enable_moe_block says whether layers use them).
    "diffusion_gemma_text": {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32},
    # Its dense and mixture-of-experts layers and experts per token default to None (a checkpoint sets them).
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense", "sparse"], "num_experts_per_tok": 2},
    # Its map from names to token ids (image token, VQ codes) defaults to None (its tokenizer's): the image token.
    "chameleon": {"vocabulary_map": {"<image>": 3}},
    # Its key heads per layer are derived when the config is made (16 for its first and last 8 layers, 8 for the
    # others, more than the tiny model's 4 heads): one layer with a key per head, one with grouped keys.
    "sapiens2": {"num_key_value_heads_per_layer": [4, 2]},
    # Its H and L stacks of num_layers_per_stack layers (16, set from num_hidden_layers when the config is made) run
    # in H_cycles x (L_cycles + 1) passes, one cache slot each, which num_hidden_layers then counts: one layer per
    # stack, 2 x (1 + 1) passes.
    "hrm_text": {"num_layers_per_stack": 1, "L_cycles": 1, "L_bp_cycles": [1], "num_hidden_layers": 4},
    # It classifies by the last token's logits of its answer tokens, "Yes" and "No" (10784 and 3771 by default,
    # past the tiny vocabulary): tokens 10 and 11.
    "shieldgemma2": {"yes_token_index": 10, "no_token_index": 11},
    # Its rotary part is partial_rotary_factor (0.5) of head_dim and must cover qk_rope_head_dim.
    "mistral4": {"head_dim": 32},
    # Experts per token (8 by default, under this name) may not exceed the tiny model's 4 experts.
    "kimi_linear": {"num_experts_per_token": 2},
    # Four stride-2 convolutions patch the image by 16 whatever patch_size says, and the attention biases are
    # sized by image_size // patch_size. 128 pixels: 8 x 8 patches, 2 x 2 in the last stage, whose train-mode
    # batch norms then see 8 values (at 64 pixels 2, whose statistics amplify rounding past the check on both
    # devices). Widths of its ModelTester (the defaults, tuples the shrinker leaves alone, are 128 to 384).
    "levit": {
        "image_size": 128,
        "patch_size": 16,
        "hidden_sizes": [16, 32, 48],
        "num_attention_heads": [1, 2, 3],
        "depths": [1, 1, 1],
        "key_dim": [8, 8, 8],
        "down_ops": [["Subsample", 8, 16 // 8, 4, 2, 2], ["Subsample", 8, 32 // 8, 4, 2, 2]],
    },
    # Open-set detectors pick their num_queries (900 by default) from the encoder's positions by top-k, fewer
    # than 900 at 32 pixels.
    "grounding-dino": {"num_queries": 8},
    "mm-grounding-dino": {"num_queries": 8},
    # Audio codecs quantize their encoder's hidden_size-wide latents: the codebook vectors are as wide.
    "encodec": {"codebook_dim": 64},
    # Mimi's upsampling is depthwise over hidden_size channels (upsample_groups, 512, is its default width).
    "mimi": {
        "upsample_groups": 64,
        "codebook_dim": 64,
        "vector_quantization_hidden_dimension": 64,
        "codebook_size": 128,
    },
    "mimi_decoder": {"upsample_groups": 64, "codebook_dim": 64, "vector_quantization_hidden_dimension": 64},
    "pocket_tts_audio_tokenizer": {"upsample_groups": 64},
    "pocket_tts_audio_tokenizer_decoder": {"upsample_groups": 64},
    "wavtokenizer_encoder": {"codebook_dim": 64, "codebook_size": 128},
    # Its Vocos decoder's widths go by their own names (768 wide, 12 layers).
    "wavtokenizer": {
        "codebook_dim": 64,
        "codebook_size": 128,
        "decoder_hidden_size": 64,
        "decoder_intermediate_size": 128,
        "decoder_num_layers": 2,
        "decoder_attention_num_groups": 8,
    },
    # Nemotron 3's audio encoders project keys and values for every head (no grouped heads), as esmc.
    "nemotron3_diarization_audio": {"num_key_value_heads": 4},
    "nemotron3_5_transcribe_asr_audio": {"num_key_value_heads": 4},
    "nemotron3_5_transcribe_word_timestamp": {"num_key_value_heads": 4},
    # Its relative positions span a context of context_size (128) frames, which max_position_embeddings must cover;
    # keys and values for every head, as esmc.
    "granite_speech5_encoder": {"context_size": 16, "num_key_value_heads": 4},
    # Its five stride-2 stages and 2 x 2 unfolding need 64 pixels (at 32 the last stage is 1 x 1).
    "mobilevitv2": {"image_size": 64},
}
# VibeVoice's acoustic tokenizer (its own model, and VibeVoice's audio and semantic sub-configs): six stages
# that double 32 filters to 2048 and downsample 3200x (its per-stage fields are tuples, which TINY_LISTS leaves
# alone) need 9 GB at the shrinker's sizes; two stages of 8 filters, one block each, downsample 4x. Its encoder
# adds noise to the latents, scaled by vae_std and drawn from each device's own generator: at 0 it is exact.
_TINY_VIBEVOICE_TOKENIZER = {"num_filters": 8, "downsampling_ratios": [2, 2], "depths": [1, 1, 1], "vae_std": 0.0}
OVERRIDES["vibevoice_acoustic_tokenizer"] = _TINY_VIBEVOICE_TOKENIZER
OVERRIDES["vibevoice_acoustic_tokenizer_encoder"] = _TINY_VIBEVOICE_TOKENIZER
OVERRIDES["vibevoice_acoustic_tokenizer_decoder"] = _TINY_VIBEVOICE_TOKENIZER
# Its generate allows only its audio tokens and end of sequence (151652 and up by default): the last three of
# the tiny vocabulary.
OVERRIDES["vibevoice"] = {"audio_bos_token_id": 125, "audio_eos_token_id": 126, "audio_token_id": 127}
SEQ = 8
BATCH = 2


def _mapping(name):
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, name)


def architectures(only=None):
    """[(model_type, head, class name, generates)], each model type once."""
    seen, out = set(), []
    for head, mapping, generates in HEADS:
        for model_type, class_name in _mapping(mapping).items():
            if model_type in seen or (only and model_type not in only):
                continue
            if isinstance(class_name, (tuple, list)):
                class_name = class_name[0]
            seen.add(model_type)
            out.append((model_type, head, class_name, generates))
    return sorted(out)


def _tiny_layer_types(types, n):
    """The first n layer types, but each kind the model mixes at least once: a hybrid whose first layers are
    all linear attention (bailing_hybrid: full attention every sixth layer) needs its attention layer too."""
    kinds = list(dict.fromkeys(types))
    if len(kinds) == 1 or len(kinds) > n:
        return types[:n]
    return kinds + types[: n - len(kinds)]


def shrink(config, depth=0):
    """Shrinks `config` in place (and its sub-configs): see TINY, then OVERRIDES by each config's model_type."""
    from transformers import PretrainedConfig

    # Heterogeneous configs (dots3_note, embedding_gemma2) override head counts and widths per layer, by the
    # full model's layer index, and refuse reads of the global values the shrinker makes: the tiny model's layers
    # take the shrunk global values, each layer kind still built once (see _tiny_layer_types).
    spec = vars(config).get("_heterogeneity_spec")
    if spec is not None:
        config._heterogeneity_spec = type(spec)(
            per_layer_overrides={}, per_layer_attributes=set(), explicit_per_layer_attributes=set()
        )
    for key, value in list(vars(config).items()):
        if isinstance(value, PretrainedConfig) and depth < 3:
            shrink(value, depth + 1)
        elif key in TINY and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            setattr(config, key, min(value, TINY[key]))
        elif key in TINY and isinstance(value, float) and isinstance(TINY[key], float):
            setattr(config, key, min(value, TINY[key]))
        elif key in PER_LAYER_KINDS and isinstance(value, list) and len(value) > TINY_LISTS[key]:
            setattr(config, key, _tiny_layer_types(value, TINY_LISTS[key]))
        elif key in TINY_LISTS and isinstance(value, list) and len(value) > TINY_LISTS[key]:
            setattr(config, key, value[: TINY_LISTS[key]])
    heads = getattr(config, "num_attention_heads", None)
    # A head_dim left None (ministral, hunyuan_v1: their checkpoints set it) is read as is by the attention.
    if "head_dim" in vars(config) and config.head_dim is None and isinstance(heads, int) and heads > 0:
        hidden = getattr(config, "hidden_size", None)
        if isinstance(hidden, int):
            config.head_dim = hidden // heads
    if isinstance(heads, int) and hasattr(config, "num_key_value_heads"):
        kv = config.num_key_value_heads
        # Latent attention (kv_lora_rank) expands its keys to every head, so it needs one key head per head.
        if not isinstance(kv, int) or kv <= 0 or heads % kv or hasattr(config, "kv_lora_rank"):
            config.num_key_value_heads = heads
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value >= TINY["vocab_size"]:
            setattr(config, key, 1)
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        pad = getattr(config, "pad_token_id", None)
        config.decoder_start_token_id = pad if isinstance(pad, int) else 0
    # Dropout, stochastic depth (drop_path_rate) and layer drop draw different masks on each device;
    # the checks compare the math, so they are off.
    # Per-stage lists count too (CvT's drop_path_rate is [0.0, 0.0, 0.1]).
    # So is a router's jitter (switch_transformers multiplies its router input by uniform noise in train mode).
    # Grounding DINO spells its fusion layers' stochastic depth "fusion_droppath".
    random_drops = ("dropout", "pdrop", "drop_path", "droppath", "layerdrop", "jitter")
    for key, value in list(vars(config).items()):
        if not (any(d in key for d in random_drops) or key.endswith("drop_rate")):
            continue
        if isinstance(value, float):
            setattr(config, key, 0.0)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, float) for v in value):
            setattr(config, key, type(value)(0.0 for _ in value))
    # Training-time position augmentations draw random values per device too: DINOv3's RoPE (dinov3_vit,
    # eomt_dinov3, sapiens2) shifts, jitters and rescales its patch coordinates at random in train mode.
    for key in ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale"):
        if getattr(config, key, None) is not None:
            setattr(config, key, None)
    # So do SpecAugment's masks (wav2vec2's family: data2vec-audio, hubert, wavlm, ...): train mode masks time
    # steps and feature channels drawn from numpy's global random state, different for each run.
    for key in ("mask_time_prob", "mask_feature_prob"):
        if isinstance(getattr(config, key, None), float):
            setattr(config, key, 0.0)
    for key, value in OVERRIDES.get(getattr(config, "model_type", None), {}).items():
        setattr(config, key, value)
    _shrink_backbone_stages(config)
    return config


def _shrink_backbone_stages(config):
    """A backbone config whose per-stage lists the shrinker cut (depths) still names its full-size stages
    (stage_names, out_features: swin's four) and the detector built on it rebuilds it and refuses features of
    stages it no longer has: the stages are renamed for the depths kept, and the outputs kept are those that
    remain (else the last stage)."""
    depths, names = getattr(config, "depths", None), getattr(config, "stage_names", None)
    if not isinstance(depths, list) or not isinstance(names, list) or len(names) == len(depths) + 1:
        return
    kept = [i for i in (getattr(config, "out_indices", None) or []) if i <= len(depths)] or [len(depths)]
    config.stage_names = ["stem"] + [f"stage{i}" for i in range(1, len(depths) + 1)]
    config.set_output_features_output_indices(out_features=None, out_indices=kept)


def _shrink_multimodal_rope(config, model_class):
    """Multimodal RoPE (qwen2_vl, glm4v and their kin) splits each head's rotary frequencies into temporal,
    height and width sections, mrope_section, which must sum to the frequencies' count. Configs leave it to the
    modeling code's default, sized for full heads ([16, 24, 24] for head_dim 128), so a tiny head (16 wide, 8
    frequencies) needs its own split, in the same proportions, wherever the model's code reads one."""
    from transformers import PretrainedConfig

    if not any("mrope_section" in inspect.getsource(m) for m in _modeling_modules(config, model_class)):
        return
    for sub in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        rope = getattr(sub, "rope_parameters", None)
        heads = getattr(sub, "num_attention_heads", None)
        if not isinstance(rope, dict) or rope.get("rope_type") == "axial" or not isinstance(heads, int):
            continue
        head_dim = getattr(sub, "head_dim", None) or sub.hidden_size // heads
        factor = rope.get("partial_rotary_factor", getattr(sub, "partial_rotary_factor", 1.0)) or 1.0
        frequencies = int(head_dim * factor) // 2
        if sum(rope.get("mrope_section") or ()) == frequencies:  # a per-model fix's own split (ernie4_5_vl_moe)
            continue
        spatial = frequencies * 3 // 8
        rope["mrope_section"] = [frequencies - 2 * spatial, spatial, spatial]


def _modeling_modules(config, model_class):
    """The modeling modules a model is built from: its class's, and those of its sub-configs' base models (a
    composite that builds its text model from the auto mapping, glm46v's glm4v_text, holds none of its code)."""
    import transformers
    from transformers import PretrainedConfig

    yield sys.modules[model_class.__module__]
    for sub in vars(config).values():
        name = _mapping("MODEL_MAPPING_NAMES").get(getattr(sub, "model_type", None))
        if isinstance(sub, PretrainedConfig) and isinstance(name, str) and hasattr(transformers, name):
            yield sys.modules[getattr(transformers, name).__module__]


def _gumbel_free_softmax(logits, tau=1, hard=False, dim=-1):
    """GroupViT's gumbel_softmax without its Gumbel noise: the noise is drawn from each device's own generator,
    so the train check turns it off, as it does dropout. Hard assignments still pass gradients straight
    through the soft ones."""
    soft = (logits / tau).softmax(dim)
    if not hard:
        return soft
    index = soft.max(dim, keepdim=True)[1]
    return torch.zeros_like(logits).scatter_(dim, index, 1.0) - soft.detach() + soft


def _without_random_draws(model_type):
    """Turns off the random draws a model makes in train mode that no config field controls."""
    if model_type == "groupvit":
        from transformers.models.groupvit import modeling_groupvit

        modeling_groupvit.gumbel_softmax = _gumbel_free_softmax


def _length_regulator_in_its_dtype(encoded_embeddings, duration_labels, speaking_speed=1.0):
    """FastSpeech 2's length regulator: each token's state repeated for its duration in frames (durations scaled by
    speaking_speed and rounded; where every duration of the batch is 0, those of each sequence become 1), the
    sequences zero-padded to the longest, in the states' own dtype."""
    if speaking_speed <= 0:
        raise ValueError("`speaking_speed` must be greater than 0.")
    if speaking_speed != 1.0:
        duration_labels = torch.round(duration_labels.float() * speaking_speed).long()
    if duration_labels.sum() == 0:
        duration_labels = torch.ones_like(duration_labels)
    repeated = [state.repeat_interleave(d, dim=0) for state, d in zip(encoded_embeddings, duration_labels)]
    return torch.nn.utils.rnn.pad_sequence(repeated, batch_first=True)


def _in_the_models_dtype(model_type):
    """FastSpeech 2's length regulator builds its output as float32 whatever its input's dtype, so a float64 model's
    decoder gets float32 states and its first convolution refuses them (float64 training fails so on CPU too):
    the same regulation in the states' dtype (float32's results are unchanged)."""
    if model_type in ("fastspeech2_conformer", "fastspeech2_conformer_with_hifigan"):
        from transformers.models.fastspeech2_conformer import modeling_fastspeech2_conformer

        modeling_fastspeech2_conformer.length_regulator = _length_regulator_in_its_dtype


class _NothingCached:
    """An embedding cache that keeps nothing (see _without_embedding_caches)."""

    def has(self, key):
        return False

    def put(self, key, value):
        pass


def _without_embedding_caches(model):
    """OmDet-Turbo keeps its text model's embeddings of each class and task prompt it has seen, by token ids, and
    reuses them on later calls: the train check would then run on embeddings cached by the forward check (without
    gradients, from the weights before training), the compile check on those from before the AdamW step, and a
    float64 copy of the model on float32 ones. Each call embeds its prompts afresh instead."""
    for name in ("language_cache_class", "language_cache_prompt"):
        if hasattr(model, name):
            setattr(model, name, _NothingCached())


def _flex_attention_names(model_type):
    """transformers imports flex attention's BlockMask only where is_torch_flex_attn_available(), which is False
    whenever the host's accelerator is a tpu; Doge's attention tests isinstance(mask, BlockMask) on every call, so
    with torch_tpu installed it raises NameError on CPU too. Its module gets the name (a mask is never one here)."""
    if model_type == "doge":
        from torch.nn.attention.flex_attention import BlockMask
        from transformers.models.doge import modeling_doge

        modeling_doge.BlockMask = BlockMask


def _config_of_class(config, model_class):
    """The config model_class is built from: a composite model's causal LM head (qwen3_5, llama4, emu3,
    musicgen) or encoder (t5gemma2_encoder) takes its text or encoder sub-config, not the composite one its
    model_type names."""
    from transformers import PretrainedConfig

    wanted = getattr(model_class, "config_class", None)
    if wanted is None or isinstance(config, wanted):
        return config
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig) and isinstance(value, wanted):
            return value
    return config


# Models whose forward runs under torch.inference_mode: no output carries a gradient, on any device, so there is
# nothing to train (and in train mode the video trackers do not keep the object scores their next frame reads);
# their train check is left out, as generate is for a model that does not generate. (The video models take a
# stateful inference session: scripts/sweeps/hf_inputs.py's _tracking_as_forward says how they are checked.)
INFERENCE_ONLY = ("edgetam_video", "sam2_video", "sam3_tracker_video", "sam3_video")


# Causal LM heads whose generate is not their own: an assistant drafts tokens inside its target model's generate
# (assisted decoding, generate(..., assistant_model=...)) from the target's states and keys and values, which it
# reads in place of token ids; it has no generate of its own to check.
DRAFTERS = ("gemma4_assistant", "gemma4_unified_assistant")


# The sweep runs eager attention, except where a model's eager path is broken on CPU too: the Nemotron ASR encoders
# fill their relative-position scores where `attention_mask.logical_not()`, which expects the boolean mask sdpa
# gets; eager's float mask (0 where allowed) masks every key, and every output is NaN.
ATTENTION_IMPLEMENTATION = dict.fromkeys(
    ("nemotron3_5_asr", "nemotron_asr_streaming", "nemotron_asr_streaming_encoder"), "sdpa"
)


def _model_class(model_type, class_name):
    """The class the auto mapping names, from transformers or, where transformers does not export it
    (voxtral_realtime_text's VoxtralRealtimeTextModel), from its model type's modeling module."""
    import importlib

    import transformers

    if hasattr(transformers, class_name):
        return getattr(transformers, class_name)
    module = type(transformers.AutoConfig.for_model(model_type)).__module__.replace(".configuration_", ".modeling_")
    return getattr(importlib.import_module(module), class_name)


def build(model_type, class_name):
    _without_random_draws(model_type)
    _flex_attention_names(model_type)
    _in_the_models_dtype(model_type)

    model_class = _model_class(model_type, class_name)
    config = _config_of_class(shrink(hf_inputs.default_config(model_type)), model_class)
    hf_inputs.fix_config(config, model_type)
    config._attn_implementation = ATTENTION_IMPLEMENTATION.get(model_type, "eager")
    _shrink_multimodal_rope(config, model_class)
    torch.manual_seed(0)
    model = hf_inputs.fix_model(model_class(config), model_type)
    _without_embedding_caches(model)
    for module in model.modules():  # dropout layers built from fields the shrinker does not know
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    # A weight matrix initialized to zero (afmoe's router gate) makes every routing score equal, and
    # torch.topk leaves the order of ties unspecified (CPU and XLA break them differently): small
    # random values give the checks a model whose decisions do not hang on ties.
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2 and param.requires_grad and not param.any():
                param.normal_(0.0, 0.02)
    return config, model


# Input layouts run_model tries in turn, keeping the first the CPU model runs on: "companions" adds the other
# modalities the forward takes (see _companion_inputs); "frames_first" lays audio features out (batch, frames,
# mel bins), as Conformer-style encoders (canary, parakeet) take them, instead of Whisper's (batch, mel bins,
# frames); "channel_dim" gives raw audio a channel dimension, (batch, 1, samples), as audio codecs take it
# (encodec, dac).
INPUT_LAYOUTS = ((), ("companions",), ("frames_first",), ("companions", "frames_first"), ("channel_dim",))


def make_inputs(model, config, head, seed=1, layout=()):
    """The model's main input (and labels for the training check) in one of INPUT_LAYOUTS, or raises
    CannotBuild."""
    if layout and layout[0] == "recipe":
        return _recipe_inputs(layout[1], model, config, head, seed, layout[2])
    g = torch.Generator().manual_seed(seed)
    name = model.main_input_name
    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", 128)
    ids = torch.randint(2, min(vocab, TINY["vocab_size"]), (BATCH, SEQ), generator=g)
    if name == "input_ids":
        inputs = {"input_ids": ids}
        if head == "seq2seq_lm" or getattr(config, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = ids
    elif name == "pixel_values":
        size = getattr(config, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(config, "num_channels", 3)
        inputs = {"pixel_values": torch.randn(BATCH, channels, size, size, generator=g)}
    elif name == "input_features":
        mels = _config_field(config, "num_mel_bins", 16)
        frames = 2 * getattr(config, "max_source_positions", 16)
        shape = (BATCH, frames, mels) if "frames_first" in layout else (BATCH, mels, frames)
        inputs = {"input_features": torch.randn(*shape, generator=g)}
        if getattr(config, "is_encoder_decoder", False):
            # contiguous, as a user's are: transformers' causal LM loss views the labels flat (canary)
            inputs["decoder_input_ids"] = ids[:, :4].contiguous()
    elif name == "input_values":
        shape = (BATCH, 1, 4000) if "channel_dim" in layout else (BATCH, 4000)
        inputs = {"input_values": torch.randn(*shape, generator=g)}
        if getattr(config, "is_encoder_decoder", False):  # speech recognizers on raw audio (moonshine, speecht5)
            inputs["decoder_input_ids"] = ids[:, :4].contiguous()
    else:
        raise CannotBuild(f"main input {name!r}")
    labels = None
    if head in ("causal_lm", "masked_lm"):
        labels = ids
    elif head in ("seq2seq_lm", "speech_seq2seq"):
        labels = inputs.get("decoder_input_ids", ids)
    elif head == "image_classification":
        labels = torch.tensor([0, 1])
    if "companions" in layout:
        inputs.update(_companion_inputs(model, config, inputs, ids, g))
    targets = TRAINING_TARGETS.get(config.model_type)
    if targets is not None:
        inputs.update(targets(config, g))
    return inputs, labels


def _recipe_inputs(model_type, model, config, head, seed, index):
    """Candidate `index` of the model's recipe (scripts/sweeps/hf_inputs.py), its labels split off; where it
    names none, a language model's are its input ids and a classifier's two classes."""
    inputs = dict(hf_inputs.candidates(model_type, model, config, head, seed)[index])
    labels = inputs.pop("labels", None)
    if labels is None and head in ("causal_lm", "masked_lm") and "input_ids" in inputs:
        labels = inputs["input_ids"]
    elif labels is None and head == "image_classification":
        labels = torch.tensor([0, 1])
    return inputs, labels


def _layouts(model_type, model, config, head):
    """The input layouts to try for this model: its recipe's candidates where it has one, else INPUT_LAYOUTS."""
    if not hf_inputs.has_recipe(model_type):
        return INPUT_LAYOUTS
    count = len(hf_inputs.candidates(model_type, model, config, head, 1))
    return [("recipe", model_type, i) for i in range(count)]


def _speech_synthesis_targets(config, g):
    """FastSpeech 2 trains on its targets only (it raises without them): each token's duration in frames, by
    which its length regulator repeats the token's state, and the spectrogram, pitch and energy that align to
    them. Both sequences' durations sum to the same frame count, so the batch's spectrograms have one length.
    In eval mode it predicts durations itself and ignores these."""
    durations = torch.tensor([[1, 2] * (SEQ // 2), [2, 1] * (SEQ // 2)])
    frames = int(durations[0].sum())
    return {
        "duration_labels": durations,
        "spectrogram_labels": torch.randn(BATCH, frames, config.num_mel_bins, generator=g),
        "pitch_labels": torch.randn(BATCH, SEQ, 1, generator=g),
        "energy_labels": torch.randn(BATCH, SEQ, 1, generator=g),
    }


def _text_token_types(config, g):
    """Molmo2 trains only when told which tokens are text and which stand for images (it raises without):
    the sweep's inputs are all text, type 0."""
    return {"mm_token_type_ids": torch.zeros(BATCH, SEQ, dtype=torch.long)}


# Inputs a model's training mode requires besides its main input and labels, by model_type (FastSpeech 2 with its
# HiFi-GAN vocoder: FastSpeech 2's, from its model_config).
TRAINING_TARGETS = {
    "fastspeech2_conformer": _speech_synthesis_targets,
    "fastspeech2_conformer_with_hifigan": lambda config, g: _speech_synthesis_targets(config.model_config, g),
    "molmo2": _text_token_types,
}


def _config_field(config, name, default):
    """A field of config or of its vision, audio or encoder sub-config (where a multimodal model keeps its
    image and audio sizes)."""
    for owner in [config] + [getattr(config, f"{part}_config", None) for part in ("vision", "audio", "encoder")]:
        value = getattr(owner, name, None) if owner is not None else None
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _companion_inputs(model, config, inputs, ids, g):
    """The inputs of another modality that a dual encoder's forward requires next to its main one (CLIP-style
    models embed text and images together and fail without either)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    extra = {}
    if "input_ids" in params and "input_ids" not in inputs:
        extra["input_ids"] = ids
    if "pixel_values" in params and "pixel_values" not in inputs:
        size = _config_field(config, "image_size", 32)
        channels = _config_field(config, "num_channels", 3)
        extra["pixel_values"] = torch.randn(BATCH, channels, size, size, generator=g)
    # Audio encoders that count each clip's frames from a mask (qwen3_asr, audioflamingo3): every frame valid.
    if "input_features_mask" in params and "input_features" in inputs:
        extra["input_features_mask"] = torch.ones(inputs["input_features"].shape[:1] + (_frames(inputs),)).long()
    # X-MOD's language adapters: every sequence in the first language.
    if "lang_ids" in params:
        extra["lang_ids"] = torch.zeros(BATCH, dtype=torch.long)
    # InstructBLIP's Q-Former reads the instruction too.
    if "qformer_input_ids" in params:
        extra["qformer_input_ids"] = ids
    return extra


def _frames(inputs):
    """The frame count of input_features, whichever of its last two dimensions the layout put frames in."""
    features = inputs["input_features"]
    return max(features.shape[1], features.shape[2])


def _tensors(value):
    """Every floating tensor in a model output, in order."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if hasattr(value, "layers"):  # a Cache: whatever tensors its layers hold (keys/values, recurrent states)
        # (a streaming convolution's padding cache keeps its layers by name: voxtral_realtime)
        layers = value.layers.values() if isinstance(value.layers, dict) else value.layers
        return [t for layer in layers for t in _tensors(list(vars(layer).values()))]
    return []


def _close(actual, expected, what, atol=1e-4, rtol=1e-3):
    a, e = _tensors(actual), _tensors(expected)
    if len(a) != len(e):
        raise WrongValues(f"{what}: {len(a)} tensors on tpu, {len(e)} on CPU")
    for i, (x, y) in enumerate(zip(a, e)):
        try:
            torch.testing.assert_close(x.cpu(), y, atol=atol, rtol=rtol)
        except AssertionError as err:
            raise WrongValues(f"{what} tensor {i}: " + str(err).splitlines()[-1]) from None


def _map_inputs(fn, value):
    """fn applied to every tensor of a model's inputs, through the dicts and tuples an input may nest them in (a
    Gemma 4 assistant's shared_kv_states: {layer kind: (keys, values)})."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_inputs(fn, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_inputs(fn, v) for v in value)
    return value


def _in_dtype(inputs, dtype):
    """The inputs with their floating tensors in dtype."""
    return _map_inputs(lambda t: t.to(dtype) if t.is_floating_point() else t, inputs)


def _to(inputs, device):
    return _map_inputs(lambda t: t.to(device), inputs)


class _Float32AsFloat64(torch.overrides.TorchFunctionMode):
    """Makes every float32 a model names float64, on both devices alike. Many models compute a part in float32
    whatever their dtype: attention's softmax(w, dtype=torch.float32).to(query.dtype) (xclip, efficientloftr,
    parakeet), hidden_states.to(torch.float32) (deimv2), buffers made with torch.tensor(..., dtype=torch.float32)
    (d_fine). A float64 check of such a model carries float32 rounding, and CPU's and XLA's float32 exp differ by
    an ulp, so "float64" results differed by 1e-9..1e-5 with no device error. Each torch function (and Tensor
    method) called with torch.float32 as an argument or keyword gets torch.float64 instead; .float() becomes
    .double() and .type("torch.FloatTensor") a float64 one. Tensor.view(dtype) is left alone: it reinterprets
    bytes. Outside _in_float64 the mode is not active and float32 runs are unchanged."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        elif func is torch.Tensor.type and args[1:2] and args[1] in ("torch.FloatTensor", torch.FloatTensor):
            args = (args[0], torch.float64, *args[2:])
        elif func is not torch.Tensor.view:
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
            kwargs = {k: torch.float64 if v is torch.float32 else v for k, v in kwargs.items()}
        return func(*args, **kwargs)


@contextlib.contextmanager
def _in_float64():
    """Runs a float64 check with float64 as the default dtype too: a model that makes a tensor without naming
    its dtype (fastspeech2_conformer's attention mask, torch.ones(shape)) would otherwise mix float32 into a
    float64 model, which conv1d refuses on either device; and with a float32 the model names read as float64
    (_Float32AsFloat64)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Float32AsFloat64():
            yield
    finally:
        torch.set_default_dtype(previous)


def _float64_reference(cpu, inputs):
    """A zero-argument function giving the CPU model's outputs in float64,
    computed on its first call only (a check compares several outputs)."""

    @functools.cache
    def outputs():
        reference = copy.deepcopy(cpu).double()
        with torch.no_grad(), _in_float64():
            return _same_draws(reference, **_in_dtype(inputs, torch.float64))

    return outputs


def _close_or_as_accurate_as_cpu(actual, expected, float64_reference, what):
    """_close; where that fails, tpu's float32 outputs still pass if each is within twice CPU's own float32 error
    of a float64 reference (accuracy.worst_against_float64). A model whose float32 result is ill-conditioned
    differs between devices by its own rounding (cpmant squares activations grown by random weights in float32
    layer norms: CPU's logits are 3.5e-4 from float64's, tpu's 2.1e-4, and they differ from each other by 4.8e-4
    of 26). `float64_reference()` gives the reference (see _float64_reference). Raised as PassInFloat64."""
    try:
        _close(actual, expected, what)
    except WrongValues as err:
        worst = accuracy.worst_against_float64(_tensors(actual), _tensors(expected), _tensors(float64_reference()))
        if worst is None:
            raise
        raise PassInFloat64(
            f"{what}: tpu {worst[0]:.2g} from a float64 reference, CPU's own float32 {worst[1]:.2g}; {err}"
        ) from None


def _same_draws(model, *args, **kwargs):
    """Calls the model (or its generate) with the global generators (CPU's included) reset to one seed: a model
    that draws on the host, from torch's CPU generator, draws the same on both calls (ViLT samples its image
    patches with torch.multinomial on CPU tensors, in eval mode too; VibeVoice's generate starts each audio
    latent from host noise)."""
    torch.manual_seed(0)
    return model(*args, **kwargs)


def check_forward(cpu, tpu, inputs):
    cpu.eval(), tpu.eval()
    with torch.no_grad():
        actual, expected = _same_draws(tpu, **_to(inputs, "tpu")), _same_draws(cpu, **inputs)
    _close_or_as_accurate_as_cpu(actual, expected, _float64_reference(cpu, inputs), "forward")


def check_generate(cpu, tpu, inputs, config):
    cpu.eval(), tpu.eval()
    pad = config.pad_token_id if isinstance(getattr(config, "pad_token_id", None), int) else 0
    kwargs = dict(max_new_tokens=4, do_sample=False, pad_token_id=pad)
    rows = _rows_per_sample(config)
    main = {k: v[:rows] for k, v in inputs.items() if k != "decoder_input_ids"}
    generate_inputs = GENERATE_INPUTS.get(config.model_type)
    if generate_inputs is not None:
        main = generate_inputs(config, (cpu, tpu), main)
    # VibeVoice draws each audio latent's starting noise on the host
    expected = _same_draws(cpu.generate, **main, **kwargs)
    got = _same_draws(tpu.generate, **_to(main, "tpu"), **kwargs)
    if _tensors(expected):  # a speech synthesizer's waveforms (VibeVoice), compared at the scale of CPU's
        scale = max(t.abs().max().item() for t in _tensors(expected))
        _close(got, expected, "generate (waveforms)", atol=1e-4 * scale)
        return
    got = got.cpu()
    if not torch.equal(got, expected):
        raise WrongValues(f"generate: tokens {got.tolist()} on tpu, {expected.tolist()} on CPU")
    if "input_ids" in main:  # a left-padded batch of two
        batch, extra = inputs, {}
        if generate_inputs is not None:  # with the other inputs the model's generate takes (voxtral_realtime's audio)
            batch = generate_inputs(config, (cpu, tpu), {k: v for k, v in inputs.items() if k != "decoder_input_ids"})
            extra = {k: v for k, v in batch.items() if k not in ("input_ids", "attention_mask")}
        ids = batch["input_ids"].clone()
        mask = torch.ones(ids.shape[0] // rows, ids.shape[1], dtype=ids.dtype)
        ids[rows : 2 * rows, :3], mask[1, :3] = pad, 0
        expected = cpu.generate(input_ids=ids, attention_mask=mask, **extra, **kwargs)
        got = tpu.generate(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu"), **_to(extra, "tpu"), **kwargs).cpu()
        if not torch.equal(got, expected):
            raise WrongValues(f"generate (left-padded batch): {got.tolist()} on tpu, {expected.tolist()} on CPU")


def _rows_per_sample(config):
    """How many rows of input ids make one sample: MusicGen's decoder reads one row per codebook, (batch x
    num_codebooks, steps), and its attention mask one per sample, (batch, steps); one elsewhere."""
    decoders = ("musicgen_decoder", "musicgen_melody_decoder")  # the causal LM heads' configs
    return config.num_codebooks if config.model_type in decoders else 1


def _composer_conditioned_features(config, models, inputs):
    """Pop2Piano generates MIDI tokens from embedded audio features (batch, frames, d_model), conditioned on a
    composer: its generate takes input_features, not input_ids, and reads the composer's feature token from the
    generation config's composer_to_feature_token, which its checkpoints ship (one token per composer,
    composer_vocab_size of them) and a config built from scratch lacks."""
    tokens = {f"composer{i + 1}": 1000 + i for i in range(config.composer_vocab_size)}
    for model in models:
        model.generation_config.composer_to_feature_token = tokens
    g = torch.Generator().manual_seed(2)
    return {"input_features": torch.randn(1, SEQ, config.d_model, generator=g)}


def _with_attention_mask(config, models, inputs):
    """VibeVoice's generate counts each prompt's length from its attention mask, which it requires (a processor
    always returns one)."""
    return {**inputs, "attention_mask": torch.ones_like(inputs["input_ids"])}


def _default_language(config, models, inputs):
    """X-MOD's generate passes no language ids: its adapters take the default language, which a model built from
    scratch has not set (its forward got lang_ids from the companion inputs)."""
    for model in models:
        model.set_default_language(config.languages[0])
    return {k: v for k, v in inputs.items() if k != "lang_ids"}


def _first_half_of_prompt(config, models, inputs):
    """A prompt of the first half of the tokens, where the forward's inputs leave generate no room past them:
    Voxtral Realtime generates one token per audio embedding (its features hold one per prompt token in the
    forward's inputs), so generate continues over the rest of the audio; Reformer's axial position embedding has
    exactly as many positions as the training sequence (which must fill them), so its 4 new tokens take the other
    half (on CPU too: "Position id exceeds axial_pos_shape[0] * axial_pos_shape[1]")."""
    return {**inputs, "input_ids": inputs["input_ids"][:, : SEQ // 2]}


def _audio_to_transcribe(config, models, inputs):
    """Kyutai STT's generate transcribes audio, (1, 1, samples), which its Mimi codec encodes into the codes its
    forward reads (one frame per token): 4 frames."""
    g = torch.Generator().manual_seed(2)
    return {"input_values": torch.randn(1, 1, 4 * config.codec_config.frame_size, generator=g)}


def _codebooks_start_token(config, models, inputs):
    """MusicGen's decoder starts every codebook's delayed pattern from the generation config's decoder start token,
    which its checkpoints' generation configs set (to the codebooks' BOS, 2048, past the codes) and a decoder
    built from its config lacks (None, which generate multiplies by: TypeError on CPU too): the tiny decoder's BOS.
    Its generate also reads num_return_sequences without a default (None, which it repeats the inputs by): one."""
    for model in models:
        model.generation_config.decoder_start_token_id = config.bos_token_id
        model.generation_config.num_return_sequences = 1
    return inputs


# Inputs a model's generate takes instead of the first sample of its forward's, by model_type: (config, models,
# that row) -> generate's keyword arguments, after setting what the models' generation configs need.
GENERATE_INPUTS = {
    "pop2piano": _composer_conditioned_features,
    "vibevoice": _with_attention_mask,
    "xmod": _default_language,
    "voxtral_realtime": _first_half_of_prompt,
    "reformer": _first_half_of_prompt,
    "musicgen_decoder": _codebooks_start_token,
    "musicgen_melody_decoder": _codebooks_start_token,
    "kyutai_speech_to_text": _audio_to_transcribe,
}


def _loss(model, inputs, labels):
    out = _same_draws(model, **inputs, labels=labels) if labels is not None else _same_draws(model, **inputs)
    if labels is not None and getattr(out, "loss", None) is not None:
        return out.loss
    return accuracy.mean_square_loss(_tensors(out))  # float64 in the float64 check (detr's differed in float32)


# (loss atol, loss rtol, gradient atol, gradient rtol, weight atol, weight rtol) per dtype; float64's are 1e5
# tighter, which still leaves float64 rounding (1e-16 of each value, summed over a model) far below them.
TRAIN_TOLERANCES = {
    torch.float32: (1e-5, 1e-4, 1e-4, 1e-3, 1e-5, 1e-4),
    torch.float64: (1e-10, 1e-9, 1e-9, 1e-8, 1e-10, 1e-9),
}


def check_train(cpu, tpu, inputs, labels, dtype=torch.float32):
    loss_atol, loss_rtol, grad_atol, grad_rtol, weight_atol, weight_rtol = TRAIN_TOLERANCES[dtype]
    cpu.train(), tpu.train()
    inputs = _in_dtype(inputs, dtype)
    loss_cpu = _loss(cpu, inputs, labels)
    loss_tpu = _loss(tpu, _to(inputs, "tpu"), labels.to("tpu") if labels is not None else None)
    loss_cpu.backward()
    loss_tpu.backward()
    _close(loss_tpu, loss_cpu, "loss", atol=loss_atol, rtol=loss_rtol)
    named = list(cpu.named_parameters())
    for (name, p), q in zip(named, tpu.parameters()):
        if p.grad is None:
            if q.grad is not None:
                raise WrongValues(f"gradient of {name}: set on tpu only")
            continue
        if q.grad is None:
            raise WrongValues(f"gradient of {name}: missing on tpu")
        _close(q.grad, p.grad, f"gradient of {name}", atol=grad_atol, rtol=grad_rtol)
    # AdamW's first step moves each weight by about lr * sign(gradient): a gradient that is zero in exact
    # arithmetic (a key bias under softmax) is rounding noise on both devices and would step by +-lr at random.
    # eps = 1e-3 keeps such steps proportional to the noise, while real gradients still take steps near lr.
    for model in (cpu, tpu):
        torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-3).step()
    for (name, p), q in zip(named, tpu.parameters()):
        _close(q.detach(), p.detach(), f"{name} after AdamW", atol=weight_atol, rtol=weight_rtol)


def _fresh_pair(model_type, class_name, dtype=torch.float32):
    _, cpu = build(model_type, class_name)
    _, tpu = build(model_type, class_name)
    cpu.to(dtype)
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to(dtype).to("tpu")


def check_train_at_a_kink_retries(model_type, class_name, config, head, cpu, tpu, layout=()):
    """check_train on seed 1's inputs; if they differ, once more on fresh models and seed 2's. A ReLU (or max)
    input within rounding of its kink sends a gradient one way on one device and the other way on the other: both
    are right in float32 (resnet, seed 1: one pre-activation of 3e-6 on CPU, -6e-7 on tpu, of values up to 6.8,
    moves weight gradients by 5%). Such a tie is rare, so another input passes; a device error fails both.

    Where both differ, the check runs once more in float64 on both devices with tolerances 1e5 tighter (as
    scripts/model_zoo.py does). A gradient that is zero in exact arithmetic is float32 rounding noise on both
    devices, which AdamW's first step turns into weight steps of the noise's size (conditional_detr: every
    output of its decoder's first layer is LayerNorm-ed constant rows, whose mean square does not depend on
    the self-attention's biases; their gradients are 1e-6 noise). A lowering error shows in float64 as well;
    agreement there is reported as "pass (float64)"."""
    inputs, labels = make_inputs(cpu, config, head, seed=1, layout=layout)
    try:
        check_train(cpu, tpu, inputs, labels)
    except WrongValues as first:
        cpu, tpu = _fresh_pair(model_type, class_name)
        inputs, labels = make_inputs(cpu, config, head, seed=2, layout=layout)
        try:
            check_train(cpu, tpu, inputs, labels)
        except WrongValues as second:
            float32 = f"{second} (and with other inputs: {first})"
            try:
                with _in_float64():
                    cpu, tpu = _fresh_pair(model_type, class_name, torch.float64)
                    inputs, labels = make_inputs(cpu, config, head, seed=1, layout=layout)
                    check_train(cpu, tpu, inputs, labels, dtype=torch.float64)
            except Exception as err:  # noqa: BLE001
                # float64 first: the report keeps 300 characters, and float64 decides.
                failure = f"in float64: {outcome(err)[1]}; in float32: {float32}"
                if not isinstance(err, WrongValues):
                    raise WrongValues(failure) from None
                with _in_float64():
                    within = _within_cpus_own_rounding(model_type, class_name, inputs, labels)
                if within is None:
                    raise WrongValues(failure) from None
                raise PassInFloat64(f"float64 {within}; float32: {second}") from None
            raise PassInFloat64(f"float32: {second}") from None


def _gradients(model, inputs, labels):
    """A float64 training step's loss and parameter gradients, {name: tensor} on CPU."""
    model.train()
    loss = _loss(model, inputs, labels)
    loss.backward()
    grads = {name: p.grad.detach().cpu() for name, p in model.named_parameters() if p.grad is not None}
    return {"loss": loss.detach().cpu().reshape(1), **grads}


def _within_cpus_own_rounding(model_type, class_name, inputs, labels, margin=4.0):
    """Where float64 still differs, whether tpu is as near CPU as CPU is to itself: an ill-conditioned model
    (mobilenet_v2 at 32 pixels: train-mode batch norm over two samples at 1x1, gradients of 9e3 from a loss of
    1.1) amplifies float64 rounding past the check's tolerance. CPU runs the step again on the batch in reverse
    order, the same sums in another order; tpu passes when, for the loss and every gradient, its largest
    difference from CPU is within `margin` times CPU's own. A lowering error lands far outside that. Returns a
    note for the report, or None (also when reversing the batch changes the loss beyond rounding, as for a model
    whose inputs are not batch-first)."""
    atol, _, grad_atol, _ = TRAIN_TOLERANCES[torch.float64][:4]
    cpu, tpu = _fresh_pair(model_type, class_name, torch.float64)
    reordered, _ = _fresh_pair(model_type, class_name, torch.float64)
    reordered = reordered.cpu()
    flipped = _map_inputs(lambda t: t.flip(0) if t.dim() and t.shape[0] == BATCH else t, inputs)
    try:
        expected = _gradients(cpu, inputs, labels)
        actual = _gradients(tpu, _to(inputs, "tpu"), labels.to("tpu") if labels is not None else None)
        again = _gradients(reordered, flipped, labels.flip(0) if labels is not None else None)
    except Exception:  # noqa: BLE001
        return None
    if set(actual) != set(expected) or set(again) != set(expected):
        return None
    # Reversing the batch is the same computation when the losses agree to within amplified rounding (1.5e-8 of
    # itself for timm_wrapper's resnet, whose gradients reach 3e7); a different computation differs by O(1).
    if (again["loss"] - expected["loss"]).abs().item() > 1e-6 * expected["loss"].abs().item() + atol:
        return None
    worst = (0.0, 0.0, "")
    for name, e in expected.items():
        off = (actual[name] - e).abs().max().item()
        noise = (again[name] - e).abs().max().item()
        if off > margin * noise + (atol if name == "loss" else grad_atol):
            return None
        if off > worst[0]:
            worst = (off, noise, name)
    return f"within CPU's own rounding: {worst[2]} off by {worst[0]:.2g}, CPU reordered by {worst[1]:.2g}"


def check_compile(cpu, tpu, inputs):
    import torch_tpu.compile as tpu_compile

    cpu.eval(), tpu.eval()
    torch._dynamo.reset()
    compiled = torch.compile(tpu, backend="tpu")
    on_tpu = _to(inputs, "tpu")
    with torch.no_grad():
        expected = _same_draws(cpu, **inputs)
        outputs = [_same_draws(compiled, **on_tpu) for _ in range(2)]
        tpu_compile.reset_stats()
        outputs.append(_same_draws(compiled, **on_tpu))
    stats = tpu_compile.stats()
    torch._dynamo.reset()
    if stats["graph_calls"] == 0:
        raise WrongValues("compile: no graph ran on tpu")
    if stats["graph_replays"] != stats["graph_calls"]:
        raise WrongValues(f"compile: the third call traced again: {stats['trace_reasons']}")
    float64_reference = _float64_reference(cpu, inputs)
    for output in outputs:
        _close_or_as_accurate_as_cpu(output, expected, float64_reference, "compiled forward")


def _inputs_the_cpu_model_runs_on(cpu, config, head, model_type=None):
    """(layout, inputs, labels) for the first of INPUT_LAYOUTS the CPU model runs on, its loss with labels
    included (git's loss on text alone fails on CPU: it skips image tokens the inputs lack), else the first
    it runs a forward on (the train check then reports the loss's error); raises the first layout's error
    where none does."""
    cpu.eval()
    first, forward_only = None, None
    for layout in _layouts(model_type or config.model_type, cpu, config, head):
        try:
            inputs, labels = make_inputs(cpu, config, head, layout=layout)
            with torch.no_grad():
                outputs = cpu(**inputs)
        except Exception as err:  # noqa: BLE001 (the next layout may fit)
            first = first or err
            continue
        # A tiny model whose CPU outputs are NaN is no reference to check a device against (align's B0
        # tower at random weights overflows to inf in eval, and its logits are inf - inf).
        if any(t.isnan().any() for t in _tensors(outputs)):
            raise CannotBuild("its CPU outputs are NaN at these sizes")
        if labels is not None:
            try:
                with torch.no_grad():
                    _loss(cpu, inputs, labels)
            except Exception:  # noqa: BLE001 (another layout's loss may run)
                forward_only = forward_only or (layout, inputs, labels)
                continue
        return layout, inputs, labels
    if forward_only:
        return forward_only
    raise first


def _trains(cpu, inputs, labels):
    """Whether the model has anything to train: a loss of its own (it takes labels) or a floating output. A
    tokenizer's encoder half (wavtokenizer_encoder) outputs only the integer codes its quantizer picks by argmin,
    through which no gradient flows, on any device; its train check is left out, as generate is for a model that
    does not generate."""
    if labels is not None:
        return True
    cpu.eval()
    with torch.no_grad():
        return bool(_tensors(_same_draws(cpu, **inputs)))


def run_model(model_type, head, class_name, generates):
    """Every check of one architecture, in this process: {check: (outcome, detail)}."""
    import torch_tpu

    try:
        config, cpu = build(model_type, class_name)
        layout, inputs, labels = _inputs_the_cpu_model_runs_on(cpu, config, head, model_type)
        _, tpu = build(model_type, class_name)
        tpu.load_state_dict(cpu.state_dict())
        tpu.to("tpu")
    except ImportError as err:  # an optional library the model needs, named on one line
        return not_built(ImportError(" ".join(str(err).split())), "cannot build tiny")
    except Exception as err:  # noqa: BLE001 (any failure to build is recorded)
        return not_built(err, "cannot build tiny")
    results = {}
    steps = [("forward", lambda: check_forward(cpu, tpu, inputs))]
    if generates and model_type not in DRAFTERS:
        steps.append(("generate", lambda: check_generate(cpu, tpu, inputs, config)))
    if model_type not in INFERENCE_ONLY and _trains(cpu, inputs, labels):
        steps.append(
            ("train", lambda: check_train_at_a_kink_retries(model_type, class_name, config, head, cpu, tpu, layout))
        )
    steps.append(("compile", lambda: check_compile(cpu, tpu, inputs)))
    with torch_tpu.matmul_precision("highest"):
        for check, step in steps:
            results[check] = run_check(step)
            if check == "train":  # the compile check compares with fresh weights
                tpu.load_state_dict(cpu.state_dict())
    return results


def _child(args):
    model_type, head, class_name, generates = args.child.split(",")
    child_process.print_result(run_model(model_type, head, class_name, generates == "1"))


def _run_one(arch, timeout):
    model_type, head, class_name, generates = arch
    seconds, results = child_process.run_item(
        "sweeps.hf_coverage", f"{model_type},{head},{class_name},{int(generates)}", timeout
    )
    return _record(model_type, head, class_name, seconds, results)


def _record(model_type, head, class_name, seconds, results):
    """One architecture's line of the report: {check: (outcome, detail)} and its wall time."""
    return {"model_type": model_type, "head": head, "class": class_name, "seconds": seconds, "results": results}


def write_report(records, path, seconds, workers, merged=False):
    import transformers

    records = sorted(records, key=lambda r: r["model_type"])
    built = [r for r in records if not excluded(r)]
    ok = [r for r in built if passed(r)]
    in_float64 = sum(r["results"].get("train", ("", ""))[1].startswith("in float64") for r in ok)
    if merged:
        enumerated = len(architectures())
        run = (
            f"{len(records)} of the {enumerated} architectures it enumerates, run in batches whose results "
            f"`--merge` accumulates here; the architectures took {sum(r['seconds'] for r in records) / 60:.0f} min "
            f"in all, one process each (the last batch: {seconds / 60:.0f} min on {workers} workers)."
        )
    else:
        run = f"{len(records)} architectures in {seconds / 60:.0f} min on {workers} workers."
    lines = [
        "# Hugging Face coverage on tpu",
        "",
        f"Generated by `python scripts/hf_coverage.py` (transformers {transformers.__version__}, torch "
        f"{torch.__version__}), " + run + " " + report.optimization_note(merged),
        "",
        f"**{len(ok)} of {len(built)} architectures that build tiny pass every check "
        f"({100 * len(ok) / max(1, len(built)):.1f}%)**"
        + (f", {in_float64} of them training equal in float64 only (see the train column)" if in_float64 else "")
        + f"; {len(records) - len(built)} cannot be built tiny (excluded, listed below).",
    ]
    if merged:  # the goal is stated over everything enumerated, exclusions counted as failures
        lines[-1] += f" **Of all {enumerated} enumerated, {len(ok)} pass ({100 * len(ok) / enumerated:.1f}%).**" + (
            f" {enumerated - len(records)} not run yet." if len(records) < enumerated else ""
        )
    report.write(path, lines + LEDGER.totals(built) + LEDGER.tables(records))


def main():
    parser = command_line.arguments(
        __doc__.split("\n\n")[0],
        "architectures",
        report=os.path.join(report.DOCS, "hf_coverage.md"),
        workers=max(1, (os.cpu_count() or 2)),
        timeout=900,
        only="model types",
    )
    args = parser.parse_args()
    if args.child:
        return _child(args)
    command_line.run(
        args,
        LEDGER,
        lambda: architectures(command_line.only(args)),
        lambda a: (a[0],),
        _run_one,
        lambda records, seconds, merged: write_report(records, args.report, seconds, args.workers, merged),
    )


if __name__ == "__main__":
    main()
