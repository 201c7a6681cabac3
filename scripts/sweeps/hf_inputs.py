"""Per-model recipes for scripts/hf_coverage.py: the config fixes and inputs of the architectures its generic
builder cannot make (a forward that takes a patch grid, boxes, a time series, video frames...), keyed by
model_type in one place, each family's recipe shared by its members.

A recipe gives a list of candidate inputs (the same call with other layouts: a vision tower may take its
patches flat or as images); the sweep keeps the first the CPU model runs on, as it does with its generic
layouts. Sizes follow transformers' own ModelTesters where they set them (read, not copied)."""

import inspect
import sys

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
        for owner in (config, vision):  # VideoPrism's tubelets are its vision tower's
            if tubelet is not None and owner is not None and hasattr(owner, "tubelet_size"):
                patch = _field(owner, "patch_size", default=8)
                old = owner.tubelet_size
                owner.tubelet_size = [tubelet, patch, patch] if isinstance(old, (list, tuple)) else tubelet
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
    # Where conv_dim differs from hidden_dim, OneFormerTransformerModule keeps its input projections in a plain
    # Python list, so .to(device) never moves them (on CUDA as here): equal widths make them identities.
    config.conv_dim = config.mask_dim = config.hidden_dim


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


def _healthy_real_time_detector_config(config):
    """_real_time_detector_config for the detectors _healthy_convolutions fixes (d_fine, deimv2, pp_doclayout),
    on 64-pixel images: at 32 their stride-32 stage is 1 x 1 and the encoder's at 2 x 2, where train-mode batch
    norm over two samples is ill-conditioned and amplifies float64 rounding past the float64 train check on
    both devices (d_fine: gradients of 1.5e3, tpu 1.7e-5 off CPU, and CPU 3.7e-7 off itself with the batch
    reversed; the forward's relative differences grow from 1e-16 to 3e-10 through those batch norms alone). At
    64 the gradients are near 40 and tpu is 1.6e-11 off CPU, within rounding. deimv2's float64 gradients, 16
    apart at 32 pixels (a pass only as within CPU's own reordering), agree at 64 too."""
    _real_time_detector_config(config)
    config.image_size = 64


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
    _segment_anything_2_pyramid_config(config, vision)


def _segment_anything_2_pyramid_config(config, vision):
    """SAM 2's feature pyramid over a four-stage backbone 16 to 128 wide, its prompt encoder and mask decoder."""
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


def _edgetam_config(config):
    """EdgeTAM is SAM 2 on a timm RepViT backbone: its default names the architecture under a misspelt key
    (archirecture: repvit_m1), so timm builds its default resnet50 (256 to 2048 channels, which the feature pyramid
    refuses): RepViT-M1 as meant, four stages of one block 16 to 128 wide, then SAM 2's pyramid and heads."""
    vision = getattr(config, "vision_config", config)
    backbone = vision.backbone_config
    backbone.architecture = "repvit_m1"
    backbone.model_args = {**(backbone.model_args or {}), "embed_dim": (16, 32, 64, 128), "depth": (1, 1, 1, 1)}
    _segment_anything_2_pyramid_config(config, vision)


def _video_memory_config(config):
    """SAM 2's video tracker (sam2_video and its kin) conditions each frame on the memories of earlier ones: its
    memory attention runs at the feature pyramid's width (fpn_hidden_size, set to the prompt encoder's by
    _segment_anything_2_pyramid_config) over the lowest-resolution grid (memory_attention_rope_feat_sizes, 64 x 64
    at 1024 pixels: 4 x 4 at 64), and its memory encoder fuses that level's features with the frame's mask
    downsampled to the same grid, at the same width. Two attention layers (4) and MLPs 128 wide (2048, 1024)."""
    width = config.vision_config.fpn_hidden_size
    grid = config.vision_config.backbone_feature_sizes[-1]
    config.memory_attention_hidden_size = width
    config.memory_attention_num_layers = 2
    for name in ("memory_attention_feed_forward_hidden_size", "memory_attention_mlp_hidden_size"):  # EdgeTAM's
        if hasattr(config, name):
            setattr(config, name, 128)
    config.memory_attention_rope_feat_sizes = list(grid)
    config.memory_encoder_hidden_size = width
    config.mask_downsampler_embed_dim = width
    config.memory_fuser_embed_dim = width
    config.memory_fuser_intermediate_dim = 128


def _segment_anything_2_video_config(config):
    """SAM 2's video model: SAM 2's image model (_segment_anything_2_config) with its video memory
    (_video_memory_config), 128 wide: the memories are memory_encoder_output_channels (64) wide, which the memory
    attention's keys take as given (kv_in_dim=64), and each frame's object pointer, as wide as the features, is split
    into memory-wide tokens; at a width of 64 it is not split, keeps a dimension too many and torch.cat refuses it
    (on CPU too)."""
    config.prompt_encoder_config.hidden_size = config.mask_decoder_config.hidden_size = 128
    _segment_anything_2_config(config)
    _video_memory_config(config)
    _weights_at_std(config, 0.1)


def _edgetam_video_config(config):
    """EdgeTAM's video model is SAM 2's (_segment_anything_2_video_config) whose memories a perceiver resampler
    condenses into latents: 1-D latents (256) and one 2-D latent per window of the lowest-resolution grid, whose
    rotary positions memory_attention_rope_k_sizes gives (16 x 16 windows of 64 x 64 at 1024 pixels): 8 latents and
    2 x 2 windows of the tiny 4 x 4 grid, its MLP 128 wide (256)."""
    _segment_anything_2_video_config(config)
    config.perceiver_resampler_num_latents = 8
    config.perceiver_resampler_num_latents_2d = 4
    config.memory_attention_rope_k_sizes = [2, 2]
    config.perceiver_resampler_mlp_intermediate_size = 128


def _sam3_tracker_video_config(config):
    """SAM 3's tracker over video: SAM 3's tracker (_sam3_tracker_config) 128 wide, as SAM 2's video model is (see
    _segment_anything_2_video_config), with its video memory (_video_memory_config). Its image_size propagates the
    tiny ViT's size to its prompt encoder, feature pyramid and memory attention's grid."""
    config.prompt_encoder_config.hidden_size = config.mask_decoder_config.hidden_size = 128
    config.image_size = config.vision_config.backbone_config.image_size
    _sam3_tracker_config(config)
    _video_memory_config(config)
    _weights_at_std(config, 0.1)


def _text_prompted_video_config(config):
    """SAM 3's video model detects what a text prompt names with SAM 3 (its detector) and tracks each detection with
    SAM 3's tracker, which reads the detector's ViT through a feature pyramid of its own at the detector's width:
    the tracker as sam3_tracker_video's (_sam3_tracker_video_config), 128 wide, and so the detector's DETR encoder
    and decoder, geometry encoder and mask decoder (_text_prompted_segmentation_config); detection masks at the
    pyramid's finest size (low_res_mask_size, 288 at 1008 pixels)."""
    detector = config.detector_config
    for sub in ("geometry_encoder_config", "detr_encoder_config", "detr_decoder_config", "mask_decoder_config"):
        getattr(detector, sub).hidden_size = 128
    _text_prompted_segmentation_config(detector)
    _sam3_tracker_video_config(config.tracker_config)
    config.low_res_mask_size = detector.vision_config.backbone_feature_sizes[0][0]
    _weights_at_std(config, 0.1)
    config.score_threshold_detection = config.new_det_thresh = 0.0


def _weights_at_std(config, std):
    """Weights drawn at std `std` in config and every sub-config (initializer_range, 0.02 by default). SAM 2's video
    tracker at 0.02 shrinks its activations layer by layer to mask logits of 1e-3 and object scores of 7e-3, of
    which the checks' absolute tolerance (1e-4) is a tenth: at 0.1 they are near 1, and a wrong value shows."""
    from transformers import PretrainedConfig

    if hasattr(config, "initializer_range"):
        config.initializer_range = std
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig):
            _weights_at_std(value, std)


def _video_session(model, frames):
    """A fresh inference session of the model's kind (Sam2VideoModel's is its modeling module's
    Sam2VideoInferenceSession) over `frames`, computing and keeping its state on the frames' device, in their
    dtype. Looked up by name: Dynamo adds its resume functions to the module's globals, so a search through them
    would read a module that grows between calls and trace the forward again."""
    name = type(model).__name__.removesuffix("Model") + "InferenceSession"
    session_class = getattr(sys.modules[type(model).__module__], name)
    device = frames.device
    return session_class(
        video=frames,
        video_height=frames.shape[-2],
        video_width=frames.shape[-1],
        inference_device=device,
        inference_state_device=device,
        video_storage_device=device,
        dtype=frames.dtype,
    )


def _traceable(forward):
    """A model's forward decorated with torch.inference_mode, as it is in eager; traced by torch.compile, its body
    under no_grad: AOT Autograd cannot functionalize the views made under inference_mode ("Cannot set
    version_counter for inference tensor": pytorch/pytorch#180823; torch.compile's default backend fails so on CPU
    too), and no_grad gives the same values without autograd's bookkeeping."""

    def run(*args, **kwargs):
        if torch.compiler.is_compiling():
            with torch.no_grad():
                return forward.__wrapped__(*args, **kwargs)
        return forward(*args, **kwargs)

    return run


def _segment_frames(model, session, frames=(0, 1)):
    """The model's own forward on each frame of the session in turn: their outputs."""
    forward = _traceable(type(model).forward)
    return [forward(model, inference_session=session, frame_idx=frame_idx) for frame_idx in frames]


def _track_two_frames(self, frames, point_coords, point_labels):
    """A video tracker's forward over a fresh inference session (see _tracking_as_forward): each object's points
    prompt frame 0, frame 1 is segmented from the memory of frame 0; the mask logits and object scores of both."""
    session = _video_session(self, frames)
    for obj_id, (coords, labels) in enumerate(zip(point_coords, point_labels)):
        prompt = {"point_coords": coords[None, None], "point_labels": labels[None, None]}
        session.add_point_inputs(session.obj_id_to_idx(obj_id), 0, prompt)
    session.obj_with_new_inputs = list(session.obj_ids)
    return tuple(t for out in _segment_frames(self, session) for t in (out.pred_masks, out.object_score_logits))


def _tracking_as_forward(model):
    """SAM 2's video models (sam2_video, edgetam_video, sam3_tracker_video) segment a video frame by frame within
    a stateful inference session (the frames, each object's prompts, the memories of the frames seen so far), which
    their forward takes with a frame index, not tensors. The sweep checks what a user's session does: its forward
    builds a session on the model's device from the frames and point prompts it is given, segments frame 0 from the
    prompts and frame 1 from frame 0's memory (_track_two_frames). Every call builds its own session, so each check
    starts from no memory, as a new video does."""
    import types

    model.forward = types.MethodType(_track_two_frames, model)
    _objects_in_view(model)


def _detect_and_track_two_frames(self, frames, input_ids, attention_mask):
    """SAM 3's video forward over a fresh inference session (see _text_prompted_tracking_as_forward): the prompt's
    tokens name what to detect, frame 0's detections become objects, frame 1 tracks them from frame 0's memory and
    detects again. For each frame: the ids of the objects it outputs (as floats, so that the checks compare them),
    their masks in id order, and each id's detection and tracker scores."""
    session = _video_session(self, frames)
    prompt_id = session.add_prompt("the prompt's tokens")  # the processor keys prompts by text
    session.prompt_input_ids[prompt_id] = input_ids
    session.prompt_attention_masks[prompt_id] = attention_mask
    outputs = []
    for out in _segment_frames(self, session):
        ids = sorted(out.obj_id_to_mask)
        masks = [out.obj_id_to_mask[i] for i in ids]
        outputs += [
            torch.tensor(ids, dtype=frames.dtype, device=frames.device),
            torch.cat(masks) if masks else frames.new_zeros(0, *frames.shape[-2:]),
            *(_values_by_id(scores, frames) for scores in (out.obj_id_to_score, out.obj_id_to_tracker_score)),
        ]
    return tuple(outputs)


def _values_by_id(values, like):
    """{object id: score} as a tensor in id order, in `like`'s dtype and on its device."""
    return torch.tensor([float(values[i]) for i in sorted(values)], dtype=like.dtype, device=like.device)


def _text_prompted_tracking_as_forward(model):
    """SAM 3's video model (sam3_video) detects what a text prompt names on every frame and tracks the detections
    within a stateful inference session, which its forward takes with a frame index, not tensors: as for SAM 2's
    video models (_tracking_as_forward), its forward builds a fresh session on the model's device from the frames
    and the prompt's tokens and segments frames 0 and 1 (_detect_and_track_two_frames)."""
    import types

    model.forward = types.MethodType(_detect_and_track_two_frames, model)
    tracker = model.tracker_model  # called within the forward, under inference_mode of its own
    tracker.forward = types.MethodType(_traceable(type(tracker).forward), tracker)


def _text_prompted_frames(model, config, head, g):
    """Two frames of a video at the detector's image size and a text prompt's tokens (one prompt)."""
    size = config.detector_config.vision_config.backbone_config.image_size
    ids = torch.randint(2, 100, (1, SEQ), generator=g)
    return [
        {"frames": torch.randn(2, 3, size, size, generator=g), "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    ]


def _objects_in_view(model):
    """A video tracker hides an object whose score (the mask decoder's pred_obj_score_head) is not above 0: its masks
    become -1024 everywhere and its memory records an occlusion. At random weights the score's sign is chance (the
    tiny EdgeTAM scores both objects near -0.9 on both frames), and the masks compared would be constants: the score
    head's output bias is 2, so the objects are in view and their masks are the decoder's."""
    with torch.no_grad():
        model.mask_decoder.pred_obj_score_head.proj_out.bias.fill_(2.0)


def _prompted_frames(model, config, head, g):
    """Two frames of a video at the model's image size and, for each of BATCH objects, a point inside the frame
    (in its pixels, as the processor gives them) labelled 1 (on the object)."""
    size = config.image_size
    size = size[0] if isinstance(size, (list, tuple)) else size
    return [
        {
            "frames": torch.randn(2, 3, size, size, generator=g),
            "point_coords": torch.randint(0, size, (BATCH, 1, 2), generator=g).float(),
            "point_labels": torch.ones(BATCH, 1, dtype=torch.int32),
        }
    ]


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


def _open_vocabulary_detection_config(config):
    """OmDet-Turbo's default backbone is timm's Swin-T built for 640-pixel images (28M parameters; it refuses any
    other size): transformers' own Swin instead, as its ModelTester, 16 wide with one block per stage, on 128-pixel
    images in windows of 4, whose last three stages (32, 64 and 128 channels) the encoder reads; its feature maps are
    channels-first (timm's are last), which the layer norm after the backbone cannot take, so it is off, as there.
    Its encoder and decoder are 32 wide (256 by default) and keep 20 queries (900); the text model's states (64
    wide) are its class and task embeddings, which it projects to its own width (the decoder defines that projection
    only where the widths differ, and reads it always, on CPU too)."""
    from transformers import SwinConfig

    config.image_size = 128
    config.backbone_config = SwinConfig(
        image_size=128,
        embed_dim=16,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_size=4,
        out_indices=[2, 3, 4],
    )
    config.timm_kwargs = {}
    config.apply_layernorm_after_vision_backbone = False
    config.encoder_in_channels = [32, 64, 128]
    config.d_model = config.decoder_hidden_dim = 32
    config.vision_features_channels = [32] * 3
    config.decoder_num_heads = 4
    config.decoder_num_layers = 2
    config.num_queries = 20
    width = config.text_config.hidden_size
    config.text_projection_in_dim = config.text_projection_out_dim = config.class_embed_dim = width
    config.encoder_dim_feedforward = config.decoder_dim_feedforward = config.task_encoder_hidden_dim = 128


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


def _audio_with_semantic_features(codes, hop_length, config, g):
    """Raw audio (one channel) for a codec's acoustic encoder and the same audio's stacked mel features for its
    semantic encoder (a Wav2Vec2-BERT), one feature frame per code of hop_length samples."""
    width = config.semantic_model_config.feature_projection_input_dim
    return [
        {
            "input_values": torch.randn(BATCH, 1, codes * hop_length, generator=g),
            "input_features": torch.randn(BATCH, codes, width, generator=g),
        }
    ]


def _semantic_and_acoustic_audio(model, config, head, g):
    """NeuCodec: 4 codes of encoder_hop_length samples."""
    return _audio_with_semantic_features(4, config.encoder_hop_length, config, g)


def _vector_quantizer_config(config):
    """GLM-Image's VQ model: 16 latent channels (1536) quantized at width 64 against 256 codes (16384)."""
    config.latent_channels = 16
    config.num_embeddings = 256


def _vector_quantizer_latents(model, config, head, g):
    """GLM-Image's VQ model quantizes latents (batch, latent_channels, height, width) from an image encoder it
    does not hold: 4 x 4 of them."""
    return [{"hidden_states": torch.randn(BATCH, config.latent_channels, 4, 4, generator=g)}]


def _encode_as_forward(model):
    """GLM-Image's VQ model (GlmImageVQVAE) has no forward: GLM-Image only calls its encode, which maps latents
    to their nearest codes (the quantized latents, code indices and the codebook loss). The sweep checks encode
    as its forward, training included (the codebook learns through the loss, quant_conv through the
    straight-through estimator)."""
    model.forward = model.encode


def _bark_stages(self, semantic_ids, coarse_ids, fine_ids):
    """Bark's three token models on their own inputs, their logits in order (BarkModel's forward)."""
    fine = self.fine_acoustics.config
    return (
        self.semantic(input_ids=semantic_ids, use_cache=False).logits,
        self.coarse_acoustics(input_ids=coarse_ids, use_cache=False).logits,
        self.fine_acoustics(fine.n_codes_total - 1, input_ids=fine_ids).logits,
    )


def _three_stages_as_forward(model):
    """Bark (BarkModel) has no forward: its generate chains a semantic model (text to semantic tokens), a coarse
    acoustic one (semantic to the first codebooks' tokens) and a fine acoustic one (which fills in the other
    codebooks), then decodes with EnCodec. The sweep checks the three models: its forward runs each on tokens
    of its own (the fine model predicting its last codebook, which reads every codebook's embedding), and
    training trains all three (EnCodec, unused, gets no gradient)."""
    import types

    model.forward = types.MethodType(_bark_stages, model)


def _bark_tokens(model, config, head, g):
    """Tokens for Bark's three models (see _three_stages_as_forward): the fine model's are (batch, length,
    n_codes_total)."""
    codes = model.fine_acoustics.config.n_codes_total
    return [
        {
            "semantic_ids": torch.randint(0, 100, (BATCH, SEQ), generator=g),
            "coarse_ids": torch.randint(0, 100, (BATCH, SEQ), generator=g),
            "fine_ids": torch.randint(0, 100, (BATCH, SEQ, codes), generator=g),
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


# --- layers that reuse another layer's keys and values (Gemma 3n, Gemma 4 Unified) ------------------------------


def _shared_kv_layers_config(config):
    """Gemma 3n's last num_kv_shared_layers layers (15 of 30) reuse the keys and values of the last earlier layer
    of their kind, which must exist: four layers, full and sliding attention alternating, the last two sharing
    (as its ModelTester). Its per-layer fields are lists of 30 (intermediate_size, activation_sparsity_pattern),
    its per-layer embedding a second vocabulary (262,144 x 256 per layer): 128 x 16. The first layer keeps its
    activation sparsity (the checkpoint's first 10 layers have 0.95), and the window is 4 tokens, so it slides
    over the sweep's 8."""
    text = getattr(config, "text_config", None) or config
    layers = 4
    text.num_hidden_layers = layers
    text.layer_types = ["full_attention", "sliding_attention"] * (layers // 2)
    text.num_kv_shared_layers = 2
    text.intermediate_size = [128] * layers
    text.activation_sparsity_pattern = [0.95] + [0.0] * (layers - 1)
    text.vocab_size_per_layer_input = 128
    text.hidden_size_per_layer_input = 16
    text.altup_num_inputs = 2
    text.laurel_rank = 8
    text.sliding_window = 4
    audio = getattr(config, "audio_config", None)
    if audio is not None:
        _conformer_audio_config(audio)
    if audio is not None or config.model_type == "gemma3n":
        config.audio_soft_tokens_per_image = 4
    vision = getattr(config, "vision_config", None)
    if vision is not None and getattr(vision, "architecture", "").startswith("mobilenetv5"):
        # its MobileNet-V5 image tower (timm's, 294M parameters): a sixteenth of the channels (7M)
        vision.model_args = {**(vision.model_args or {}), "channel_multiplier": 0.0625}


def _conformer_audio_config(config):
    """Gemma 3n's audio encoder: two conformer layers of 4 heads (12 of 8 by default), attention in chunks of 4
    frames seeing 5 back, over 32 mel bins through convolutions of 16 and 8 channels (128 and 32), as its
    ModelTester."""
    config.input_feat_size = 32
    config.conf_num_hidden_layers = 2
    config.conf_num_attention_heads = 4
    config.sscp_conv_channel_size = [16, 8]
    config.conf_conv_kernel_size = 3
    config.conf_attention_chunk_size = 4
    config.conf_attention_context_left = 5


def _conformer_audio(model, config, head, g):
    """Gemma 3n's audio encoder reads (frames, mel bins) features and a mask that is True where a frame is padding:
    48 frames, the second clip's last 16 padded."""
    frames = 48
    padding = torch.zeros(BATCH, frames, dtype=torch.bool)
    padding[1, frames - 16 :] = True
    return [
        {
            "audio_mel": torch.randn(BATCH, frames, config.input_feat_size, generator=g),
            "audio_mel_mask": padding,
        }
    ]


def _latent_bottleneck_config(config):
    """Perceiver cross-attends from num_latents latents (256 of 1280 wide by default) to its inputs, then
    self-attends among them num_self_attends_per_block times (26): 8 latents of 64, two self-attention layers."""
    config.num_latents = 8
    config.d_latents = 64
    config.num_self_attends_per_block = 2
    config.num_self_attention_heads = 4
    config.num_cross_attention_heads = 4


def _latent_bottleneck_text(model, config, head, g):
    """Perceiver's masked LM reads bytes as `inputs`, exactly max_position_embeddings of them (its position
    embedding and decoder queries are that long), with the same ids as labels."""
    ids = torch.randint(2, config.vocab_size, (BATCH, config.max_position_embeddings), generator=g)
    return [{"inputs": ids, "attention_mask": torch.ones_like(ids), "labels": ids}]


def _vision_language_action_config(config):
    """PI0's vision-language model (PaliGemma) marks image places with image_token_id, 257152 by default, past
    the tiny vocabulary: token 3; it projects image features (projection_dim, 2048) into the text model's
    embeddings, so as wide."""
    vlm = config.vlm_config
    vlm.image_token_id = IMAGE_TOKEN
    vlm.projection_dim = vlm.vision_config.projection_dim = vlm.text_config.hidden_size


def _vision_language_action(model, config, head, g):
    """PI0's model reads a prefix (camera images, their tokens and text) through its PaliGemma into a cache, and
    its action expert attends over that cache from action_embeds (the robot state and the noisy actions, embedded:
    1 + 4 rows). One camera per sample: its image's patch features fill the image tokens."""
    vision = config.vlm_config.vision_config
    size = vision.image_size
    tokens = (size // vision.patch_size) ** 2
    text = torch.randint(IMAGE_TOKEN + 1, 100, (BATCH, SEQ), generator=g)
    ids = torch.cat([torch.full((BATCH, tokens), IMAGE_TOKEN), text], 1)
    return [
        {
            "action_embeds": torch.randn(BATCH, 5, config.dit_config.hidden_size, generator=g),
            "input_ids": ids,
            "pixel_values": torch.randn(BATCH, 1, 3, size, size, generator=g),
            "pixel_attention_mask": torch.ones(BATCH, 1, dtype=torch.bool),
            "attention_mask": torch.ones_like(ids),
        }
    ]


def _speech_encoder_decoder(model, config, head, g):
    """A speech encoder-decoder (Wav2Vec2 into BERT by default) reads raw audio as `inputs` and the decoder's
    text, which is also its labels."""
    ids = torch.randint(2, 100, (BATCH, 4), generator=g)
    return [{"inputs": torch.randn(BATCH, 4000, generator=g), "decoder_input_ids": ids, "labels": ids}]


def _block_drafter_config(config):
    """Muse Glimmer's assistant drafts block_size tokens (16) at once from the target model's states at
    target_layer_ids (five of its layers), concatenated: a block of 4 from two layers; its sliding window is 4."""
    config.block_size = 4
    config.target_layer_ids = [0, 1]
    config.sliding_window = 4


def _block_drafter(model, config, head, g):
    """The assistant denoises noise_embeds (one block) attending to the target's context_hidden_states (8 accepted
    tokens, the target layers' states side by side) and to the block itself: its attention mask spans both."""
    width = config.hidden_size
    return [
        {
            "noise_embeds": torch.randn(BATCH, config.block_size, width, generator=g),
            "context_hidden_states": torch.randn(BATCH, SEQ, width * len(config.target_layer_ids), generator=g),
            "attention_mask": torch.ones(BATCH, SEQ + config.block_size, dtype=torch.long),
        }
    ]


def _latent_attention_rope_config(config):
    """Dots 3 Note's multi-head latent attention rotates qk_rope_head_dim of each head's head_dim, a fraction its
    config computes when made (64 of 256) into each layer type's rotary parameters, before the shrinker sets both
    to 16: head_dim is the nope and rope parts again (32), rotated by half."""
    text = getattr(config, "text_config", None) or config
    text.head_dim = text.qk_nope_head_dim + text.qk_rope_head_dim
    for rope in text.rope_parameters.values():
        rope["partial_rotary_factor"] = text.qk_rope_head_dim / text.head_dim


def _semantic_acoustic_codec_config(config):
    """X-Codec quantizes its acoustic (DAC) and semantic (HuBERT) encoders' states concatenated: codebook_dim is
    their widths summed, derived from the defaults (1024 + 768) when the config is made; 128 codes (1024)."""
    config.codebook_dim = config.acoustic_model_config.hidden_size + config.semantic_model_config.hidden_size
    config.codebook_size = 128


def _whole_tokens_of_audio_config(config):
    """Muse Spark's audio tower: four stages (tuples, which the shrinker leaves alone, 256 to 2048 wide, while it
    cuts num_hidden_layers, the stage count, to two) patching by 16, 6, 5 and 4 samples: two stages of one block,
    32 and 64 wide, patching by 4 and 4."""
    config.num_hidden_layers = 2
    config.patch_sizes = [4, 4]
    config.hidden_sizes = [32, 64]
    config.depths = [1, 1]


def _whole_tokens_of_audio(model, config, head, g):
    """Muse Spark's audio tower takes raw audio (batch, samples) in whole tokens of samples_per_token samples
    (its patch sizes multiplied): two tokens."""
    return [{"input_values": torch.randn(BATCH, 2 * config.samples_per_token, generator=g)}]


def _semantic_acoustic_codec2_config(config):
    """X-Codec 2 quantizes its semantic (Wav2Vec2-BERT) and acoustic encoders' states concatenated, so its
    quantization_dim (2048) is the two widths summed; its acoustic encoder downsamples by 2, 2, 4, 4 and 5 from
    48 channels doubling per stage (1536 at the end): by 2 and 2 from 8. Its decoder's rotary angles are per
    head (position ids of one row per head), so keys and values have every head."""
    config.num_key_value_heads = config.num_attention_heads
    config.quantization_dim = config.hidden_size + config.semantic_model_config.hidden_size
    config.downsampling_ratios = [2, 2]
    config.encoder_hidden_size = 8


def _semantic_acoustic_codec2(model, config, head, g):
    """X-Codec 2: 8 codes of hop_length samples."""
    return _audio_with_semantic_features(8, config.hop_length, config, g)


def _speech_to_text_config(config):
    """Speech2Text's convolutional subsampler reads input_feat_per_channel mel bins (80) into conv_channels (1024):
    the sweep's 16 bins, 64 channels."""
    config.input_feat_per_channel = 16
    config.conv_channels = 64


def _cross_attention_width_config(config):
    """T5Gemma's decoder cross-attends to the encoder at cross_attention_hidden_size, copied from the encoder's
    default width (2304) when the config is made: the tiny encoder's."""
    config.decoder.cross_attention_hidden_size = config.encoder.hidden_size


def _flat_patch_config(config):
    """RADIO projects flat patches of patch_dim values, derived from the default 16-pixel patches (768) when the
    config is made; its position embedding spans max_img_size (2048 pixels, interpolated down): 64."""
    config.patch_dim = config.num_channels * config.patch_size**2
    config.max_img_size = 64


def _windowed_dinov2_detector_config(config):
    """RF-DETR's projector reads every stage its DINOv2 backbone outputs (4 of 12 layers by default, the shrinker
    leaves 2 layers and the 12 stage names), their widths side by side: 4 layers, each an output, the first and
    third attending within windows; 8 queries (300)."""
    backbone = config.backbone_config
    backbone.num_hidden_layers = 4
    backbone.window_block_indexes = [0, 2]
    backbone.stage_names = ["stem"] + [f"stage{i}" for i in range(1, 5)]
    backbone.set_output_features_output_indices(out_features=None, out_indices=[1, 2, 3, 4])
    config.num_queries = 8


def _sam3_tracker_config(config):
    """SAM 3's tracker: SAM 3's ViT and feature pyramid (see _text_prompted_segmentation_config) at its prompt
    encoder's and mask decoder's width, the decoder's MLP 128 wide (2048)."""
    vision = config.vision_config
    grid = vision.backbone_config.image_size // vision.backbone_config.patch_size
    vision.fpn_hidden_size = config.prompt_encoder_config.hidden_size
    vision.backbone_feature_sizes = [[grid * 4] * 2, [grid * 2] * 2, [grid] * 2]
    config.mask_decoder_config.mlp_dim = 128
    config.mask_decoder_config.iou_head_hidden_dim = 64


def _document_unwarping_config(config):
    """UVDoc's head concatenates its backbone's six bridge outputs (768 channels), but the default backbone outputs
    only the last stage (the same error on CPU at full size) and counts its stages in depths, which the shrinker
    cut to two: the six stages again, each an output. Its head's reflect padding (2) needs feature maps of more
    than 2 x 2: 64-pixel images (4 x 4)."""
    backbone = config.backbone_config
    stages = len(backbone.stage_configs)
    backbone.depths = [len(bridge) for bridge in backbone.stage_configs]
    backbone.stage_names = ["stem"] + [f"stage{i}" for i in range(1, stages + 1)]
    backbone.set_output_features_output_indices(out_features=None, out_indices=list(range(1, stages + 1)))
    config.image_size = 64  # the sweep's images


def _default_backbone_stages_config(config):
    """Backbones whose stages are lists the shrinker leaves alone (PP-OCR's block_configs and stage_* channels)
    still count them in depths and stage_names, which it cuts to two, so the detector reads stages the backbone no
    longer names: the default's depths, stage names and outputs again (the widths stay the default's; the image is
    what is tiny)."""
    backbone = config.backbone_config
    default = type(backbone)()
    backbone.depths = list(default.depths)
    backbone.stage_names = list(default.stage_names)
    backbone.set_output_features_output_indices(out_features=None, out_indices=list(default.out_indices))


def _tiny_text_detector_config(config):
    """PP-OCRv6's text detectors read four backbone stages, but their default configs build a backbone that outputs
    only its last (the same channel mismatch on CPU at full size), and the medium one's intra-class blocks (their
    convolutions' kernels, strides and paddings) default to None (a checkpoint sets them). A PP-LCNetV4 of four
    stages 16 channels wide, each an output, strided by 4, 8, 16 and 32 (64-pixel images: 2 x 2 at the last), as
    their ModelTesters; the necks 16 wide. Each intra-class block reduces channels, convolves with long, mid and
    short kernels (7, 5, 3) vertically, horizontally and square, each padded to keep its size, and restores
    channels."""
    from transformers import PPLCNetV4Config

    stages = [[[3, 16, 16, 1, False]]] + [[[3, 16, 16, 2, False], [3, 16, 16, 1, False]]] * 3
    config.backbone_config = PPLCNetV4Config(
        stem_channels=[3, 16, 16],
        stem_type="large",
        block_configs=stages,
        out_features=[f"stage{i}" for i in range(1, 5)],
        out_indices=[1, 2, 3, 4],
    )
    config.neck_out_channels = 16
    config.image_size = 64  # the sweep's images
    if config.model_type == "pp_ocrv6_small_det":
        config.layer_list_out_channels = [16] * 4
        return
    blocks = {"reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0]}
    for ratio, k in (("longratio", 7), ("midratio", 5), ("shortratio", 3)):
        blocks[f"vertical_long_to_small_conv_{ratio}"] = [[k, 1], [1, 1], [k // 2, 0]]
        blocks[f"horizontal_small_to_long_conv_{ratio}"] = [[1, k], [1, 1], [0, k // 2]]
        blocks[f"symmetric_conv_long_{ratio}"] = [[k, k], [1, 1], [k // 2, k // 2]]
    config.intraclass_block_config = blocks
    config.scale_factor_list = [1, 2, 4, 8]
    config.kernel_list = [3, 2, 2]


def _dual_encoder_pooler_config(config):
    """A vision-text dual encoder projects its vision tower's pooled output from the tower's hidden_size, and ViT's
    pooler outputs pooler_output_size, copied from the default width (768) when the config is made: the tiny
    width."""
    vision = config.vision_config
    if hasattr(vision, "pooler_output_size"):
        vision.pooler_output_size = vision.hidden_size


def _timm_backbone_config(config):
    """A timm backbone names its timm architecture, which the default config leaves unset (its checkpoints name
    one): timm's own tiny test ResNet (0.4M parameters), over 64-pixel images so its last stage is 2 x 2."""
    config.backbone = "test_resnet"
    config.image_size = 64  # the sweep's images


def _safety_classifier(model, config, head, g):
    """ShieldGemma 2 classifies by its language model's logits of two answer tokens, and trains that language model
    on its tokens: the labels are the input ids, not a class per sample."""
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [{"input_ids": ids, "labels": ids}]


def _perception_lm_config(config):
    """Perception LM's image tower is timm's Perception Encoder ViT (its checkpoints name vit_pe_core_large_patch14_336
    and its projector reads the ViT's embed_dim from model_args), which the default config leaves to timm_wrapper's
    resnet50 with no arguments: the PE ViT, made tiny by _tiny_timm_vision_config."""
    config.vision_config.architecture = "vit_pe_core_large_patch14_336"
    _tiny_timm_vision_config(config)


def _prompted_video_grounding_config(config):
    """TVP pads every frame of its video (num_frames of them, 48) to max_img_size pixels (448) with a learned visual
    prompt visual_prompt_size wide (96): 2 frames of 64 pixels, a prompt 8 wide. Its ResNet backbone's depths are
    a tuple of four stages, which the shrinker leaves while it cuts the stage widths to two: two stages of one
    block, the second the output."""
    backbone = config.backbone_config
    backbone.depths = [1, 1]
    backbone.stage_names = ["stem", "stage1", "stage2"]
    backbone.set_output_features_output_indices(out_features=None, out_indices=[2])
    config.num_frames = 2
    config.max_img_size = 64
    config.visual_prompt_size = 8


def _prompted_video_grounding(model, config, head, g):
    """TVP grounds a text query in a video: the query's tokens and the frames, (batch, frames, channels, height,
    width), at max_img_size. One video: its grid position embedding views one row of column embeddings as
    (batch, 1, columns, width), which fails on CPU for a batch of two."""
    ids = torch.randint(2, 100, (1, SEQ), generator=g)
    size = config.max_img_size
    return [
        {
            "input_ids": ids,
            "pixel_values": torch.randn(1, config.num_frames, 3, size, size, generator=g),
            "attention_mask": torch.ones_like(ids),
        }
    ]


def _image_pairs(model, config, head, g):
    """Keypoint matchers (EfficientLoFTR, LightGlue) match two images: a batch of pairs, (batch, 2, channels,
    height, width), of 64 pixels."""
    return [{"pixel_values": torch.randn(BATCH, 2, 3, 64, 64, generator=g)}]


def _keypoint_matcher_config(config):
    """LightGlue matches SuperPoint's descriptors, descriptor_decoder_dim wide (256), with layers descriptor_dim wide
    (256; hidden_size and intermediate_size are derived from it when the config is made): 64 for both; at most
    32 keypoints per image (all by default)."""
    detector = config.keypoint_detector_config
    detector.descriptor_decoder_dim = 64
    detector.decoder_hidden_size = 64
    detector.max_keypoints = 32
    config.descriptor_dim = config.hidden_size = 64
    config.intermediate_size = 128


def _streaming_speech(model, config, head, g):
    """Voxtral Realtime adds each audio embedding to a text token's: the text, and audio features (batch, mel bins,
    frames) of as many frames per token as its encoder downsamples (a stride-2 convolution, then
    downsample_factor frames per embedding)."""
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    frames = SEQ * 2 * config.downsample_factor
    return [
        {
            "input_ids": ids,
            "input_features": torch.randn(BATCH, config.audio_config.num_mel_bins, frames, generator=g),
            "labels": ids,
        }
    ]


def _time_conditioned_text(model, config, head, g):
    """Voxtral Realtime's text model scales each layer's normalized states by an embedding of the stream's delay
    (t_cond, (1, 1, hidden_size), which the full model makes from its delay in tokens): text and that embedding."""
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [{"input_ids": ids, "t_cond": torch.randn(1, 1, config.hidden_size, generator=g)}]


def _packed_patch_rows(model, config, head, g):
    """MiniCPM-V's vision towers (NaViT-style) take every image's patches packed side by side in one row of
    patches, (1, channels, patch, patches x patch), and each image's patch grid (rows, columns), target_sizes:
    two images of GRID x GRID patches."""
    patch = _field(config, "patch_size", default=8)
    channels = _field(config, "num_channels", default=3)
    patches = BATCH * GRID * GRID
    return [
        {
            "pixel_values": torch.randn(1, channels, patch, patches * patch, generator=g),
            "target_sizes": torch.tensor([[GRID, GRID]] * BATCH),
        }
    ]


def _multi_codebook_speech(model, config, head, g):
    """Dia reads text and writes audio codes, one per codebook (num_channels, 9) at each step: the decoder's
    input ids are (batch, steps, codebooks)."""
    decoder = config.decoder_config
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    codes = torch.randint(2, min(decoder.vocab_size, 100), (BATCH, 4, decoder.num_channels), generator=g)
    return [{"input_ids": ids, "decoder_input_ids": codes}]


def _multi_scale_depth_config(config):
    """Depth Pro cuts its image at three scales (a quarter, half and all of it) into patches of patch_size pixels
    (384, its DINOv2 encoders' image size), and reads intermediate_hook_ids (layers 11 and 5) of the patch encoder:
    patches of the sweep's 32 pixels, layers 1 and 0 of the tiny encoder, every upsampling width 16 to 32 (256 to
    1024); the images are 4 patches wide (see _multi_scale_depth)."""
    config.patch_size = 32
    for name in ("image_model_config", "patch_model_config", "fov_model_config"):
        sub = getattr(config, name, None)
        if sub is not None:
            sub.image_size = config.patch_size
    config.intermediate_hook_ids = [1, 0]
    config.intermediate_feature_dims = [16, 16]
    config.scaled_images_feature_dims = [32, 32, 16]
    config.fusion_hidden_size = 16


def _multi_scale_depth(model, config, head, g):
    """Depth Pro's images are patch_size / the smallest scale (0.25) pixels wide: 128."""
    size = int(config.patch_size / min(config.scaled_images_ratios))
    return [{"pixel_values": torch.randn(BATCH, 3, size, size, generator=g)}]


def _text_and_conditioning_audio(model, config, head, g):
    """CLVP embeds text (its tokens) and speech (a mel spectrogram, (batch, feature_size, frames), that conditions
    its speech decoder) together."""
    decoder = config.decoder_config
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    return [
        {
            "input_ids": ids,
            "input_features": torch.randn(BATCH, decoder.feature_size, 16, generator=g),
            "attention_mask": torch.ones_like(ids),
        }
    ]


def _clvp_config(config):
    """CLVP's encoders rotate max(projection_dim // (2 x heads), 32) features of each head (projection_dim 768 by
    default, which the shrinker leaves): projections 64 wide and two heads of 32, so the rotation spans a head."""
    config.projection_dim = 64
    for name in ("text_config", "speech_config"):
        encoder = getattr(config, name)
        encoder.projection_dim = 64
        encoder.num_attention_heads = 2


def _windowed_vit_detector_config(config):
    """LW-DETR: a windowed ViT backbone as RF-DETR's (see _windowed_dinov2_detector_config), and the feature
    scales its projector makes, projector_scale_factors, which the default leaves empty (so the decoder gets no
    features and torch.cat raises, on CPU at full size too): one scale, the backbone's own."""
    backbone = config.backbone_config
    backbone.num_hidden_layers = 4
    backbone.window_block_indices = [0, 2]
    backbone.num_windows = 4
    backbone.stage_names = ["stem"] + [f"stage{i}" for i in range(1, 5)]
    backbone.set_output_features_output_indices(out_features=None, out_indices=[1, 2, 3, 4])
    config.projector_scale_factors = [1.0]
    config.num_feature_levels = 1  # derived from the scales when the config is made
    config.num_queries = 8


def _diffusion_canvas_config(config):
    """Diffusion Gemma's decoder denoises a canvas of canvas_length tokens (256): 8."""
    config.canvas_length = SEQ


def _diffusion_canvas(model, config, head, g):
    """Diffusion Gemma encodes the prompt and denoises a canvas of tokens, which it draws at random on the model's
    device where none is given (each device's own generator): the prompt and a canvas."""
    ids = torch.randint(2, 100, (BATCH, SEQ), generator=g)
    canvas = torch.randint(2, 100, (BATCH, config.canvas_length), generator=g)
    return [{"input_ids": ids, "decoder_input_ids": canvas}]


def _height_width_time_rope_config(config):
    """ERNIE 4.5 VL interleaves height and width rotary frequencies pairwise, then time's: its mrope_section is
    (height, width, time) with height = width ([22, 22, 20] for 64 frequencies), unlike the (time, height, width)
    split the sweep gives Qwen2-VL's kin: the tiny head's 8 frequencies as [3, 3, 2]."""
    text = getattr(config, "text_config", None) or config
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    frequencies = head_dim // 2
    spatial = frequencies * 3 // 8
    text.rope_parameters["mrope_section"] = [spatial, spatial, frequencies - 2 * spatial]


def _merged_patch_tokens(model, config, head, g):
    """Inkling 2's vision tower takes one (patch x merge)-pixel square per language-model image token, (tokens,
    height, width, channels), and each image's grid counted in those tokens: two images of GRID x GRID patches,
    merged 2 x 2."""
    patch = _field(config, "patch_size", default=8)
    merge = _field(config, "spatial_merge_size", "merge_size", default=2)
    channels = _field(config, "num_channels", "in_channels", default=3)
    side = GRID // merge
    return [
        {
            "pixel_values": torch.randn(BATCH * side * side, patch * merge, patch * merge, channels, generator=g),
            "image_grid_thw": torch.tensor([[1, side, side]] * BATCH),
        }
    ]


def _synthesizer_with_vocoder_config(config):
    """FastSpeech 2 with its HiFi-GAN vocoder keeps its phoneme vocabulary (78) in model_config, and the sweep draws
    token ids below the config's vocab_size, which the composite lacks (so below 128): FastSpeech 2's, on the
    composite. Its vocoder reads the spectrogram's mel bins (model_in_dim, 80), which the shrinker cut to 16, into
    upsample_initial_channel channels (512, 26M parameters): 32."""
    config.vocab_size = config.model_config.vocab_size
    config.vocoder_config.model_in_dim = config.model_config.num_mel_bins
    config.vocoder_config.upsample_initial_channel = 32


def _speech_to_text_codec_config(config):
    """Kyutai STT embeds its Mimi codec's codes, codebook_vocab_size per codebook (its codec's codebook_size + 1,
    2049) after the text vocabulary, and pads audio with the id past them all: both derived from the default sizes
    when the config is made, here from the tiny codec's (128 codes) and vocabulary; its audio start token is the
    codebook's extra id."""
    codec = config.codec_config
    config.codebook_vocab_size = codec.codebook_size + 1
    config.audio_bos_token_id = codec.codebook_size
    config.audio_pad_token_id = config.vocab_size + config.num_codebooks * config.codebook_vocab_size


def _text_and_codes_per_step(model, config, head, g):
    """Kyutai STT reads, at each step, a text token and one code per codebook, (batch, steps, 1 + num_codebooks);
    its labels are the text tokens."""
    text = torch.randint(2, 100, (BATCH, SEQ, 1), generator=g)
    codes = torch.randint(0, config.codebook_vocab_size - 1, (BATCH, SEQ, config.num_codebooks), generator=g)
    return [{"input_ids": torch.cat([text, codes], -1), "labels": text[..., 0]}]


def _text_line_recognizer_config(config):
    """PP-OCRv5's server recognizer: its backbone's stages as the default's (see _default_backbone_stages_config),
    downsample height more than width, and then a 3 x 2 average pooling: 64-pixel images (at 32 pixels the pooled
    height is 0, on CPU too)."""
    _default_backbone_stages_config(config)
    config.image_size = 64  # the sweep's images


def _byte_latent_config(config):
    """BLT embeds each byte's n-grams by hash into encoder_hash_byte_group_vocab rows per n-gram size (500,002 for
    each of 6 sizes: 192M parameters at the tiny width): 64 rows for 2- and 3-grams, as its ModelTester. Its
    global transformer reads the local encoder's states cross_attn_k (2) times as wide, a projection that the config
    sizes when it is made: a global width of 2 x 64 needs none, which the local decoder reads as hidden_size_global.
    Patching by the entropy of a second (patcher) model is off, as in its ModelTester: every byte a patch. Its
    caches (the local encoder's, and the local decoder's) are built from the top-level config, which names no layer
    count (its ModelTester sets one): the larger of the two."""
    width = config.encoder_config.hidden_size
    config.encoder_hash_byte_group_size = [2, 3]
    config.encoder_hash_byte_group_vocab = 64
    config.patch_in_forward = False
    glob = config.global_config
    glob.hidden_size = 2 * width
    glob.head_dim = glob.hidden_size // glob.num_attention_heads
    glob.encoder_cross_output_size = None
    for local in (config.encoder_config, config.decoder_config):
        local.hidden_size_global = glob.hidden_size
    config.num_hidden_layers = max(config.encoder_config.num_hidden_layers, config.decoder_config.num_hidden_layers)
    config.num_attention_heads = config.decoder_config.num_attention_heads
    config.hidden_size = config.decoder_config.hidden_size


def _contrastive_audio_config(config):
    """CLAP's audio tower is a Swin over the mel spectrogram folded into a square image: spec_size // num_mel_bins
    strips of the time axis stacked along the frequency axis (256 // 16 = 16 strips of 4096 frames by default). A
    32-pixel image of 2 strips (64 frames of 16 mel bins), patches of 4 in windows of 4, two stages whose last width
    is hidden_size (the audio embedding's)."""
    audio = config.audio_config
    audio.spec_size = 32
    audio.patch_size = 4
    audio.patch_stride = (4, 4)
    audio.window_size = 4
    audio.depths = [1, 1]
    audio.num_attention_heads = [2, 4]
    audio.patch_embeds_hidden_size = audio.hidden_size // 2


def _contrastive_audio(model, config, head, g):
    """CLAP embeds text and audio together: token ids and one spectrogram per clip, (batch, 1, frames, mel bins),
    as many frames as its folded image needs (spec_size x spec_size // num_mel_bins)."""
    audio = config.audio_config
    frames = audio.spec_size * (audio.spec_size // audio.num_mel_bins)
    return [
        {
            "input_ids": torch.randint(2, 100, (BATCH, SEQ), generator=g),
            "input_features": torch.randn(BATCH, 1, frames, audio.num_mel_bins, generator=g),
        }
    ]


def _assistant_default_config():
    """Gemma 4's assistant (a drafter for assisted decoding) refuses its own default config, whose text model has
    per-layer input embeddings (hidden_size_per_layer_input 256): an assistant's text model has none, no mixture
    of experts and no double-wide MLP (its checkpoints' text configs say so)."""
    from transformers import Gemma4AssistantConfig

    text = {
        "model_type": "gemma4_text",
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 0,
        "enable_moe_block": False,
        "use_double_wide_mlp": False,
    }
    return Gemma4AssistantConfig(text_config=text)


def _assistant_config(config):
    """Gemma 4's assistants reuse the target model's keys and values in every layer: all their layers share, which
    the config counts when it is made (num_kv_shared_layers, 30 or more), so the shrunk layers all share again. They
    read the target's states, backbone_hidden_size wide (1536, 3840): 64; the window slides over 4 tokens."""
    text = config.text_config
    text.num_kv_shared_layers = text.num_hidden_layers
    text.sliding_window = 4
    config.backbone_hidden_size = 64


def _assistant_drafts(model, config, head, g):
    """A Gemma 4 assistant drafts one token at a time from the target's last state and the last token's embedding
    side by side (inputs_embeds, one position 2 x backbone_hidden_size wide; at more positions its text model slices
    per-layer inputs it does not have, on CPU too) and attends over the keys and values the target's last layer of
    each kind stored (shared_kv_states: (batch, key heads, SEQ, head_dim) for full and sliding attention)."""
    text = config.text_config
    shape = (BATCH, text.num_key_value_heads, SEQ, text.head_dim)
    kv = lambda: (torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))  # noqa: E731
    return [
        {
            "inputs_embeds": torch.randn(BATCH, 1, 2 * config.backbone_hidden_size, generator=g),
            "shared_kv_states": {"full_attention": kv(), "sliding_attention": kv()},
        }
    ]


def _encoder_states(model, config, head, g):
    """Nemotron 3.5 Transcribe's word-timestamp model reads a speech encoder's states, (batch, frames,
    hidden_size), and a mask of valid frames (the second clip's last two padded)."""
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, -2:] = 0
    return [{"inputs_embeds": torch.randn(BATCH, SEQ, config.hidden_size, generator=g), "attention_mask": mask}]


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
    dict.fromkeys(
        ("timesformer", "videomae", "vivit", "vjepa2", "videoprism", "videoprism_vision_model", "xclip"), _clips
    )
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
        "bark": _bark_tokens,
        **dict.fromkeys(("sam2_video", "edgetam_video", "sam3_tracker_video"), _prompted_frames),
        "sam3_video": _text_prompted_frames,
        "glm_image_vqmodel": _vector_quantizer_latents,
        "idefics": _interleaved_images,
        **dict.fromkeys(("sam3", "sam3_lite_text"), _text_prompted_segmentation),
        **dict.fromkeys(
            ("pe_audio", "pe_video", "pe_audio_video", "pe_audio_video_encoder", "pe_video_encoder"),
            _perception_encoder,
        ),
    }
)
RECIPES.update({"decision_transformer": _trajectories, "lxmert": _regions, "mgp-str": _rectangular_images})
RECIPES.update(
    {
        "gemma3n_audio": _conformer_audio,
        "perceiver": _latent_bottleneck_text,
        "pi0": _vision_language_action,
        "speech-encoder-decoder": _speech_encoder_decoder,
        "muse_glimmer_assistant": _block_drafter,
        "muse_spark_audio": _whole_tokens_of_audio,
        "xcodec2": _semantic_acoustic_codec2,
        "shieldgemma2": _safety_classifier,
        "tvp": _prompted_video_grounding,
        **dict.fromkeys(("efficientloftr", "lightglue"), _image_pairs),
        "voxtral_realtime": _streaming_speech,
        "voxtral_realtime_text": _time_conditioned_text,
        **dict.fromkeys(("minicpm_ocr_vision", "minicpmv4_7_vision"), _packed_patch_rows),
        "dia": _multi_codebook_speech,
        "depth_pro": _multi_scale_depth,
        "clvp": _text_and_conditioning_audio,
        "diffusion_gemma": _diffusion_canvas,
        "inkling2_vision": _merged_patch_tokens,
        "kyutai_speech_to_text": _text_and_codes_per_step,
        "nemotron3_5_transcribe_word_timestamp": _encoder_states,
        "clap": _contrastive_audio,
        **dict.fromkeys(("gemma4_assistant", "gemma4_unified_assistant"), _assistant_drafts),
    }
)

# model_type -> fix(config), applied after the shrinker (fields it cannot know, constraints between fields)
CONFIG_FIXES = {
    **dict.fromkeys(("autoformer", "informer", "time_series_transformer"), _lagged_series_config),
    **dict.fromkeys(("patchtst", "patchtsmixer"), _patched_series_config),
    **dict.fromkeys(("timesfm", "timesfm2_5"), _foundation_series_config),
    "timesformer": _short_clips_config(2),
    "videomae": _short_clips_config(4, tubelet=2),
    "vivit": _short_clips_config(4, tubelet=2),
    "vjepa2": _short_clips_config(4, tubelet=2),
    "videoprism": _short_clips_config(2, tubelet=1),
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
    "glm_image_vqmodel": _vector_quantizer_config,
    "sam2_video": _segment_anything_2_video_config,
    "edgetam_video": _edgetam_video_config,
    "sam3_tracker_video": _sam3_tracker_video_config,
    "sam3_video": _text_prompted_video_config,
    **dict.fromkeys(("sam3", "sam3_lite_text"), _text_prompted_segmentation_config),
    **dict.fromkeys(
        ("pe_video", "pe_audio_video", "pe_audio_video_encoder", "pe_video_encoder"), _tiny_timm_vision_config
    ),
    "lxmert": _lxmert_config,
    "squeezebert": _squeezebert_config,
    "reformer": _reformer_config,
    "step3p7": _sliding_window_config,
    **dict.fromkeys(("gemma3n", "gemma3n_text"), _shared_kv_layers_config),
    "gemma3n_audio": _conformer_audio_config,
    "perceiver": _latent_bottleneck_config,
    "pi0": _vision_language_action_config,
    "muse_glimmer_assistant": _block_drafter_config,
    **dict.fromkeys(("dots3_note", "dots3_note_text"), _latent_attention_rope_config),
    "xcodec": _semantic_acoustic_codec_config,
    "muse_spark_audio": _whole_tokens_of_audio_config,
    "xcodec2": _semantic_acoustic_codec2_config,
    "speech_to_text": _speech_to_text_config,
    "t5gemma": _cross_attention_width_config,
    "radio": _flat_patch_config,
    **dict.fromkeys(("edgetam", "edgetam_vision_model"), _edgetam_config),
    "rf_detr": _windowed_dinov2_detector_config,
    "sam3_tracker": _sam3_tracker_config,
    "uvdoc": _document_unwarping_config,
    "vision-text-dual-encoder": _dual_encoder_pooler_config,
    "timm_backbone": _timm_backbone_config,
    "perception_lm": _perception_lm_config,
    "tvp": _prompted_video_grounding_config,
    "lightglue": _keypoint_matcher_config,
    "depth_pro": _multi_scale_depth_config,
    "clvp": _clvp_config,
    "lw_detr": _windowed_vit_detector_config,
    "diffusion_gemma": _diffusion_canvas_config,
    "ernie4_5_vl_moe": _height_width_time_rope_config,
    "fastspeech2_conformer_with_hifigan": _synthesizer_with_vocoder_config,
    "kyutai_speech_to_text": _speech_to_text_codec_config,
    **dict.fromkeys(("pp_ocrv6_medium_det", "pp_ocrv6_small_det"), _tiny_text_detector_config),
    "pp_ocrv5_server_rec": _text_line_recognizer_config,
    "blt": _byte_latent_config,
    "clap": _contrastive_audio_config,
    "omdet-turbo": _open_vocabulary_detection_config,
    **dict.fromkeys(("gemma4_assistant", "gemma4_unified_assistant"), _assistant_config),
    **dict.fromkeys(("maskformer", "mask2former"), _four_stage_backbone_config),
    "oneformer": _task_conditioned_segmentation_config,
    "hgnet_v2": _hgnet_config,
    **dict.fromkeys(("nemotron3_diarization", "nemotron3_5_transcribe_audio"), _diarization_head_config),
    **dict.fromkeys(("sam", "sam_hq"), _segment_anything_config),
    **dict.fromkeys(("sam2", "sam2_vision_model", "sam2_hiera_det_model"), _segment_anything_2_config),
    "audio-spectrogram-transformer": _spectrogram_patches_config,
    **dict.fromkeys(REAL_TIME_DETECTORS, _real_time_detector_config),
    **dict.fromkeys(("d_fine", "deimv2", "pp_doclayout_v3", "pp_doclayout_v4"), _healthy_real_time_detector_config),
    **dict.fromkeys(("cohere_compass", "cohere_compass_text"), _rope_per_layer_type_config),
}


def _batch_norm_weights_one(model):
    """EfficientLoFTR's _init_weights draws its BatchNorm weights at std initializer_range (0.02), so each of its
    RepVGG blocks scales the activations by about 1e-2: the backbone's features are 1e-13, and its attention's
    results fall below float32's smallest normal number, which XLA flushes to zero (tpu's coarse features are
    4e-38 where CPU's, subnormal along the way, are 2e-2). Batch norm weights 1 give features of 0.2 to 12, on
    which every module's output agrees between the devices to 1e-5."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.weight is not None:
                module.weight.fill_(1.0)


def _healthy_convolutions(model):
    """PP-DocLayout's _init_weights draws every BatchNorm weight, like every conv weight, at std
    initializer_range (0.01): each conv and batch norm scales the activations by about 1e-2, the encoder's
    output is 2e-16, its class scores all equal their bias, and torch.topk picks its queries among 21 tied scores
    (the order of ties is unspecified: CPU and XLA break them differently), so every later output differs with
    no device error. Batch norm weights 1 and He-initialized convs (std sqrt(2 / fan_in), which keeps the
    scale through a ReLU) give an encoder output near 3 and 21 distinct scores (84 on the 64-pixel images of
    _healthy_real_time_detector_config, the 8th and 9th at least 2e-2 apart; with PyTorch's default conv init
    the encoder's output is still 2e-4). D-FINE's tiny model (conv
    weights at std 0.01 too) shrinks likewise: its stem's output is 6e-3, and the float64 train check's
    gradients at the stem reach 3e6."""
    _batch_norm_weights_one(model)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")


# model_type -> fix(model), applied to the model built from the fixed config (weights its init leaves unusable)
MODEL_FIXES = dict.fromkeys(("d_fine", "deimv2", "pp_doclayout_v3", "pp_doclayout_v4"), _healthy_convolutions)
MODEL_FIXES["glm_image_vqmodel"] = _encode_as_forward
MODEL_FIXES["efficientloftr"] = _batch_norm_weights_one
MODEL_FIXES["bark"] = _three_stages_as_forward
MODEL_FIXES.update(dict.fromkeys(("sam2_video", "edgetam_video", "sam3_tracker_video"), _tracking_as_forward))
MODEL_FIXES["sam3_video"] = _text_prompted_tracking_as_forward


def fix_model(model, model_type):
    """Applies model_type's MODEL_FIXES entry to a freshly built model."""
    fix = MODEL_FIXES.get(model_type)
    if fix is not None:
        fix(model)
    return model


# model_type -> the config to shrink, where transformers' default for the model type cannot be made
DEFAULT_CONFIGS = {"gemma4_assistant": _assistant_default_config}


def default_config(model_type):
    """The config the sweep shrinks: DEFAULT_CONFIGS' where it names one, else transformers' default."""
    import transformers

    make = DEFAULT_CONFIGS.get(model_type)
    return make() if make is not None else transformers.AutoConfig.for_model(model_type)


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
