"""Per-model recipes for scripts/hf_coverage.py: the config fixes and inputs of the architectures its generic
builder cannot make (a forward that takes a patch grid, boxes, a time series, video frames...), keyed by
model_type in one place, each family's recipe shared by its members.

A recipe gives a list of candidate inputs (the same call with other layouts: a vision tower may take its
patches flat or as images); the sweep keeps the first the CPU model runs on, as it does with its generic
layouts. Sizes follow transformers' own ModelTesters where they set them (read, not copied)."""

import inspect

import torch

BATCH = 2
# A patch grid of 4 x 4 per image: divisible by every spatial merge (2 x 2) the towers use.
GRID = 4


def _field(config, *names, default=None):
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _params(model):
    return list(inspect.signature(model.forward).parameters)


# --- vision towers that take a patch grid (qwen2_5_vl's and its descendants) -------------------------------


def _patch_grid_vision(model, config, head, g):
    """Qwen2-VL-style vision towers take every image's patches packed in one sequence and each image's
    (frames, rows, columns) grid, grid_thw: two images of one frame and GRID x GRID patches. The packed patches
    come flat (channels x temporal patch x patch x patch per row) or as images, depending on the tower: one
    candidate each."""
    params = _params(model)
    name = params[0]
    grid_name = next(p for p in params if "grid" in p)
    channels = _field(config, "in_channels", "num_channels", default=3)
    patch = _field(config, "patch_size", default=8)
    temporal = _field(config, "temporal_patch_size", default=1)
    merge = _field(config, "spatial_merge_size", default=1)
    grid = torch.tensor([[1, GRID, GRID]] * BATCH)
    seq = BATCH * GRID * GRID
    shapes = [
        (seq, channels * temporal * patch * patch),
        (seq, channels * patch * patch),
        (seq, channels, temporal, patch, patch),
        (seq, channels, patch, patch),
        # temporal patches of two frames where the config does not say (muse_glimmer, muse_spark)
        (seq, channels * 2 * patch * patch),
        (BATCH, channels, GRID * patch, GRID * patch),
        (BATCH, GRID * patch, GRID * patch, channels),
        (GRID * patch, GRID * patch, channels),
    ]
    candidates = []
    for shape in dict.fromkeys(shapes):
        inputs = {name: torch.randn(*shape, generator=g), grid_name: grid}
        if "merge_sizes" in params:
            inputs["merge_sizes"] = torch.tensor([merge if merge > 1 else 2] * BATCH)
        candidates.append(inputs)
    return candidates


PATCH_GRID_VISION = (
    "cohere_compass_vision",
    "cosmos3_edge_vision",
    "exaone4_5_vision",
    "glm4v_moe_vision",
    "glm4v_vision",
    "glm5_next_vision",
    "glm_image_vision",
    "glm_ocr_vision",
    "hunyuan_vl_vision",
    "hy_v4_vl_vision",
    "inkling2_vision",
    "kimi_k25_vision",
    "lfm3_vl_vision",
    "muse_glimmer_vision",
    "muse_spark_vision",
    "qwen2_5_vl_vision",
    "qwen3_5_moe_vision",
    "qwen3_5_vision",
    "qwen3_vl_moe_vision",
    "qwen3_vl_vision",
    "qwen4_exp_vision",
    "video_llama_3_vision",
)


# --- vision towers at native resolution: patches flat, with each patch's place ------------------------------


def _native_resolution_patches(model, config, head, g):
    """SigLIP 2 and Gemma 4's vision towers take each image as a padded sequence of flat patches (channels x
    patch x patch per row) and where each patch sits: SigLIP 2 each image's (rows, columns) and a mask of real
    patches, Gemma 4 each patch's (x, y). A 6 x 6 grid: Gemma 4 pools it by 3 x 3 to 4 tokens."""
    params = _params(model)
    vision = getattr(config, "vision_config", None) or config
    patch = _field(vision, "patch_size", default=8)
    channels = _field(vision, "num_channels", default=3)
    side = 6
    patches = torch.randn(BATCH, side * side, channels * patch * patch, generator=g)
    inputs = {"pixel_values": patches}
    if "pixel_position_ids" in params:
        rows, columns = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
        inputs["pixel_position_ids"] = torch.stack([columns.flatten(), rows.flatten()], -1).expand(BATCH, -1, -1)
    if "spatial_shapes" in params:
        inputs["spatial_shapes"] = torch.tensor([[side, side]] * BATCH)
        inputs["pixel_attention_mask"] = torch.ones(BATCH, side * side, dtype=torch.long)
    if "input_ids" in params:
        inputs["input_ids"] = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [inputs]


# --- time series -------------------------------------------------------------------------------------------

SEQ = 8


def _lagged_series_config(config):
    """Probabilistic forecasters (time_series_transformer, informer, autoformer) leave prediction_length to the
    user and read past_values lagged by lags_sequence: 4 steps predicted from 8 (and 3 lags), one time
    feature, as their ModelTesters set them."""
    config.prediction_length = 4
    config.context_length = SEQ
    config.lags_sequence = [1, 2, 3]
    config.num_time_features = 1
    if hasattr(config, "label_length"):  # autoformer's decoder starts from the context's last label_length steps
        config.label_length = 4
    # feature_size counts the encoder's inputs: the lags, the scaling features (2) and the time features.
    config.feature_size = len(config.lags_sequence) + 2 + config.num_time_features


def _lagged_series(model, config, head, g):
    past = config.context_length + max(config.lags_sequence)
    future = config.prediction_length
    features = config.num_time_features
    return [
        {
            "past_values": torch.randn(BATCH, past, generator=g),
            "past_time_features": torch.randn(BATCH, past, features, generator=g),
            "past_observed_mask": torch.ones(BATCH, past),
            "future_values": torch.randn(BATCH, future, generator=g),
            "future_time_features": torch.randn(BATCH, future, features, generator=g),
        }
    ]


def _patched_series_config(config):
    """PatchTST and PatchTSMixer: 32 steps of 2 channels in patches of 8."""
    config.context_length = 32
    config.patch_length = 8
    config.patch_stride = 8
    config.num_input_channels = 2
    config.prediction_length = 8


def _patched_series(model, config, head, g):
    values = torch.randn(BATCH, config.context_length, config.num_input_channels, generator=g)
    mask = torch.ones_like(values)
    mask_name = "past_observed_mask" if "past_observed_mask" in _params(model) else "observed_mask"
    return [{"past_values": values, mask_name: mask}, {"past_values": values}]


def _foundation_series_config(config):
    """TimesFM: a context of 4 patches of 8 steps (default 512 or 16384 steps in patches of 32)."""
    config.patch_length = 8
    config.context_length = 32
    config.horizon_length = 8


def _foundation_series(model, config, head, g):
    values = torch.randn(BATCH, config.context_length, generator=g)
    inputs = {"past_values": values, "past_values_padding": torch.zeros(BATCH, config.context_length).long()}
    candidates = [dict(inputs)]
    if "freq" in _params(model):
        candidates.insert(0, {**inputs, "freq": torch.zeros(BATCH, 1, dtype=torch.long)})
    return candidates


# --- video -------------------------------------------------------------------------------------------------


def _short_clips_config(frames, tubelet=None):
    """Video transformers: `frames` frames (defaults of 8 to 64), in tubelets of `tubelet` frames where they
    group them (a tubelet's spatial size is the patch's)."""

    def fix(config):
        for name in ("num_frames", "frames_per_clip"):
            if hasattr(config, name):
                setattr(config, name, frames)
        vision = getattr(config, "vision_config", None)
        if vision is not None and hasattr(vision, "num_frames"):  # X-CLIP's frames are its vision tower's
            vision.num_frames = frames
        if tubelet is not None and hasattr(config, "tubelet_size"):
            patch = _field(config, "patch_size", default=8)
            old = config.tubelet_size
            config.tubelet_size = [tubelet, patch, patch] if isinstance(old, (list, tuple)) else tubelet
        size = getattr(config, "crop_size", None)
        if isinstance(size, int) and size > 32:
            config.crop_size = 32

    return fix


def _clips(model, config, head, g):
    vision = getattr(config, "vision_config", None) or config
    frames = _field(config, "num_frames", "frames_per_clip", default=None) or _field(vision, "num_frames", default=4)
    size = _field(vision, "image_size", "crop_size", default=32)
    channels = _field(vision, "num_channels", "in_chans", default=3)
    name = "pixel_values_videos" if "pixel_values_videos" in _params(model) else "pixel_values"
    clip = torch.randn(BATCH, frames, channels, size, size, generator=g)
    candidates = [{name: clip}]
    if "input_ids" in _params(model):
        candidates.insert(0, {name: clip, "input_ids": torch.randint(2, 100, (BATCH, SEQ), generator=g)})
    return candidates


# --- layout (text with word boxes) -------------------------------------------------------------------------


def _boxes(g, corners=2):
    """Word boxes on a 0..1000 page, each (x0, y0, x1, y1) ordered as layout models require."""
    low = torch.randint(0, 500, (BATCH, SEQ, 2), generator=g)
    high = low + torch.randint(1, 400, (BATCH, SEQ, 2), generator=g)
    box = torch.cat([low, high], -1)
    if corners == 4:  # Bros: the four corners of each box
        x0, y0, x1, y1 = box.unbind(-1)
        box = torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], -1)
    return box


def _layout(model, config, head, g):
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    params = _params(model)
    extra = {}
    if "pixel_values" in params:
        size = _field(config, "image_size", "input_size", default=32)
        extra["pixel_values"] = torch.randn(BATCH, 3, size, size, generator=g)
    if "decoder_input_ids" in params:
        extra["decoder_input_ids"] = ids
    boxes4, boxes8 = _boxes(g), _boxes(g, corners=4)
    return [{"input_ids": ids, "bbox": boxes4, **extra}, {"input_ids": ids, "bbox": boxes8, **extra}]


def _bros_config(config):
    """Bros derives its box embedding's widths from hidden_size when the config is made, before the shrinker
    narrows it: derived again."""
    config.dim_bbox_sinusoid_emb_2d = config.hidden_size // 4
    config.dim_bbox_sinusoid_emb_1d = config.dim_bbox_sinusoid_emb_2d // config.dim_bbox
    config.dim_bbox_projection = config.hidden_size // config.num_attention_heads


def _lilt_config(config):
    """LiLT embeds a box's six coordinates hidden_size // 6 wide each into a layout stream channel_shrink_ratio
    narrower: 96 wide (64 does not divide by 6)."""
    config.hidden_size = 96


def _layoutlmv3_config(config):
    """LayoutLMv3's relative 2D position embedding is four coordinates and two sizes wide, which must make
    hidden_size (4 x 128 + 2 x 128 = 768 by default): 4 x 10 + 2 x 12 = 64."""
    config.coordinate_size = 10
    config.shape_size = 12
    config.input_size = 32  # its image input, 224 pixels by default


# Fields a default config lacks that its modeling code reads (each fails on CPU as built from the default):
# transformers' ModelTesters set them.


def _rope_per_layer_type_config(config):
    """Cohere Compass reads its rotary parameters per layer type, with an mrope_section sized for 64
    frequencies by default, and its default config leaves them empty: one default rotary per type, its
    sections split in the default's proportions over the tiny head's frequencies."""
    from transformers import PretrainedConfig

    for owner in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        if not getattr(owner, "layer_types", None) or getattr(owner, "rope_parameters", None):
            continue
        frequencies = (owner.head_dim or owner.hidden_size // owner.num_attention_heads) // 2
        spatial = frequencies * 5 // 16
        section = [frequencies - 2 * spatial, spatial, spatial]
        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section}
        owner.rope_parameters = {kind: dict(rope) for kind in set(owner.layer_types)}


def _four_stage_backbone_config(config):
    """Segmentation heads on a Swin backbone (maskformer, mask2former, oneformer) read all four of its stages,
    which the shrinker cut to two: four stages of one block each, widths 32 to 256, every stage an output."""
    backbone = config.backbone_config
    backbone.depths = [1, 1, 1, 1]
    backbone.num_heads = [1, 2, 4, 8]
    backbone.embed_dim = 32
    backbone.hidden_size = 256
    backbone.stage_names = ["stem", "stage1", "stage2", "stage3", "stage4"]
    backbone.set_output_features_output_indices(out_features=None, out_indices=[1, 2, 3, 4])


def _task_conditioned_segmentation_config(config):
    """OneFormer: its Swin backbone as maskformer's, 8 queries (150 by default), and a task prompt of 8 tokens
    (77 by default) from a tiny vocabulary."""
    _four_stage_backbone_config(config)
    config.num_queries = 8
    config.task_seq_len = 8
    config.text_encoder_vocab_size = 128


def _task_conditioned_segmentation(model, config, head, g):
    """OneFormer reads the image with its task (semantic, instance or panoptic) as a tokenized prompt."""
    size = _field(config.backbone_config, "image_size", default=32)
    return [
        {
            "pixel_values": torch.randn(BATCH, 3, size, size, generator=g),
            "task_inputs": torch.randint(2, 100, (BATCH, config.task_seq_len), generator=g),
        }
    ]


def _hgnet_config(config):
    """HGNetV2's stages are lists of channels the shrinker leaves alone (tuples, up to 2048 wide) while it cuts
    hidden_sizes, which its classifier reads, to two: four stages 16 to 128 wide, each stage's input the last
    one's output, and hidden_sizes their outputs."""
    config.stem_channels = [3, 16, 16]
    config.stage_in_channels = [16, 32, 64, 96]
    config.stage_mid_channels = [16, 16, 32, 32]
    config.stage_out_channels = [32, 64, 96, 128]
    config.stage_num_blocks = [1, 1, 1, 1]
    config.stage_numb_of_layers = [2, 2, 2, 2]
    config.hidden_sizes = list(config.stage_out_channels)


def _real_time_detector_config(config):
    """RT-DETR's family reads the backbone stages it names (stage2 to stage4, 512 to 2048 channels: the
    shrinker cut the backbone's widths but not encoder_in_channels): a four-stage backbone of one block per
    stage, 16 to 128 wide (an HGNetV2 as _hgnet_config), the encoder's inputs its outputs' widths, and every
    later width the tiny d_model; 8 queries (300 by default)."""
    backbone = config.backbone_config
    if backbone.model_type == "hgnet_v2":
        _hgnet_config(backbone)
    else:
        backbone.depths = [1, 1, 1, 1]
        backbone.embedding_size = 16
        backbone.hidden_sizes = [16, 32, 64, 128]
    outputs = backbone.out_indices
    backbone.stage_names = ["stem", "stage1", "stage2", "stage3", "stage4"]
    backbone.set_output_features_output_indices(out_features=None, out_indices=outputs)
    # The encoder reads the last stages (pp_doclayout's mask branch takes the first of four apart).
    config.encoder_in_channels = [backbone.hidden_sizes[i - 1] for i in outputs][-len(config.encoder_in_channels) :]
    config.encoder_hidden_dim = config.d_model
    config.decoder_in_channels = [config.d_model] * len(config.decoder_in_channels)
    config.num_queries = 8
    if hasattr(config, "x4_feat_dim"):  # pp_doclayout_v3's mask branch reads the first stage's output
        config.x4_feat_dim = backbone.hidden_sizes[outputs[0] - 1]


def _dbrx_config(config):
    config.attn_config.rope_theta = 10000.0
    config.attn_config.clip_qkv = 8.0


def _no_dropout_rate(config):
    from transformers import PretrainedConfig

    for owner in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        owner.dropout_rate = 0.0


def _key_value_heads(config):
    config.num_key_value_heads = config.num_attention_heads


def _codebooks_config(config):
    """MusicGen's decoder: 2 codebooks (4 by default), one row of input ids per codebook."""
    config.num_codebooks = 2


def _codebooks(model, config, head, g):
    codes = config.num_codebooks
    ids = torch.randint(2, 100, (BATCH * codes, SEQ), generator=g)
    return [{"input_ids": ids, "labels": ids.reshape(BATCH, codes, SEQ).transpose(1, 2)}]


# --- vision-language models whose text holds one placeholder token per image query (BLIP-2's family) --------

IMAGE_TOKEN = 3


def _query_placeholders_config(config):
    """BLIP-2 and InstructBLIP put their Q-Former's num_query_tokens outputs (32 by default) where the text has
    image_token_index, which a config built from scratch leaves None: 4 queries, token 3."""
    config.num_query_tokens = 4
    config.image_token_index = IMAGE_TOKEN
    config.video_token_index = IMAGE_TOKEN  # InstructBLIP-Video's name for it


def _query_placeholders(model, config, head, g):
    queries = config.num_query_tokens
    text = torch.randint(IMAGE_TOKEN + 1, 100, (BATCH, SEQ), generator=g)
    ids = torch.cat([torch.full((BATCH, queries), IMAGE_TOKEN), text], 1)
    size = _field(config.vision_config, "image_size", default=32)
    frames = (4,) if "video" in config.model_type else ()
    inputs = {"pixel_values": torch.randn(BATCH, *frames, 3, size, size, generator=g), "input_ids": ids}
    if "qformer_input_ids" in _params(model):
        inputs["qformer_input_ids"] = text
    return [inputs]


def _spectrogram_patches_config(config):
    """The Audio Spectrogram Transformer patches a (frames, mel bins) spectrogram with overlapping strides,
    1024 frames by default: 24 frames of 16 bins in 8 x 8 patches at stride 4 (5 x 3 patches)."""
    config.max_length = 24
    config.frequency_stride = 4
    config.time_stride = 4


def _spectrogram(model, config, head, g):
    return [{"input_values": torch.randn(BATCH, config.max_length, config.num_mel_bins, generator=g)}]


def _query_transformer(model, config, head, g):
    """BLIP-2's Q-Former alone: its learned queries (4 here) cross-attend to image features."""
    return [
        {
            "query_embeds": torch.randn(BATCH, 4, config.hidden_size, generator=g),
            "encoder_hidden_states": torch.randn(BATCH, 16, config.encoder_hidden_size, generator=g),
        }
    ]


def _segment_anything_config(config):
    """SAM: its image encoder's neck outputs output_channels (256) that its prompt encoder and mask decoder read
    at their hidden_size, and the prompt encoder's positional grid is image_embedding_size (64) wide, the
    encoder's patch grid (4 x 4 at 32 pixels in patches of 8); windows of 2 tile it, the second layer global."""
    vision = config.vision_config
    vision.output_channels = config.prompt_encoder_config.hidden_size
    vision.window_size = 2
    vision.global_attn_indexes = [1]
    vision.mlp_dim = 128
    config.prompt_encoder_config.image_embedding_size = vision.image_size // vision.patch_size
    config.mask_decoder_config.mlp_dim = 128
    config.mask_decoder_config.iou_head_hidden_dim = 64
    vision.num_pos_feats = config.prompt_encoder_config.hidden_size // 2  # sine and cosine of each
    if hasattr(config.mask_decoder_config, "vit_dim"):  # SAM-HQ's decoder reads the encoder's early features
        config.mask_decoder_config.vit_dim = vision.hidden_size


def _hiera_config(hiera):
    """SAM 2's Hiera backbone: four stages of one block (two in the third), 16 to 128 wide, windows that tile
    64-pixel images (stages of 16, 8, 4 and 2 patches a side); the third stage's second block is global (a
    stage's first block pools its queries within windows, so it cannot be)."""
    hiera.hidden_size = 16
    hiera.embed_dim_per_stage = [16, 32, 64, 128]
    hiera.num_attention_heads_per_stage = [1, 2, 4, 8]
    hiera.blocks_per_stage = [1, 1, 2, 1]
    hiera.global_attention_blocks = [3]
    hiera.window_size_per_stage = [4, 2, 2, 2]
    hiera.window_positional_embedding_background_size = [4, 4]
    hiera.image_size = [64, 64]


def _segment_anything_2_config(config):
    """SAM 2: the Hiera backbone of _hiera_config, its feature pyramid over the backbone's stages (widths, and
    sizes at stride 4, 8 and 16 of 64-pixel images) at the prompt encoder's and mask decoder's width."""
    if config.model_type == "sam2_hiera_det_model":
        _hiera_config(config)
        return
    vision = getattr(config, "vision_config", config)
    _hiera_config(vision.backbone_config)
    vision.backbone_channel_list = [128, 64, 32, 16]
    vision.backbone_feature_sizes = [[16, 16], [8, 8], [4, 4]]
    prompt = getattr(config, "prompt_encoder_config", None)
    vision.fpn_hidden_size = prompt.hidden_size if prompt is not None else 64
    if prompt is not None:
        prompt.image_size = 64
        prompt.patch_size = 16
        config.mask_decoder_config.mlp_dim = 128
        config.mask_decoder_config.iou_head_hidden_dim = 64
    config.image_size = 64  # the sweep's images


def _gemma4_audio(model, config, head, g):
    """Gemma 4's audio encoder takes (frames, mel bins) features with a mask of real frames; its projection
    after two stride-2 convolutions is sized as if the mel bins were its first convolution's channels (128
    both by default), so the features are that wide."""
    mels = config.subsampling_conv_channels[0]
    frames = 32
    return [
        {
            "input_features": torch.randn(BATCH, frames, mels, generator=g),
            "input_features_mask": torch.ones(BATCH, frames, dtype=torch.bool),
        }
    ]


def _diarization_head_config(config):
    """Nemotron 3's speaker diarization head reads its audio encoder's states at audio_hidden_size (512), a
    width the shrinker does not know by that name: the encoder's."""
    diarization = getattr(config, "diarization_config", config)
    diarization.head_config.audio_hidden_size = diarization.audio_config.hidden_size


def _stacked_frames(model, config, head, g):
    """Granite Speech 5's encoder reads (frames, 4 x mel bins) features: its feature extractor stacks four
    frames per row."""
    encoder = getattr(config, "encoder_config", config)
    return [{"input_features": torch.randn(BATCH, 16, 4 * encoder.num_mel_bins, generator=g)}]


def _codec_half(model, config, head, g):
    """An audio codec's encoder or decoder alone: the encoder takes audio (batch, channels, samples), the
    decoder latents (batch, width, frames) or (batch, frames, width) at one of the widths the codec names."""
    name = _params(model)[0]
    channels = _field(config, "audio_channels", "channels", default=1)
    candidates = [{name: torch.randn(BATCH, channels, 1024, generator=g)}]
    for width in dict.fromkeys(
        w for w in (_field(config, "hidden_size"), _field(config, "codebook_dim"), _field(config, "vae_dim")) if w
    ):
        candidates.append({name: torch.randn(BATCH, width, 4, generator=g)})
        candidates.append({name: torch.randn(BATCH, 4, width, generator=g)})
    return candidates


# --- inputs a forward requires besides its main one -----------------------------------------------------------


def _speech_chunks(model, config, head, g):
    """Qwen3-ASR's encoder cuts its (mel bins, frames) features into chunks of 2 x n_window frames and counts each
    chunk's 13 outputs after three stride-2 convolutions as a constant (sized for its default 100-frame chunks),
    so the chunks keep their default length: one chunk per clip, every frame valid."""
    frames = 2 * config.n_window
    return [
        {
            "input_features": torch.randn(BATCH, config.num_mel_bins, frames, generator=g),
            "input_features_mask": torch.ones(BATCH, frames, dtype=torch.long),
        }
    ]


def _stacked_frames_config(config):
    """Fun-ASR-Nano's encoder layer-normalizes its last transcription layer and its last timestamp layer, 20 of
    its default 50: one of the tiny model's two."""
    config.num_timestamp_prediction_layers = 1


def _stacked_frames_with_mask(model, config, head, g):
    """Fun-ASR-Nano's encoder reads low-frame-rate features, num_stacked_frames mel frames stacked per row
    (input_size wide), with a mask of real rows."""
    return [
        {
            "input_features": torch.randn(BATCH, SEQ, config.input_size, generator=g),
            "input_features_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        }
    ]


def _in_context_segmentation_config(config):
    """SegGPT paints an image's mask from a prompt image and its mask stacked above it: a (height, width) image
    of 32 x 16 pixels (two 16 x 16 halves; 896 x 448 by default), position embeddings for 32 pixels, its decoder
    reading both tiny layers (merge_index must come before the last)."""
    config.image_size = [32, 16]
    config.pretrain_image_size = 32
    config.mlp_dim = 128
    config.merge_index = 0
    config.intermediate_hidden_state_indices = [0, 1]


def _prompted_images(model, config, head, g):
    height, width = config.image_size
    half = (BATCH, config.num_channels, height // 2, width)
    return [
        {
            "pixel_values": torch.randn(*half, generator=g),
            "prompt_pixel_values": torch.randn(*half, generator=g),
            "prompt_masks": torch.randn(*half, generator=g),
        }
    ]


def _tiny_timm_vision_config(config, depth=0):
    """Perception Encoder's video tower is a timm ViT-L at 336 pixels (300M parameters), built from the timm
    architecture its sub-config names, which the shrinker cannot see into: timm's own arguments make it 2 layers
    of 64 wide, over 32-pixel images in patches of 8."""
    from transformers import PretrainedConfig

    if getattr(config, "model_type", None) == "timm_wrapper":
        config.model_args = {"img_size": 32, "patch_size": 8, "embed_dim": 64, "depth": 2, "num_heads": 4}
        return
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig) and depth < 3:
            _tiny_timm_vision_config(value, depth + 1)


def _perception_encoder(model, config, head, g):
    """Perception Encoder's audio, video and audio-video models embed text with audio (raw, one channel) or video
    clips (frames of images), as many of the three as the forward takes; 4 frames of 32 pixels, or 4 codec
    frames of audio (the audio tower's codec downsamples by its hop length)."""
    params = _params(model)
    inputs = {}
    if "input_ids" in params:
        inputs["input_ids"] = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    if "input_values" in params:
        audio = getattr(config, "audio_config", config)
        hop = _field(getattr(audio, "dac_config", audio), "hop_length", default=1920)
        inputs["input_values"] = torch.randn(BATCH, 1, 4 * hop, generator=g)
    if "pixel_values_videos" in params:
        video = getattr(config, "video_config", config)
        vision = getattr(video, "vision_config", video)
        size = (getattr(vision, "model_args", None) or {}).get("img_size", 32)
        inputs["pixel_values_videos"] = torch.randn(BATCH, 4, 3, size, size, generator=g)
    return [inputs]


def _open_vocabulary_detection(model, config, head, g):
    """OmDet-Turbo detects the classes its prompt names: each image's class names tokenized one per row (two per
    image here, classes_structure counting them) and a task prompt per image, both with attention masks."""
    classes = 2
    size = _field(config, "image_size", default=32)
    ids = lambda rows: torch.randint(2, 100, (rows, SEQ), generator=g)  # noqa: E731
    return [
        {
            "pixel_values": torch.randn(BATCH, 3, size, size, generator=g),
            "classes_input_ids": ids(BATCH * classes),
            "classes_attention_mask": torch.ones(BATCH * classes, SEQ, dtype=torch.long),
            "tasks_input_ids": ids(BATCH),
            "tasks_attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
            "classes_structure": torch.tensor([classes] * BATCH),
        }
    ]


def _stacked_mel_frames(model, config, head, g):
    """Wav2Vec2-BERT reads (frames, feature_projection_input_dim) features: its feature extractor stacks two
    frames of 80 mel bins per row."""
    width = config.feature_projection_input_dim
    return [{"input_features": torch.randn(BATCH, SEQ, width, generator=g)}]


def _semantic_and_acoustic_config(config):
    """NeuCodec quantizes its acoustic and semantic encoders' states concatenated: quantization_dim (2048 by
    default) is their two widths summed. Its decoder's attention projects keys and values for every head."""
    config.num_key_value_heads = config.num_attention_heads
    config.quantization_dim = config.hidden_size + config.semantic_model_config.hidden_size


def _semantic_and_acoustic_audio(model, config, head, g):
    """NeuCodec encodes raw audio (one channel) with its acoustic encoder and the same audio's stacked mel
    features with its semantic encoder (a Wav2Vec2-BERT), whose frames match the codes: 4 codes, of
    encoder_hop_length samples each."""
    codes = 4
    width = config.semantic_model_config.feature_projection_input_dim
    return [
        {
            "input_values": torch.randn(BATCH, 1, codes * config.encoder_hop_length, generator=g),
            "input_features": torch.randn(BATCH, codes, width, generator=g),
        }
    ]


def _grounded_text_config(config):
    """Kosmos-2 puts latent_query_num image embeddings (64 by default) in its text: 4."""
    config.latent_query_num = 4


def _grounded_text(model, config, head, g):
    """Kosmos-2's text holds its image's embeddings where image_embeds_position_mask is 1: after a start token,
    latent_query_num of them, then words."""
    queries = config.latent_query_num
    ids = torch.randint(4, 100, (BATCH, 1 + queries + SEQ), generator=g)
    where = torch.zeros_like(ids)
    where[:, 1 : 1 + queries] = 1
    size = _field(config.vision_config, "image_size", default=32)
    return [
        {
            "pixel_values": torch.randn(BATCH, 3, size, size, generator=g),
            "input_ids": ids,
            "image_embeds_position_mask": where,
            "attention_mask": torch.ones_like(ids),
        }
    ]


def _interleaved_images(model, config, head, g):
    """IDEFICS cross-attends from text to images: one image per sequence, (batch, images, channels, height,
    width), and image_attention_mask saying which image each token sees (every token its one image)."""
    size = _field(config.vision_config, "image_size", default=32)
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [
        {
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
            "pixel_values": torch.randn(BATCH, 1, 3, size, size, generator=g),
            "image_attention_mask": torch.ones(BATCH, SEQ, 1, dtype=torch.long),
        }
    ]


def _text_prompted_segmentation_config(config):
    """SAM 3's feature pyramid (fpn_hidden_size, 256 by default) feeds its DETR encoder and decoder at their
    hidden_size, and is sized for its ViT's patch grid (72 x 72 at 1008 pixels) scaled by 4, 2 and 1: the tiny
    ViT's grid (4 x 4 at 32 pixels in patches of 8) scaled so. 8 queries (200 by default)."""
    vision = config.vision_config
    grid = vision.backbone_config.image_size // vision.backbone_config.patch_size
    vision.fpn_hidden_size = config.detr_encoder_config.hidden_size
    vision.backbone_feature_sizes = [[grid * 4] * 2, [grid * 2] * 2, [grid] * 2]
    config.detr_decoder_config.num_queries = 8


def _text_prompted_segmentation(model, config, head, g):
    """SAM 3 segments what a text prompt names: the image with the prompt's tokens and mask."""
    vision = getattr(config, "vision_config", config)
    size = _field(getattr(vision, "backbone_config", vision), "image_size", default=32)
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [
        {
            "pixel_values": torch.randn(BATCH, 3, size, size, generator=g),
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
        }
    ]


# --- single models -------------------------------------------------------------------------------------------


def _trajectories(model, config, head, g):
    """Decision Transformer reads trajectories: states, actions, rewards, returns to go and time steps."""
    return [
        {
            "states": torch.randn(BATCH, SEQ, config.state_dim, generator=g),
            "actions": torch.randn(BATCH, SEQ, config.act_dim, generator=g),
            "rewards": torch.randn(BATCH, SEQ, 1, generator=g),
            "returns_to_go": torch.randn(BATCH, SEQ, 1, generator=g),
            "timesteps": torch.arange(SEQ).expand(BATCH, SEQ).contiguous(),
            "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        }
    ]


def _lxmert_config(config):
    config.visual_feat_dim = 32  # its region features (2048 wide by default)


def _regions(model, config, head, g):
    """LXMERT reads text with detected regions: each region's features and its box."""
    regions = 4
    return [
        {
            "input_ids": torch.randint(2, 100, (BATCH, SEQ), generator=g),
            "visual_feats": torch.randn(BATCH, regions, config.visual_feat_dim, generator=g),
            "visual_pos": torch.rand(BATCH, regions, config.visual_pos_dim, generator=g),
        }
    ]


def _squeezebert_config(config):
    config.embedding_size = config.hidden_size  # it has no projection between the two


def _reformer_config(config):
    """Reformer's LM head requires a decoder; its axial position embedding factors the sequence (8 = 2 x 4)
    and splits hidden_size between the two axes. Local attention only: LSH attention hashes with random
    rotations drawn on each device."""
    config.is_decoder = True
    config.attn_layers = ["local", "local"]
    config.axial_pos_shape = (2, 4)
    config.axial_pos_embds_dim = (32, 32)
    config.local_attn_chunk_length = 4
    config.max_position_embeddings = SEQ


def _rectangular_images(model, config, head, g):
    """MGP-STR reads text images of a (height, width) pair (32 x 128)."""
    height, width = config.image_size
    return [{"pixel_values": torch.randn(BATCH, config.num_channels, height, width, generator=g)}]


def _sliding_window_config(config):
    from transformers import PretrainedConfig

    for owner in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        if "sliding_window" in vars(owner) and owner.sliding_window is None:
            owner.sliding_window = 4


CODEC_HALVES = (
    "mimi_decoder",
    "pocket_tts_audio_tokenizer_decoder",
    "vibevoice_acoustic_tokenizer_decoder",
    "vibevoice_acoustic_tokenizer_encoder",
)
REAL_TIME_DETECTORS = ("rt_detr", "rt_detr_v2", "d_fine", "deimv2", "pp_doclayout_v3", "pp_doclayout_v4")

# model_type -> recipe(model, config, head, generator) -> [candidate inputs]
RECIPES = {model_type: _patch_grid_vision for model_type in PATCH_GRID_VISION}
RECIPES.update(dict.fromkeys(("autoformer", "informer", "time_series_transformer"), _lagged_series))
RECIPES.update(dict.fromkeys(("patchtst", "patchtsmixer"), _patched_series))
RECIPES.update(dict.fromkeys(("timesfm", "timesfm2_5"), _foundation_series))
RECIPES.update(
    dict.fromkeys(("timesformer", "videomae", "vivit", "vjepa2", "videoprism_vision_model", "xclip"), _clips)
)
RECIPES.update(dict.fromkeys(("bros", "lilt", "layoutlmv3", "udop"), _layout))
RECIPES.update(dict.fromkeys(("musicgen", "musicgen_melody"), _codebooks))
RECIPES.update(dict.fromkeys(("blip-2", "instructblip", "instructblipvideo"), _query_placeholders))
RECIPES.update({"oneformer": _task_conditioned_segmentation, "gemma4_audio": _gemma4_audio})
RECIPES.update(dict.fromkeys(("granite_speech5_encoder", "granite_speech5_ctc"), _stacked_frames))
RECIPES.update(dict.fromkeys(CODEC_HALVES, _codec_half))
RECIPES.update({"audio-spectrogram-transformer": _spectrogram, "blip_2_qformer": _query_transformer})
RECIPES.update(dict.fromkeys(("siglip2", "siglip2_vision_model", "gemma4_vision"), _native_resolution_patches))
RECIPES.update(
    {
        "qwen3_asr_encoder": _speech_chunks,
        "fun_asr_nano_encoder": _stacked_frames_with_mask,
        "seggpt": _prompted_images,
        "omdet-turbo": _open_vocabulary_detection,
        "wav2vec2-bert": _stacked_mel_frames,
        "neucodec": _semantic_and_acoustic_audio,
        "kosmos-2": _grounded_text,
        "idefics": _interleaved_images,
        **dict.fromkeys(("sam3", "sam3_lite_text"), _text_prompted_segmentation),
        **dict.fromkeys(
            ("pe_audio", "pe_video", "pe_audio_video", "pe_audio_video_encoder", "pe_video_encoder"),
            _perception_encoder,
        ),
    }
)
RECIPES.update({"decision_transformer": _trajectories, "lxmert": _regions, "mgp-str": _rectangular_images})

# model_type -> fix(config), applied after the shrinker (fields it cannot know, constraints between fields)
CONFIG_FIXES = {
    **dict.fromkeys(("autoformer", "informer", "time_series_transformer"), _lagged_series_config),
    **dict.fromkeys(("patchtst", "patchtsmixer"), _patched_series_config),
    **dict.fromkeys(("timesfm", "timesfm2_5"), _foundation_series_config),
    "timesformer": _short_clips_config(2),
    "videomae": _short_clips_config(4, tubelet=2),
    "vivit": _short_clips_config(4, tubelet=2),
    "vjepa2": _short_clips_config(4, tubelet=2),
    "videoprism_vision_model": _short_clips_config(2, tubelet=1),
    "xclip": _short_clips_config(2),
    "bros": _bros_config,
    "lilt": _lilt_config,
    "layoutlmv3": _layoutlmv3_config,
    "dbrx": _dbrx_config,
    "t5gemma2_encoder": _no_dropout_rate,
    "moonshine_streaming": _key_value_heads,
    "musicgen": _codebooks_config,
    "musicgen_melody": _codebooks_config,
    **dict.fromkeys(("blip-2", "instructblip", "instructblipvideo"), _query_placeholders_config),
    "fun_asr_nano_encoder": _stacked_frames_config,
    "seggpt": _in_context_segmentation_config,
    "neucodec": _semantic_and_acoustic_config,
    "kosmos-2": _grounded_text_config,
    **dict.fromkeys(("sam3", "sam3_lite_text"), _text_prompted_segmentation_config),
    **dict.fromkeys(
        ("pe_video", "pe_audio_video", "pe_audio_video_encoder", "pe_video_encoder"), _tiny_timm_vision_config
    ),
    "lxmert": _lxmert_config,
    "squeezebert": _squeezebert_config,
    "reformer": _reformer_config,
    "step3p7": _sliding_window_config,
    **dict.fromkeys(("maskformer", "mask2former"), _four_stage_backbone_config),
    "oneformer": _task_conditioned_segmentation_config,
    "hgnet_v2": _hgnet_config,
    **dict.fromkeys(("nemotron3_diarization", "nemotron3_5_transcribe_audio"), _diarization_head_config),
    **dict.fromkeys(("sam", "sam_hq"), _segment_anything_config),
    **dict.fromkeys(("sam2", "sam2_vision_model", "sam2_hiera_det_model"), _segment_anything_2_config),
    "audio-spectrogram-transformer": _spectrogram_patches_config,
    **dict.fromkeys(REAL_TIME_DETECTORS, _real_time_detector_config),
    **dict.fromkeys(("cohere_compass", "cohere_compass_text"), _rope_per_layer_type_config),
}


def fix_config(config, model_type):
    """Applies model_type's fix to the config its class is built from (a composite's sub-config, for some)."""
    fix = CONFIG_FIXES.get(model_type)
    if fix is not None:
        fix(config)
    return config


def has_recipe(model_type):
    return model_type in RECIPES


def candidates(model_type, model, config, head, seed):
    g = torch.Generator().manual_seed(seed)
    return RECIPES[model_type](model, config, head, g)
