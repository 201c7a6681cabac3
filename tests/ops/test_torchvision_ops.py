"""torchvision's operators (torch_tpu/integrations/torchvision_ops.py).

The CPU kernels are checked against loop-by-loop transcriptions of
torchvision's C++ CPU kernels (below, float64, tiny sizes) and their
backwards against numerical gradients; the tpu kernels against the CPU
ones, forward and backward, in Strict, DeferAndFuse and compiled graphs.
Bad arguments raise what torchvision's kernels raise."""

import math

import pytest
import torch
import torchvision
from reference import assert_close
from torchvision import ops

import torch_tpu
from torch_tpu.integrations.torchvision_ops import DeformConv2dScalars

ATOL, RTOL = 1e-5, 1e-5


# --- loop transcriptions of torchvision's C++ CPU kernels ---------------------


def _bilinear_roi(plane, y, x):
    """roi_align_common.h / ps_roi_align_kernel.cpp's bilinear_interpolate."""
    height, width = plane.shape
    if not (y >= -1.0 and y <= height and x >= -1.0 and x <= width):
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_high = y_low = height - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_high = x_low = width - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    return (
        hy * hx * plane[y_low, x_low]
        + hy * lx * plane[y_low, x_high]
        + ly * hx * plane[y_high, x_low]
        + ly * lx * plane[y_high, x_high]
    )


def loop_roi_align(x, rois, scale, ph_, pw_, sampling_ratio, aligned, position_sensitive=False):
    x, rois = x.tolist(), rois.tolist()
    channels = len(x[0])
    channels_out = channels // (ph_ * pw_) if position_sensitive else channels
    out = torch.zeros(len(rois), channels_out, ph_, pw_, dtype=torch.float64)
    for k, roi in enumerate(rois):
        plane_of = lambda c: torch.tensor(x[int(roi[0])][c], dtype=torch.float64)  # noqa: E731
        offset = 0.5 if (aligned or position_sensitive) else 0.0
        sw, sh, ew, eh = (v * scale - offset for v in roi[1:])
        rw, rh = ew - sw, eh - sh
        if not aligned and not position_sensitive:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_, rw / pw_
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / ph_)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pw_)
        count = gh * gw if position_sensitive else max(gh * gw, 1)
        for c in range(channels_out):
            for ph in range(ph_):
                for pw in range(pw_):
                    plane = plane_of((c * ph_ + ph) * pw_ + pw if position_sensitive else c)
                    total = 0.0
                    for iy in range(gh):
                        y = sh + ph * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            total += _bilinear_roi(plane, y, sw + pw * bw + (ix + 0.5) * bw / gw)
                    out[k, c, ph, pw] = total / count if count else math.nan  # C++: 0.0f / 0
    return out


def _c_round(v):
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def loop_roi_pool(x, rois, scale, ph_, pw_):
    n, channels, height, width = x.shape
    out = torch.zeros(len(rois), channels, ph_, pw_, dtype=x.dtype)
    argmax = torch.full((len(rois), channels, ph_, pw_), -1, dtype=torch.int32)
    for k, roi in enumerate(rois.tolist()):
        sw, sh, ew, eh = (_c_round(v * scale) for v in roi[1:])
        bh, bw = max(eh - sh + 1, 1) / ph_, max(ew - sw + 1, 1) / pw_
        for ph in range(ph_):
            for pw in range(pw_):
                hs = min(max(math.floor(ph * bh) + sh, 0), height)
                he = min(max(math.ceil((ph + 1) * bh) + sh, 0), height)
                ws = min(max(math.floor(pw * bw) + sw, 0), width)
                we = min(max(math.ceil((pw + 1) * bw) + sw, 0), width)
                empty = he <= hs or we <= ws
                for c in range(channels):
                    best, best_index = (0.0 if empty else -torch.finfo(torch.float32).max), -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[int(roi[0]), c, h, w] > best:
                                best, best_index = float(x[int(roi[0]), c, h, w]), h * width + w
                    out[k, c, ph, pw], argmax[k, c, ph, pw] = best, best_index
    return out, argmax


def loop_ps_roi_pool(x, rois, scale, ph_, pw_):
    n, channels, height, width = x.shape
    channels_out = channels // (ph_ * pw_)
    out = torch.zeros(len(rois), channels_out, ph_, pw_, dtype=x.dtype)
    for k, roi in enumerate(rois.tolist()):
        sw, sh, ew, eh = (_c_round(v * scale) for v in roi[1:])
        bh, bw = max(eh - sh, 1) / ph_, max(ew - sw, 1) / pw_
        for c in range(channels_out):
            for ph in range(ph_):
                for pw in range(pw_):
                    hs = min(max(math.floor(ph * bh) + sh, 0), height - 1)
                    he = min(max(math.ceil((ph + 1) * bh) + sh, 0), height - 1)
                    ws = min(max(math.floor(pw * bw) + sw, 0), width - 1)
                    we = min(max(math.ceil((pw + 1) * bw) + sw, 0), width - 1)
                    if he <= hs or we <= ws:
                        continue
                    plane = x[int(roi[0]), (c * ph_ + ph) * pw_ + pw]
                    out[k, c, ph, pw] = plane[hs:he, ws:we].sum() / ((he - hs) * (we - ws))
    return out


def loop_nms(boxes, scores, threshold):
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    b = boxes.tolist()
    area = [(x2 - x1) * (y2 - y1) for x1, y1, x2, y2 in b]
    suppressed, keep = set(), []
    for position, i in enumerate(order):
        if i in suppressed:
            continue
        keep.append(i)
        for j in order[position + 1 :]:
            w = max(0.0, min(b[i][2], b[j][2]) - max(b[i][0], b[j][0]))
            h = max(0.0, min(b[i][3], b[j][3]) - max(b[i][1], b[j][1]))
            if w * h / (area[i] + area[j] - w * h) > threshold:
                suppressed.add(j)
    return torch.tensor(keep)


def _bilinear_deform(plane, y, x):
    """deform_conv2d_kernel.cpp's bilinear_interpolate."""
    height, width = plane.shape
    if y <= -1 or height <= y or x <= -1 or width <= x:
        return 0.0
    yl, xl = math.floor(y), math.floor(x)
    lh, lw = y - yl, x - xl
    at = lambda r, c: float(plane[r, c]) if 0 <= r < height and 0 <= c < width else 0.0  # noqa: E731
    return (
        (1 - lh) * (1 - lw) * at(yl, xl)
        + (1 - lh) * lw * at(yl, xl + 1)
        + lh * (1 - lw) * at(yl + 1, xl)
        + lh * lw * at(yl + 1, xl + 1)
    )


def loop_deform_conv2d(x, weight, offset, mask, bias, stride, pad, dilation, groups, offset_groups):
    """stride, pad and dilation are (h, w) pairs."""
    b_, c_in, height, width = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    out_h, out_w = offset.shape[2:]
    out = torch.zeros(b_, c_out, out_h, out_w, dtype=x.dtype)
    for b in range(b_):
        for o in range(c_out):
            group = o // (c_out // groups)
            for oy in range(out_h):
                for ox in range(out_w):
                    total = float(bias[o])
                    for cl in range(c_per_group):
                        c = group * c_per_group + cl
                        og = c // (c_in // offset_groups)
                        for i in range(kh):
                            for j in range(kw):
                                t = i * kw + j
                                dy = float(offset[b, og * 2 * kh * kw + 2 * t, oy, ox])
                                dx = float(offset[b, og * 2 * kh * kw + 2 * t + 1, oy, ox])
                                m = float(mask[b, og * kh * kw + t, oy, ox]) if mask is not None else 1.0
                                y = oy * stride[0] - pad[0] + i * dilation[0] + dy
                                xx = ox * stride[1] - pad[1] + j * dilation[1] + dx
                                total += float(weight[o, cl, i, j]) * m * _bilinear_deform(x[b, c], y, xx)
                    out[b, o, oy, ox] = total
    return out


# --- inputs --------------------------------------------------------------------


def boxes_for(n, size, dtype=torch.float32, batch=2):
    """RoIs [n, 5]: inside, across and beyond the feature map edges, tiny and
    degenerate ones included."""
    corner = torch.rand(n, 2, dtype=dtype) * (size + 4) - 3
    extent = torch.rand(n, 2, dtype=dtype) * size * 0.8
    extent[0] = 0.0  # a point RoI
    boxes = torch.cat([corner, corner + extent], 1)
    index = torch.arange(n, dtype=dtype).remainder(batch)[:, None]
    return torch.cat([index, boxes], 1)


# deform_conv2d geometries: (stride, padding, dilation, groups, offset_groups),
# height and width differing in each pair so that a swapped h/w argument shows.
DEFORM_GEOMETRIES = {
    "dilated": ((1, 1), (1, 1), (2, 1), 2, 2),
    "strided": ((2, 1), (0, 2), (1, 2), 1, 4),
    "grouped": ((1, 3), (2, 0), (3, 1), 4, 1),
}


def deform_inputs(dtype=torch.float32, use_mask=True, geometry="dilated"):
    """(x, weight, offset, mask, bias): a 3 x 2 kernel over a 7 x 8 map,
    offsets that move some samples off the map."""
    stride, pad, dilation, groups, offset_groups = DEFORM_GEOMETRIES[geometry]
    height, width, kernel_h, kernel_w, taps = 7, 8, 3, 2, 6
    x = torch.randn(2, 4, height, width, dtype=dtype)
    weight = torch.randn(8, 4 // groups, kernel_h, kernel_w, dtype=dtype)
    out_h = (height + 2 * pad[0] - (dilation[0] * (kernel_h - 1) + 1)) // stride[0] + 1
    out_w = (width + 2 * pad[1] - (dilation[1] * (kernel_w - 1) + 1)) // stride[1] + 1
    offset = torch.randn(2, offset_groups * 2 * taps, out_h, out_w, dtype=dtype) * 1.5
    mask = torch.rand(2, offset_groups * taps, out_h, out_w, dtype=dtype) if use_mask else None
    bias = torch.randn(8, dtype=dtype)
    return x, weight, offset, mask, bias


def deform_conv2d(geometry):
    """torchvision.ops.deform_conv2d with the geometry's arguments, taking
    (x, weight, offset, mask, bias); its groups come from the shapes."""
    stride, pad, dilation, _, _ = DEFORM_GEOMETRIES[geometry]
    return lambda x, w, o, m, b: ops.deform_conv2d(x, o, w, b, stride=stride, padding=pad, dilation=dilation, mask=m)


def assert_cpu_close(actual, expected, tolerance):
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=True)


# --- the CPU kernels follow torchvision's C++ --------------------------------


def test_torchvision_imports_and_its_ops_exist():
    assert torchvision.extension._has_ops()
    for name in ("nms", "roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool", "deform_conv2d"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"torchvision::{name}", "PrivateUse1"), name


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_cpu_roi_align_follows_the_cxx_kernel(sampling_ratio, aligned):
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    rois = boxes_for(6, 6, torch.float64)
    actual = ops.roi_align(x, rois, (3, 2), 0.8, sampling_ratio, aligned)
    assert_cpu_close(actual, loop_roi_align(x, rois, 0.8, 3, 2, sampling_ratio, aligned), 1e-12)


@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_cpu_ps_roi_align_follows_the_cxx_kernel(sampling_ratio):
    x = torch.randn(2, 12, 7, 6, dtype=torch.float64)
    rois = boxes_for(6, 6, torch.float64)
    actual = ops.ps_roi_align(x, rois, (3, 2), 0.8, sampling_ratio)
    expected = loop_roi_align(x, rois, 0.8, 3, 2, sampling_ratio, True, position_sensitive=True)
    assert_cpu_close(actual, expected, 1e-12)


def test_cpu_roi_pool_and_ps_roi_pool_follow_the_cxx_kernels():
    x = torch.randn(2, 12, 7, 6, dtype=torch.float64)
    rois = boxes_for(8, 6, torch.float64)
    output, argmax = torch.ops.torchvision.roi_pool(x, rois, 0.8, 3, 2)
    expected, expected_argmax = loop_roi_pool(x, rois, 0.8, 3, 2)
    assert_cpu_close(output, expected, 0)
    assert torch.equal(argmax, expected_argmax)
    assert_cpu_close(ops.ps_roi_pool(x, rois, (3, 2), 0.8), loop_ps_roi_pool(x, rois, 0.8, 3, 2), 1e-12)


def test_cpu_nms_follows_the_cxx_kernel():
    boxes = boxes_for(40, 10)[:, 1:]
    scores = torch.rand(40)
    scores[5] = scores[7]  # a tie keeps the sort's (stable) order
    for threshold in (0.0, 0.3, 0.7):
        assert torch.equal(ops.nms(boxes, scores, threshold), loop_nms(boxes, scores, threshold))


def test_deform_conv2d_kernels_read_the_scalars_in_the_schemas_order():
    tensor = torch._C.TensorType.get()
    for op in (torch.ops.torchvision.deform_conv2d, torch.ops.torchvision._deform_conv2d_backward):
        scalars = [a.name for a in op.default._schema.arguments if not a.type.isSubtypeOf(tensor)]
        assert tuple(scalars) == DeformConv2dScalars._fields, op


@pytest.mark.parametrize("geometry", sorted(DEFORM_GEOMETRIES))
@pytest.mark.parametrize("use_mask", [True, False])
def test_cpu_deform_conv2d_follows_the_cxx_kernel(use_mask, geometry):
    x, weight, offset, mask, bias = deform_inputs(torch.float64, use_mask, geometry)
    actual = deform_conv2d(geometry)(x, weight, offset, mask, bias)
    expected = loop_deform_conv2d(x, weight, offset, mask, bias, *DEFORM_GEOMETRIES[geometry])
    assert_cpu_close(actual, expected, 1e-10)


def test_cpu_backwards_are_the_gradients():
    x = torch.randn(2, 8, 7, 6, dtype=torch.float64, requires_grad=True)
    rois = boxes_for(6, 6, torch.float64)
    rois[:, 1:] = rois[:, 1:].clamp(0.3, 5.2)  # inside the map: ps_roi_pool's forward and backward clip alike
    for op in (
        lambda x: ops.roi_align(x, rois, (2, 2), 0.8, 2, True),
        lambda x: ops.roi_align(x, rois, (2, 2), 0.8, -1, False),
        lambda x: ops.ps_roi_align(x, rois, (2, 2), 0.8, 2),
        lambda x: ops.roi_pool(x, rois, (2, 2), 0.8),
        lambda x: ops.ps_roi_pool(x, rois, (2, 2), 0.8),
    ):
        assert torch.autograd.gradcheck(op, (x,))


@pytest.mark.parametrize("geometry", sorted(DEFORM_GEOMETRIES))
@pytest.mark.parametrize("use_mask", [True, False])
def test_cpu_deform_conv2d_backward_is_the_gradient(use_mask, geometry):
    inputs = [t.requires_grad_() if t is not None else None for t in deform_inputs(torch.float64, use_mask, geometry)]
    # fast_mode: one random projection of the Jacobian, not one forward per input element.
    assert torch.autograd.gradcheck(deform_conv2d(geometry), inputs, fast_mode=True)


# --- tpu against CPU ---------------------------------------------------------


def _run(mode, fn, *args):
    if mode == "compiled":
        return torch.compile(fn, backend="tpu", dynamic=False)(*args)
    with torch_tpu.eager_mode(mode):
        return fn(*args)


def check_forward_and_backward(fn, inputs, mode, differentiable=(0,), atol=ATOL, rtol=RTOL):
    """fn(*inputs) and the gradients of a weighted sum of its first output on
    tpu against CPU."""

    def run_on(device):
        args = [t.detach().to(device) if isinstance(t, torch.Tensor) else t for t in inputs]
        for i in differentiable:
            args[i].requires_grad_()

        def loss(*a):
            out = fn(*a)
            first = out[0] if isinstance(out, tuple) else out
            weights = torch.linspace(-1, 2, first.numel(), device=first.device).reshape(first.shape)
            return out, (first * weights).sum()

        out, total = loss(*args) if device == "cpu" else _run(mode, loss, *args)
        grads = torch.autograd.grad(total, [args[i] for i in differentiable])
        return out, grads

    expected_out, expected_grads = run_on("cpu")
    actual_out, actual_grads = run_on("tpu")
    assert_close(actual_out, expected_out, atol, rtol)
    assert_close(list(actual_grads), list(expected_grads), atol, rtol)


MODES = ["strict", "defer_and_fuse", "compiled"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_on_tpu_matches_cpu(mode, aligned):
    x, rois = torch.randn(2, 3, 9, 8), boxes_for(7, 8)
    check_forward_and_backward(lambda x, r: ops.roi_align(x, r, (3, 2), 0.7, 2, aligned), [x, rois], mode)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_roi_align_with_adaptive_sampling_on_tpu_matches_cpu(mode):
    x, rois = torch.randn(2, 3, 9, 8), boxes_for(7, 8)
    check_forward_and_backward(lambda x, r: ops.roi_align(x, r, (3, 2), 0.7, -1, False), [x, rois], mode)


@pytest.mark.parametrize("mode", MODES)
def test_ps_roi_align_on_tpu_matches_cpu(mode):
    x, rois = torch.randn(2, 12, 9, 8), boxes_for(7, 8)
    rois[0, 3:] = rois[0, 1:3] + 1.0  # every RoI has samples (an empty grid is NaN, 0 / 0)
    check_forward_and_backward(lambda x, r: ops.ps_roi_align(x, r, (3, 2), 0.7, 2), [x, rois], mode)


@pytest.mark.parametrize("mode", MODES)
def test_roi_pool_on_tpu_matches_cpu(mode):
    x, rois = torch.randn(2, 3, 9, 8), boxes_for(7, 8)
    check_forward_and_backward(lambda x, r: torch.ops.torchvision.roi_pool(x, r, 0.7, 3, 2), [x, rois], mode)


@pytest.mark.parametrize("mode", MODES)
def test_ps_roi_pool_on_tpu_matches_cpu(mode):
    x, rois = torch.randn(2, 12, 9, 8), boxes_for(7, 8)
    check_forward_and_backward(lambda x, r: ops.ps_roi_pool(x, r, (3, 2), 0.7), [x, rois], mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("geometry", sorted(DEFORM_GEOMETRIES))
@pytest.mark.parametrize("use_mask", [True, False])
def test_deform_conv2d_on_tpu_matches_cpu(mode, use_mask, geometry):
    differentiable = (0, 1, 2, 3, 4) if use_mask else (0, 1, 2, 4)
    check_forward_and_backward(
        deform_conv2d(geometry),
        list(deform_inputs(use_mask=use_mask, geometry=geometry)),
        mode,
        differentiable,
        atol=1e-4,
    )


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_nms_and_batched_nms_on_tpu_match_cpu(mode):
    boxes, scores = boxes_for(60, 12)[:, 1:], torch.rand(60)
    classes = torch.randint(0, 3, (60,))
    with torch_tpu.eager_mode(mode):
        kept = ops.nms(boxes.to("tpu"), scores.to("tpu"), 0.4)
        batched = ops.batched_nms(boxes.to("tpu"), scores.to("tpu"), classes.to("tpu"), 0.4)
    assert kept.device.type == "tpu"
    assert torch.equal(kept.cpu(), ops.nms(boxes, scores, 0.4))
    assert torch.equal(batched.cpu(), ops.batched_nms(boxes, scores, classes, 0.4))


def test_nms_in_a_compiled_function_matches_cpu():
    boxes, scores = boxes_for(30, 12)[:, 1:], torch.rand(30)
    fn = lambda b, s: ops.nms(b * 1.0, s, 0.5)  # noqa: E731
    compiled = torch.compile(fn, backend="tpu")(boxes.to("tpu"), scores.to("tpu"))
    assert torch.equal(compiled.cpu(), fn(boxes, scores))


def test_roi_align_and_nms_under_autocast_run_in_float32_as_on_cpu():
    x, rois = torch.randn(2, 3, 9, 8).bfloat16(), boxes_for(7, 8)
    boxes, scores = boxes_for(20, 12)[:, 1:].bfloat16(), torch.rand(20)
    results = {}
    for device in ("cpu", "tpu"):
        with torch.autocast(device, dtype=torch.bfloat16):
            pooled = ops.roi_align(x.to(device), rois.to(device), (3, 2), 0.7, 2)
            kept = ops.nms(boxes.to(device), scores.to(device), 0.5)
        results[device] = pooled, kept
    assert results["tpu"][0].dtype == torch.bfloat16
    assert_close(results["tpu"][0], results["cpu"][0], 1e-2, 1e-2)
    assert torch.equal(results["tpu"][1].cpu(), results["cpu"][1])


# --- bad arguments -------------------------------------------------------------


def _deform_with_offset_channels(x, channels):
    device = x.device
    weight, bias = torch.ones(2, 3, 1, 1, device=device), torch.zeros(2, device=device)
    offset, mask = torch.zeros(1, channels, 4, 4, device=device), torch.zeros(1, 1, device=device)
    return torch.ops.torchvision.deform_conv2d(x, weight, offset, mask, bias, 1, 1, 0, 0, 1, 1, 1, 1, False)


BAD_CALLS = {
    "rois without the batch column": (
        lambda x, r: torch.ops.torchvision.roi_align(x, r[:, 1:], 1.0, 2, 2, 2, False),
        "rois must have shape as Tensor[K, 5]",
    ),
    "rois of another dtype": (
        lambda x, r: torch.ops.torchvision.roi_align(x, r.double(), 1.0, 2, 2, 2, False),
        "input should have the same type as rois",
    ),
    "channels not a multiple of the bins": (
        lambda x, r: torch.ops.torchvision.ps_roi_align(x, r, 1.0, 2, 2, 2),
        "input channels must be a multiple of pooling height * pooling width",
    ),
    "nms boxes of three coordinates": (
        lambda x, r: torch.ops.torchvision.nms(r[:, :3], r[:, 0], 0.5),
        "boxes should have 4 elements in dimension 1, got 3",
    ),
    "deform_conv2d with a zero stride": (
        lambda x, r: torch.ops.torchvision.deform_conv2d(
            x,
            x.new_ones(2, 3, 1, 1),
            x.new_zeros(1, 2, 4, 4),
            x.new_zeros(1, 1),
            x.new_zeros(2),
            0,
            1,
            0,
            0,
            1,
            1,
            1,
            1,
            False,
        ),
        "stride_h: 0 stride_w: 1",
    ),
    "deform_conv2d offset of the wrong size": (
        lambda x, r: _deform_with_offset_channels(x, 4),
        "offset.shape[1] is not valid: got: 4 expected: 2",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_arguments_raise_as_torchvision_does(case):
    call, message = BAD_CALLS[case]
    x, rois = torch.randn(1, 3, 4, 4), boxes_for(3, 4, batch=1)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError) as raised:
            call(x.to(device), rois.to(device))
        assert message in str(raised.value), device
