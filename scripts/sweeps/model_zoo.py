"""Model zoo on tpu: every torchvision model and a broad timm selection, each
at a small input size, on tpu against the same weights on CPU.

    python scripts/model_zoo.py [--workers 1] [--timeout 600] [--source torchvision|timm|all]
        [--only resnet18,vit_tiny_patch16_224] [--limit N] [--next N] [--merge]
        [--report docs/model_zoo.md] [--jsonl zoo.jsonl]

With --merge the report's rows are read back and this run's models replace
or join them, so coverage accumulates across runs; --next N runs the first
N models the report does not list yet.

Models: `torchvision.models.list_models()` (classification, detection,
segmentation, video, optical flow; its quantized models run int8 kernels
of the QuantizedCPU backend, for CPU only, and are listed as excluded) and
TIMM_MODELS below (convnets, ViTs, hybrids, MLP-mixers), built with random
weights, fewer classes and dropout, stochastic depth and detection heads'
random sampling made deterministic. The checks, at matmul precision
"highest":

  eval   model.eval() forward under no_grad: every floating output equals CPU's;
  train  model.train(): the loss (the model's own losses for detection
         models, else the mean square of its outputs) equals CPU's, and every
         gradient and every parameter after one SGD step do to within 1e-3 of
         the tensor's largest magnitude (see _close_to_scale).

Each model runs in its own subprocess with a timeout, so a crash or hang is
recorded, not fatal. Outcomes per check: pass, wrong values, missing op
(named), error (named). The report's totals are at its top.
tests/tools/test_model_zoo.py runs a fast subset in-process.
"""

import copy
import gc
import itertools
import os
import sys

import torch

from sweeps import accuracy, child_process, command_line, report
from sweeps.outcomes import CannotBuild, PassInFloat64, WrongValues, excluded, not_built, outcome, passed, run_check

CHECKS = ("eval", "train")
BATCH = 2
# The report's layout; it reads its records back for --merge.
LEDGER = report.Ledger(
    CHECKS,
    columns=[("source", "source"), ("category", "category"), ("model", "name")],
    excluded_heading="## Excluded",
    excluded_columns=[("source", "source"), ("model", "name")],
    not_built="cannot build",
    name="name",
    items="models",
)
read_report = LEDGER.read
merge = LEDGER.merge

# Families first, then names; each must be in timm.list_models() (the sweep
# reports any that is not).
TIMM_MODELS = {
    "convnet": [
        "resnet18",
        "resnet26d",
        "resnet50",
        "resnext26ts",
        "seresnet18",
        "wide_resnet50_2",
        "resnetv2_50",
        "resnetrs50",
        "resnest14d",
        "res2net50_14w_8s",
        "res2next50",
        "skresnet18",
        "ecaresnet26t",
        "gcresnet33ts",
        "bat_resnext26ts",
        "legacy_seresnet18",
        "regnetx_002",
        "regnety_002",
        "regnetz_b16",
        "efficientnet_b0",
        "efficientnet_lite0",
        "efficientnetv2_rw_t",
        "tf_efficientnet_b0",
        "tf_efficientnetv2_b0",
        "mobilenetv2_050",
        "mobilenetv3_small_050",
        "mobilenetv4_conv_small",
        "mnasnet_050",
        "fbnetc_100",
        "ghostnet_050",
        "ghostnetv2_100",
        "repghostnet_050",
        "rexnet_100",
        "lcnet_050",
        "tinynet_e",
        "hardcorenas_a",
        "spnasnet_100",
        "mixnet_s",
        "densenet121",
        "dla34",
        "dpn48b",
        "hrnet_w18_small",
        "vgg11",
        "repvgg_a0",
        "convnext_atto",
        "convnextv2_atto",
        "inception_v3",
        "inception_v4",
        "inception_resnet_v2",
        "xception41",
        "cspresnet50",
        "cspdarknet53",
        "darknet53",
        "selecsls42b",
        "gernet_s",
        "nf_resnet26",
        "nfnet_l0",
        "dm_nfnet_f0",
        "vovnet39a",
        "ese_vovnet19b_dw",
        "hgnet_tiny",
        "hgnetv2_b0",
        "mobileone_s0",
        "fastvit_t8",
        "efficientvit_b0",
        "efficientvit_m0",
        "repvit_m1",
        "starnet_s1",
        "rdnet_tiny",
        "inception_next_tiny",
        "mambaout_femto",
        "tresnet_m",
        "resnet50_gn",
    ],
    "vit": [
        "vit_tiny_patch16_224",
        "vit_small_patch16_224",
        "vit_base_patch32_224",
        "vit_relpos_small_patch16_224",
        "vit_srelpos_small_patch16_224",
        "vit_small_patch16_rope_224",
        "deit_tiny_patch16_224",
        "deit_tiny_distilled_patch16_224",
        "deit3_small_patch16_224",
        "cait_xxs24_224",
        "eva02_tiny_patch14_224",
        "beit_base_patch16_224",
        "beitv2_base_patch16_224",
        "flexivit_small",
        "swin_tiny_patch4_window7_224",
        "swinv2_tiny_window8_256",
        "swinv2_cr_tiny_224",
        "xcit_nano_12_p16_224",
        "convit_tiny",
        "pit_ti_224",
        "tnt_s_patch16_224",
        "twins_svt_small",
        "pvt_v2_b0",
        "crossvit_tiny_240",
        "gcvit_xxtiny",
        "nest_tiny",
        "focalnet_tiny_srf",
        "davit_tiny",
        "hiera_tiny_224",
        "mvitv2_tiny",
        "volo_d1_224",
        "vit_medium_patch16_reg4_gap_256",
        "vit_betwixt_patch16_rope_reg4_gap_256",
    ],
    "hybrid": [
        "levit_128s",
        "mobilevit_xxs",
        "mobilevitv2_050",
        "edgenext_xx_small",
        "tiny_vit_5m_224",
        "coatnet_0_rw_224",
        "maxvit_nano_rw_256",
        "maxxvit_rmlp_nano_rw_256",
        "efficientformer_l1",
        "efficientformerv2_s0",
        "visformer_tiny",
        "vit_tiny_r_s16_p8_224",
        "botnet26t_256",
        "halonet26t",
        "lambda_resnet26t",
        "sebotnet33ts_256",
        "poolformer_s12",
        "poolformerv2_s12",
        "convformer_s18",
        "caformer_s18",
        "fastvit_sa12",
        "coat_tiny",
        "convmixer_768_32",
    ],
    "mlp": [
        "mixer_s16_224",
        "mixer_b16_224",
        "resmlp_12_224",
        "gmlp_ti16_224",
        "gmixer_12_224",
        "sequencer2d_s",
    ],
}

# torchvision: keyword arguments per model beyond num_classes, and input sizes.
VISION_SIZE = 64
TORCHVISION_KWARGS = {
    "vit_b_16": {"image_size": VISION_SIZE},
    "vit_b_32": {"image_size": VISION_SIZE},
    "vit_l_16": {"image_size": VISION_SIZE},
    "vit_l_32": {"image_size": VISION_SIZE},
    "vit_h_14": {"image_size": 56},
    # Its auxiliary head pools 5 x 5 with stride 3 and then needs 5 x 5: a
    # 299-pixel input; at 80 pixels the sweep trains it without that head.
    "inception_v3": {"aux_logits": False, "init_weights": True},
    "googlenet": {"aux_logits": True, "init_weights": True},
}
TORCHVISION_INPUT = {
    # Its stem needs 75 pixels; below 139 its last blocks see 1 x 1 (80) or 2 x 2
    # maps, whose train-mode BatchNorm over 2 or 8 values per channel makes
    # the loss chaotic: at 80 a 1e-7 relative change of the input moves CPU's
    # own float32 loss by 13%, and CPU's 1-thread and 2-thread losses differ
    # by 4%. At 139 they are 3 x 3 and the same change moves it by 4e-6.
    "inception_v3": 139,
    "vit_h_14": 56,
    "maxvit_t": 224,  # its partitions need 224 / 32 = 7 per side
    "ssd300_vgg16": 300,
    "ssdlite320_mobilenet_v3_large": 320,
    "mvit_v1_b": 224,
    "mvit_v2_s": 224,
    "raft_small": 128,  # its correlation pyramid needs 16 x 16 features, 1/8 of the image
    "raft_large": 128,
}
# timm's Inception networks: the torchvision inception_v3 reason above (at
# VISION_SIZE their stems fail, at 75 to 138 their last maps are 1 x 1 or 2 x 2).
# Halo and bottleneck attention (halonet26t, bat_resnext26ts) need every stage's map to hold whole 8-pixel
# blocks, so 256 pixels (at 128 CPU's own forward fails an assertion); crossvit's two patch grids (12 and 16
# pixels) must agree, which its own 240 does and 64 or 96 do not.
TIMM_INPUT = {
    "inception_v3": 139,
    "inception_v4": 139,
    "inception_resnet_v2": 139,
    "halonet26t": 256,
    "bat_resnext26ts": 256,
    "crossvit_tiny_240": 240,
    # Built for 64 pixels (their attention biases and reshapes are sized by img_size), they ran at their
    # pretrained 224 and failed on CPU too.
    "levit_128s": VISION_SIZE,
    "coatnet_0_rw_224": VISION_SIZE,
    "efficientformerv2_s0": VISION_SIZE,
}
# Detection and segmentation: small images, every anchor sampled (so the
# heads' random subsampling picks the same boxes on both devices), and the
# R-CNNs' box heads run on 64 proposals per image. At the default (up to 2000
# kept after NMS, so every one of a 64-pixel image's 1023 anchors that NMS
# keeps) every proposal went through the box head, four 3 x 3 convolutions of
# 256 channels in the v2 models: one CPU train step of
# fasterrcnn_resnet50_fpn_v2 took 17 s, 4.8 s at 64, and the v2 models timed
# out at 900 s.
DETECTION_KWARGS = {
    "weights_backbone": None,
    "min_size": VISION_SIZE,
    "max_size": VISION_SIZE,
    "rpn_batch_size_per_image": 1 << 20,
    "box_batch_size_per_image": 1 << 20,
    "rpn_post_nms_top_n_train": 64,
    "rpn_post_nms_top_n_test": 64,
}
# The region-proposal keywords above, which the one-stage detectors do not take.
_TWO_STAGE_ONLY = (
    "rpn_batch_size_per_image",
    "box_batch_size_per_image",
    "rpn_post_nms_top_n_train",
    "rpn_post_nms_top_n_test",
)
# Mask R-CNN's eval pastes each kept box's mask at the box's own pixel size
# (torchvision's paste_mask_in_image, a Python loop with host reads): a new
# program shape per box size. With random weights every image keeps its 100
# low-score boxes, 168 distinct sizes over the two images (counted on CPU),
# each compiling its interpolate, slice and copy programs; 10 boxes per image
# run the same code. Keypoint R-CNN's eval runs its keypoint head, eight 3 x 3
# convolutions of 512 channels on 14 x 14 maps (0.9 GFLOP each), on every kept
# box: 1.5 TFLOP per device for 100 boxes per image, and it timed out at 1200 s.
PER_DETECTION_HEAD_KWARGS = {"box_detections_per_img": 10}
# Models whose eval-mode BatchNorm takes running statistics from one
# train-mode pass on CPU (as a trained model's would be), built that way for
# both devices. ssdlite's random initialization shrinks its activations
# through BatchNorm's initial statistics (mean 0, variance 1) to logits of
# 1e-15: every class score is exactly 0.2, and topk over 3234 exact ties picks
# an arbitrary subset (CPU its heap order, tpu the lowest indices), so its
# eval check compared tie-breaking, not the model (256 boxes kept on tpu,
# 272 on CPU). Calibrated, its scores range from 0.001 to 0.79.
CALIBRATE_BATCHNORM = {"ssdlite320_mobilenet_v3_large"}


# Models given this many times --timeout. Their time is compile work in
# Strict eager mode: each op at a new shape or dtype is one XLA:CPU compile
# (about 0.09 s on an idle core, three or four times that on the shared
# 2-core machine), and these models have over a thousand. Measured with
# torch_tpu.metrics() on a cold cache: densenet121 1082 compiles, 96 of its
# 112 s; rexnet_100 (channel counts that change every block) 1116 compiles,
# 426 of its 480 s (its train check ran three times, the float64 one with
# programs of its own). densenet161/169/201 have 78/82/98 dense layers to
# densenet121's 58, each at a new width. The mask and keypoint R-CNNs did not
# finish in 1200 s under a load of 8 (210 s of CPU); see DETECTION_KWARGS
# for the part of maskrcnn's time that was data-shaped programs.
TIMEOUT_FACTOR = {
    "densenet161": 3,
    "densenet169": 3,
    "densenet201": 3,
    "rexnet_100": 3,
    "keypointrcnn_resnet50_fpn": 3,
    "maskrcnn_resnet50_fpn": 3,
    "maskrcnn_resnet50_fpn_v2": 6,
    # Over 300 s at the 64-pixel input: 80M to 145M parameters, each held,
    # stepped and compared on both devices (and again in float64 when the
    # float32 train check differs).
    "regnet_x_32gf": 3,
    "regnet_y_32gf": 3,
    "resnext101_32x8d": 3,
    "resnext101_64x4d": 3,
    "fasterrcnn_resnet50_fpn_v2": 3,
}

# Models that need more than the sweep's memory share (80% of the machine's
# memory over the workers), given 95% of it when run by a single worker
# (child_process.large_memory_limit). regnet_y_128gf has 644M parameters: its
# train check holds them with their gradients on both devices (10.4 GB), and
# where its float32 step differs, the float64 reference's as well (another
# 10.4 GB): 21.2 GiB at its peak, measured.
LARGE_MEMORY = {"regnet_y_128gf"}


# --- which models ----------------------------------------------------------------


def torchvision_models():
    """[(name, category)] for every model torchvision lists."""
    from torchvision import models

    categories = {}
    for category, module in (
        ("detection", models.detection),
        ("segmentation", models.segmentation),
        ("video", models.video),
        ("optical flow", models.optical_flow),
        ("quantized", models.quantization),
    ):
        for name in models.list_models(module=module):
            categories[name] = category
    return sorted((name, categories.get(name, "classification")) for name in models.list_models())


def timm_models():
    return [(name, f"timm {family}") for family, names in TIMM_MODELS.items() for name in names]


def all_models(source="all", only=None):
    """[(source, name, category)], the two sources alternating (so that a
    sweep cut short has sampled both)."""
    lists = []
    if source in ("all", "torchvision"):
        lists.append([("torchvision", n, c) for n, c in torchvision_models()])
    if source in ("all", "timm"):
        lists.append([("timm", n, c) for n, c in timm_models()])
    out = [m for group in itertools.zip_longest(*lists) for m in group if m is not None]
    return [m for m in out if not only or m[1] in only]


# --- building ---------------------------------------------------------------------


def _deterministic(model):
    """Dropout, stochastic depth and drop-path off: their masks are random
    draws, different per device. Besides the modules, rates that forwards
    pass to F.dropout themselves (timm's `self.drop_rate` before a
    classifier, drop-path and drop-block probabilities) are zeroed."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        for attr, value in list(vars(module).items()):
            if "drop" in attr and isinstance(value, float):
                setattr(module, attr, 0.0)
        if type(module).__name__ == "StochasticDepth":
            module.p = 0.0
    return model


def build(source, name, category):
    """(model, make_inputs): make_inputs(seed, device, train) -> (args, kwargs)."""
    torch.manual_seed(0)
    if source == "timm":
        return _build_timm(name)
    if category == "quantized":
        raise CannotBuild("quantized int8 model: QuantizedCPU kernels, CPU only")
    from torchvision import models

    size = TORCHVISION_INPUT.get(name, VISION_SIZE)
    if category == "classification":
        model = models.get_model(name, weights=None, num_classes=10, **TORCHVISION_KWARGS.get(name, {}))
        return _deterministic(model), _images(size)
    if category == "segmentation":
        aux = {} if name.startswith("lraspp") else {"aux_loss": True}  # lraspp has no auxiliary head
        model = models.get_model(name, weights=None, weights_backbone=None, num_classes=4, **aux)
        return _deterministic(model), _images(size)
    if category == "video":
        # mvit's patch grid and s3d's last pooling (2 x 7 x 7 over a 1/8-frame,
        # 1/32-pixel map) need 16 frames of 224 pixels.
        frames, size = (16, 224) if name.startswith(("mvit", "s3d")) else (4, 32)
        model = models.get_model(name, weights=None, num_classes=10)
        return _deterministic(model), _clips(frames, size)
    if category == "optical flow":
        model = models.get_model(name, weights=None)
        return _deterministic(model), _frame_pairs(size)
    if category == "detection":
        kwargs = dict(DETECTION_KWARGS)
        if name.startswith(("ssd", "retinanet", "fcos")):
            for key in _TWO_STAGE_ONLY:
                kwargs.pop(key)
        if name.startswith("ssd"):
            kwargs.pop("min_size"), kwargs.pop("max_size")
        if name.startswith(("maskrcnn", "keypointrcnn")):
            kwargs.update(PER_DETECTION_HEAD_KWARGS)
        num_classes = 2 if name.startswith("keypointrcnn") else 5
        model = _deterministic(models.get_model(name, weights=None, num_classes=num_classes, **kwargs))
        make_inputs = _detection_inputs(name, size)
        if name in CALIBRATE_BATCHNORM:
            _calibrate_batchnorm(model, make_inputs(0))
        return model, make_inputs
    raise CannotBuild(f"category {category}")


def _calibrate_batchnorm(model, inputs):
    """Every BatchNorm's running statistics: the averages over one train-mode
    pass on `inputs` (a seed the checks do not use)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: this pass's statistics exactly
    model.train()
    with torch.no_grad():
        _call(model, inputs, "cpu", True)
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum


def _build_timm(name):
    import timm

    if name not in timm.list_models():
        raise CannotBuild(f"not in timm {timm.__version__}")
    kwargs = {"pretrained": False, "num_classes": 10}
    wanted = TIMM_INPUT.get(name, VISION_SIZE)
    model = None
    for extra in ({"img_size": wanted}, {}):
        try:
            model = timm.create_model(name, **kwargs, **extra)
            break
        except Exception:  # noqa: BLE001  (a model that takes no img_size, or needs its own)
            continue
    if model is None:
        model = timm.create_model(name, **kwargs)
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))[1:]
    if getattr(model, "patch_embed", None) is not None and hasattr(model.patch_embed, "img_size"):
        size = tuple(model.patch_embed.img_size)
    elif not any(k in name for k in ("levit", "maxvit", "maxxvit", "coatnet", "efficientformer", "swin", "nest")):
        size = (VISION_SIZE, VISION_SIZE)
    if name in TIMM_INPUT:
        size = (TIMM_INPUT[name],) * 2
    return _deterministic(model), _images(size)


def _randn(generator, *shape):
    return torch.randn(*shape, generator=generator)


def _images(size):
    size = (size, size) if isinstance(size, int) else tuple(size)

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return (_randn(g, BATCH, 3, *size),), {}

    return make


def _clips(frames, size):
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return (_randn(g, BATCH, 3, frames, size, size),), {}

    return make


def _frame_pairs(size):
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return (_randn(g, 1, 3, size, size), _randn(g, 1, 3, size, size)), {"num_flow_updates": 2}

    return make


def _detection_inputs(name, size):
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        images = [torch.rand(3, size, size, generator=g) for _ in range(BATCH)]
        targets = []
        for _ in range(BATCH):
            corner = torch.rand(2, 2, generator=g) * size * 0.4
            boxes = torch.cat([corner, corner + size * 0.3 + torch.rand(2, 2, generator=g) * size * 0.2], 1)
            target = {"boxes": boxes, "labels": torch.tensor([1, 1])}
            if name.startswith("maskrcnn"):
                masks = torch.zeros(2, size, size, dtype=torch.uint8)
                for k, (x1, y1, x2, y2) in enumerate(boxes.int().tolist()):
                    masks[k, y1:y2, x1:x2] = 1
                target["masks"] = masks
            if name.startswith("keypointrcnn"):
                points = corner[:, None, :] + torch.rand(2, 17, 2, generator=g) * size * 0.3
                target["keypoints"] = torch.cat([points, torch.ones(2, 17, 1)], 2)
            targets.append(target)
        return (images,), {"targets": targets}

    return make


# --- comparing ----------------------------------------------------------------------


def _tensors(value):
    """Every floating tensor of a model output, in order (dicts in key order)."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        return [t for k in sorted(value) for t in _tensors(value[k])]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _close(actual, expected, what, atol=1e-4, rtol=1e-3):
    a, e = _tensors(actual), _tensors(expected)
    if len(a) != len(e):
        raise WrongValues(f"{what}: {len(a)} tensors on tpu, {len(e)} on CPU")
    for i, (x, y) in enumerate(zip(a, e)):
        if x.shape != y.shape:
            raise WrongValues(f"{what} tensor {i}: shape {tuple(x.shape)} on tpu, {tuple(y.shape)} on CPU")
        try:
            torch.testing.assert_close(x.detach().cpu(), y.detach(), atol=atol, rtol=rtol)
        except AssertionError as err:
            detail = [line.strip() for line in str(err).strip().splitlines()[-2:]]
            raise WrongValues(f"{what} tensor {i}: " + "; ".join(detail)) from None


def _close_to_scale(actual, expected, what, atol=1e-4, rtol=1e-3):
    """Gradients and stepped weights: the largest difference against the
    tensor's largest magnitude. Elementwise relative tests are meaningless
    for a gradient's near-zero entries, which are sums of terms that cancel;
    float32 rounding, amplified by train-mode BatchNorm over a few values per
    channel at these small inputs, leaves them differing in their own scale."""
    if expected.numel() == 0:  # a detector that kept no box: the shapes were compared
        return
    difference = (actual.detach().cpu().double() - expected.detach().double()).abs().max().item()
    scale = expected.detach().abs().max().item()
    if not difference <= atol + rtol * scale:
        raise WrongValues(f"{what}: largest difference {difference:.3g}, largest magnitude {scale:.3g}")


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _call(model, inputs, device, train):
    args, kwargs = _to(inputs, device)
    if not train:
        kwargs.pop("targets", None)
    return model(*args, **kwargs)


def _loss(output):
    if isinstance(output, dict) and output and all(k.startswith("loss") for k in output):
        return sum(output.values())  # detection models' own losses
    return accuracy.mean_square_loss(_tensors(output))


def _in_cpus_order_of_near_ties(actual, expected, atol=1e-5, rtol=1e-4):
    """A detector's output on tpu, its detections reordered to CPU's where
    their scores tie within rounding. Detections come sorted by score; two
    whose scores differ by an ulp swap places between devices (ssdlite's
    scores of 0.4777779 and 0.4777778, labels 3 and 4), so rows of boxes and
    labels differ while both orders are right. Each CPU row takes the tpu
    row of the same label, a score within tolerance and the nearest box;
    rows without one stay where they are, for the comparison to report."""
    if not (isinstance(expected, list) and expected and all(isinstance(d, dict) and "scores" in d for d in expected)):
        return actual
    aligned = []
    for got, want in zip(actual, expected):
        got = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in got.items()}
        n = len(want["scores"])
        if len(got["scores"]) != n:
            aligned.append(got)
            continue
        unused, order = set(range(n)), []
        for i in range(n):
            score, label = want["scores"][i].item(), want["labels"][i].item()
            near = [
                j
                for j in unused
                if got["labels"][j].item() == label and abs(got["scores"][j].item() - score) <= atol + rtol * abs(score)
            ]
            if not near:
                order = None
                break
            j = min(near, key=lambda j: (got["boxes"][j] - want["boxes"][i]).abs().max().item())
            unused.discard(j)
            order.append(j)
        if order is not None:
            got = {k: v[order] if isinstance(v, torch.Tensor) and len(v) == n else v for k, v in got.items()}
        aligned.append(got)
    return aligned


def check_eval(cpu, tpu, make_inputs):
    cpu.eval(), tpu.eval()
    inputs = make_inputs(1)
    with torch.no_grad():
        actual, expected = _call(tpu, inputs, "tpu", False), _call(cpu, inputs, "cpu", False)
    actual = _in_cpus_order_of_near_ties(actual, expected)
    a, e = _tensors(actual), _tensors(expected)
    if len(a) != len(e):
        raise WrongValues(f"eval output: {len(a)} tensors on tpu, {len(e)} on CPU")
    for i, (x, y) in enumerate(zip(a, e)):
        if x.shape != y.shape:  # no float64 reference can pass it (a detector that kept other boxes)
            raise WrongValues(f"eval output tensor {i}: shape {tuple(x.shape)} on tpu, {tuple(y.shape)} on CPU")
    try:
        for i, (x, y) in enumerate(zip(a, e)):
            # Random deep nets in eval mode grow activations to 1e4 and beyond.
            _close_to_scale(x, y, f"eval output tensor {i}", atol=1e-5, rtol=1e-4)
    except WrongValues as err:
        _as_accurate_as_cpu(actual, expected, cpu, inputs, err)


def _as_accurate_as_cpu(actual, expected, cpu, inputs, err):
    """Where tpu's eval outputs differ from CPU's past the tolerance, they still pass if each is within twice CPU's
    own float32 error of the CPU model's outputs in float64 (accuracy.worst_against_float64), raised as
    PassInFloat64; else `err` is raised. Mask R-CNN's masks are sigmoids of logits near 440 pasted into the image:
    float32 rounding in its RoI features (5e-5 of them) moves them by 5e-4 on tpu, and by 4e-4 on CPU, from
    float64's."""
    reference = copy.deepcopy(cpu).double()
    with torch.no_grad():
        outputs = _call(reference, _cast(inputs, torch.float64), "cpu", False)
    reference = _in_cpus_order_of_near_ties(outputs, expected)  # detections in CPU's order, as tpu's are
    worst = accuracy.worst_against_float64(_tensors(actual), _tensors(expected), _tensors(reference))
    if worst is None:
        raise err
    raise PassInFloat64(f"tpu {worst[0]:.2g} from a float64 reference, CPU's own float32 {worst[1]:.2g}; {err}")


# (loss atol, loss rtol, gradient and weight rtol to the tensor's scale) per dtype
TRAIN_TOLERANCES = {torch.float32: (1e-5, 1e-4, 1e-3), torch.float64: (1e-10, 1e-8, 1e-8)}


def _train_step(model, inputs, device):
    """One train step of `model` on `inputs`: its loss, detached; the model
    keeps its gradients and its parameters after SGD (lr 0.1)."""
    model.train()
    loss = _loss(_call(model, inputs, device, True))
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return loss.detach()


def _train_both(models, make_inputs, seed, dtype):
    """The pair `models` ([cpu, tpu]), from the same weights, each takes one
    train step on seed's inputs in `dtype`: the losses (tpu, cpu)."""
    cpu, tpu = models
    inputs = _cast(make_inputs(seed), dtype)
    loss_cpu = _train_step(cpu, inputs, "cpu")
    return _train_step(tpu, inputs, "tpu"), loss_cpu


def _compare_train(models, losses, dtype):
    """WrongValues naming the first difference, within `dtype`'s
    TRAIN_TOLERANCES, between the pair's losses, gradients and parameters
    after the step."""
    loss_atol, loss_rtol, rtol = TRAIN_TOLERANCES[dtype]
    cpu, tpu = models
    _close(losses[0], losses[1], "loss", atol=loss_atol, rtol=loss_rtol)
    named = list(cpu.named_parameters())
    for (name, p), q in zip(named, tpu.parameters()):
        if (p.grad is None) != (q.grad is None):
            raise WrongValues(f"gradient of {name}: {'missing' if q.grad is None else 'set'} on tpu only")
        if p.grad is not None:
            _close_to_scale(q.grad, p.grad, f"gradient of {name}", atol=rtol / 10, rtol=rtol)
    for (name, p), q in zip(named, tpu.parameters()):
        _close_to_scale(q, p, f"{name} after SGD", atol=rtol / 10, rtol=rtol)


def _cast(value, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        # torchvision's keypoint R-CNN takes float32 keypoint targets only,
        # in a float64 model too (roi_heads' check)
        return {k: v if k == "keypoints" else _cast(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _fresh_pair(source, name, category, dtype=torch.float32):
    cpu, _ = build(source, name, category)
    tpu, _ = build(source, name, category)
    cpu.to(dtype)
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to(dtype).to("tpu")


def _train_difference(models, make_inputs, seed, dtype=torch.float32):
    """One train step of the pair `models` ([cpu, tpu]) compared: (its difference as text, or None where it
    passes; the losses (tpu, cpu)). Only these outlive the call: an exception's traceback would keep the
    comparison's frame, and with it the models' gradients, alive through a retry."""
    losses = _train_both(models, make_inputs, seed, dtype)
    try:
        _compare_train(models, losses, dtype)
    except WrongValues as err:
        return str(err), losses
    return None, losses


def _train_as_accurate_as_cpu(models, initial, losses, make_inputs, seed, cpu_rng_state):
    """Whether the pair's train step (on seed's inputs, taken from the weights of `initial`, the CPU model before
    it; `losses` (tpu, cpu)) is as accurate on tpu as on CPU: `initial` in float64 takes the same step as the
    reference, drawing what the CPU model drew (from `cpu_rng_state`, the CPU generator's state before its step:
    an R-CNN samples its training proposals with randperm). tpu's loss, gradients and parameters after SGD
    must each be as near it as CPU's own float32 ones are, by Dynamo's train accuracy check: in root mean
    square, within twice CPU's error, three times for tensors of under 1000 elements and 1 x 1 convolution
    weights (accuracy.worst_against_float64 with rms_error and dynamos_multiplier). The worst (tpu, CPU)
    error pair, or None.

    Root mean square, not the largest error as in eval: a gradient's largest error is where an activation
    within rounding of a ReLU kink went the other way, on either device. s3d's step: CPU's own gradients are
    up to 1.6% of their scale off float64's; tpu's largest error in one tensor is 6.6 times CPU's there, its
    root mean square 1.4 times, and 1.7 times at worst. regnet_y_128gf's squeeze-excitation biases (8
    elements, fed by a pooled map) are 1.3% off on CPU and 3.7% on tpu: within three times.

    This runs the float64 model on CPU only. Taking the float64 step on both devices instead is the stricter
    check, but XLA:CPU has no fast float64 convolution (its Eigen kernels take float16 and float32): ssd300_vgg16's
    float64 step took 455 s on tpu, its float32 one 11 s."""
    reference = initial.double()
    torch.set_rng_state(cpu_rng_state)
    reference_loss = _train_step(reference, _cast(make_inputs(seed), torch.float64), "cpu")

    def step_of(model, loss):
        parameters = list(model.parameters())
        return [loss] + [p.grad for p in parameters] + [p.detach() for p in parameters]

    cpu, tpu = models
    triples = list(zip(step_of(tpu, losses[0]), step_of(cpu, losses[1]), step_of(reference, reference_loss)))
    if any((a is None) != (e is None) or (e is None) != (r is None) for a, e, r in triples):
        return None
    present = [t for t in triples if t[0] is not None]
    return accuracy.worst_against_float64(
        *map(list, zip(*present)), error=accuracy.rms_error, multiplier=accuracy.dynamos_multiplier
    )


def _replace_pair(models, source, name, category, dtype=torch.float32):
    """Fresh models in place of the pair `models`, the old pair released first: a model of 644M parameters
    (regnet_y_128gf), held on both devices with its gradients, is 10 GB, and a retry that built its fresh pair
    beside the old one passed the machine's 24 GB."""
    models.clear()
    gc.collect()
    models.extend(_fresh_pair(source, name, category, dtype))


def check_train_at_a_kink_retries(source, name, category, models, make_inputs):
    """One train step on both devices, compared (_train_difference), on seed
    1's inputs; if they differ, once more on fresh
    models and seed 2's. A ReLU (or max) input within rounding of its kink
    sends a gradient one way on one device and the other way on the other,
    both right in float32; such a tie is rare, so other inputs pass, while a
    device error fails both (scripts/hf_coverage.py does the same).

    Where both differ, train-mode BatchNorm over two values per channel (a
    pooled 1 x 1 map at batch 2) or a deep random net may have amplified
    float32 rounding past any useful float32 tolerance. Seed 2's step passes
    if tpu's is as accurate as CPU's against the CPU model's step in float64
    (_train_as_accurate_as_cpu); failing that, the check runs once more in
    float64 on both devices, with tolerances 1e4 (loss) and 1e5 (gradients,
    weights) times tighter (inception_v3's float64 losses of 14 differ by 1e-9
    of it). A lowering error fails both. Either pass is reported as "pass
    (float64)", with the float32 difference; the first names both errors.

    `models` is the [cpu, tpu] pair; each retry replaces it (see _replace_pair)."""
    first, _ = _train_difference(models, make_inputs, seed=1)
    if first is None:
        return
    _replace_pair(models, source, name, category)
    initial = copy.deepcopy(models[0])  # the float64 reference's weights
    cpu_rng_state = torch.get_rng_state()  # and its random draws (the CPU model's step comes first)
    second, losses = _train_difference(models, make_inputs, seed=2)
    if second is None:
        return
    float32 = f"{second} (and with other inputs: {first})"
    worst = _train_as_accurate_as_cpu(models, initial, losses, make_inputs, 2, cpu_rng_state)
    del initial  # the float64 reference and its gradients: gone before the next pair
    if worst is not None:
        raise PassInFloat64(
            f"tpu {worst[0]:.2g} from a float64 reference in root mean square, CPU's own float32 {worst[1]:.2g}; "
            + float32
        )
    _replace_pair(models, source, name, category, torch.float64)
    try:
        difference, _ = _train_difference(models, make_inputs, seed=1, dtype=torch.float64)
    except Exception as err:  # noqa: BLE001  (a model that cannot run in float64 fails its float64 check)
        difference = outcome(err)[1]
    if difference is not None:
        # float64 first: the report keeps 300 characters, and float64 decides.
        raise WrongValues(f"in float64: {difference}; in float32: {float32}")
    raise PassInFloat64(f"float32: {second}")


def run_model(source, name, category):
    """Both checks of one model, in this process: {check: (outcome, detail)}."""
    import torch_tpu

    try:
        cpu, make_inputs = build(source, name, category)
        tpu, _ = build(source, name, category)
        tpu.load_state_dict(cpu.state_dict())
        tpu.to("tpu")
        with torch.no_grad():
            cpu.eval()
            _call(cpu, make_inputs(1), "cpu", False)  # the CPU model itself runs on these inputs
    except Exception as err:  # noqa: BLE001  (any failure to build is recorded)
        return not_built(err)
    models = [cpu, tpu]  # the only reference to the pair, which the train check's retries replace
    del cpu, tpu
    steps = (
        ("eval", lambda: check_eval(*models, make_inputs)),
        ("train", lambda: check_train_at_a_kink_retries(source, name, category, models, make_inputs)),
    )
    with torch_tpu.matmul_precision("highest"):
        return {check: run_check(step) for check, step in steps}


# --- the sweep ------------------------------------------------------------------------


def _child(args):
    source, name, category = args.child.split(",", 2)
    torch.set_num_threads(1)
    child_process.print_result(run_model(source, name, category))


def _run_one(model, timeout):
    source, name, category = model
    timeout *= TIMEOUT_FACTOR.get(name, 1)
    seconds, results = child_process.run_item(
        "sweeps.model_zoo", f"{source},{name},{category}", timeout, name in LARGE_MEMORY
    )
    return _record(source, name, category, seconds, results)


def _record(source, name, category, seconds, results):
    """One model's line of the report: {check: (outcome, detail)} and its wall time."""
    return {"source": source, "name": name, "category": category, "seconds": seconds, "results": results}


def write_report(records, path, seconds, workers, command, merged=False):
    import timm
    import torchvision

    records = sorted(records, key=lambda r: (r["source"], r["category"], r["name"]))
    built = [r for r in records if not excluded(r)]
    listed = len(all_models())
    coverage = f"all {listed} models" if len(records) >= listed else f"{len(records)} of the {listed} models (a subset)"
    if merged:
        run = (
            f"{coverage}, run in batches whose results `--merge` accumulates here; the models took "
            f"{sum(r['seconds'] for r in records) / 60:.0f} min in all, one process each (the last batch: "
            f"{seconds / 60:.1f} min on {workers} worker(s))."
        )
    else:
        run = f"{coverage} in {seconds / 60:.1f} min on {workers} worker(s)."
    lines = [
        "# Model zoo on tpu",
        "",
        f"Generated by `{command}` (torchvision {torchvision.__version__}, timm {timm.__version__}, torch "
        f"{torch.__version__}): {run} {report.optimization_note(merged)}",
        "Each model: eval forward and one train step (loss, gradients, parameters after SGD) on tpu against "
        'CPU at matmul precision "highest" (scripts/model_zoo.py).',
        "",
    ]
    for source in ("torchvision", "timm"):
        mine = [r for r in built if r["source"] == source]
        if mine:
            ok = sum(passed(r) for r in mine)
            notes = []
            for check, kind, what in (
                ("train", "equal", "train equal in float64 only"),
                ("train", "accurate", "train as accurately as CPU against float64 only"),
                ("eval", "accurate", "are as accurate as CPU in eval against float64 only"),
            ):
                count = sum(_float64_pass(r["results"].get(check, ("", ""))[1]) == kind for r in mine)
                if count:
                    notes.append(f"{count} of them {what} (see the {check} column)")
            lines.append(
                f"- **{source}: {ok} of {len(mine)} models pass both checks ({100 * ok / len(mine):.1f}%)**"
                + "".join(f"; {note}" for note in notes)
            )
    lines.append(f"- excluded (cannot be built here): {len(records) - len(built)}, listed at the end")
    report.write(path, lines + LEDGER.totals(built) + LEDGER.tables(records))


def _float64_pass(detail):
    """How a check passed in float64 only, from its detail: "accurate" (tpu's float32 as near a float64
    reference as CPU's, see _as_accurate_as_cpu), "equal" (the float64 step equal on both devices), or None."""
    if not detail.startswith("in float64 ("):
        return None
    return "accurate" if detail.startswith("in float64 (tpu ") else "equal"


def _arguments_that_shape_results(argv):
    """argv without the output paths (--report, --jsonl): the report names
    the command that ran its last batch, not where that machine kept files."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--report", "--jsonl"):
            skip = True
        elif not arg.startswith(("--report=", "--jsonl=")):
            kept.append(arg)
    return kept


def main():
    parser = command_line.arguments(
        __doc__.split("\n\n")[0],
        "models",
        report=os.path.join(report.DOCS, "model_zoo.md"),
        workers=1,
        timeout=600,
        only="model names",
        timeout_help="seconds per model (times TIMEOUT_FACTOR's)",
    )
    parser.add_argument("--source", default="all", choices=("all", "torchvision", "timm"))
    parser.add_argument("--command", default="", help="with --from-jsonl: the sweep command(s) to name in the report")
    args = parser.parse_args()
    if args.child:
        return _child(args)
    command = args.command or "python scripts/model_zoo.py " + " ".join(_arguments_that_shape_results(sys.argv[1:]))
    command_line.run(
        args,
        LEDGER,
        lambda: all_models(args.source, command_line.only(args)),
        lambda m: (m[0], m[1]),
        _run_one,
        lambda records, seconds, merged: write_report(records, args.report, seconds, args.workers, command, merged),
    )


if __name__ == "__main__":
    main()
