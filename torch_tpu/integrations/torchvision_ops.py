"""torchvision's operators (`torchvision::nms`, `roi_align`, `roi_pool`,
`ps_roi_align`, `ps_roi_pool`, `deform_conv2d` and their backwards) on tpu,
and on CPU where torchvision's own C++ extension cannot load.

torchvision's PyPI wheels are built against CUDA torch. Next to the CPU torch
wheel their extension (`torchvision/_C.so`) does not load (it links
`libc10_cuda.so`), `torchvision.extension._has_ops()` is False, and
torchvision 0.28 then fails at import: its `_meta_registrations` registers a
fake kernel for `torchvision::nms`, which does not exist. Its models are pure
Python. So, right after `torchvision.extension` runs (the post-import hook of
torch_tpu/integrations/__init__.py; torch_tpu itself loads at `import torch`):

- where the extension did not load, the operators' schemas are defined here,
  exactly as torchvision's csrc/ops/*.cpp define them, with CPU kernels (the
  reference below) and `_has_ops()` answers True; torchvision's own
  `_meta_registrations` (fake kernels for torch.compile) and
  `_autograd_registrations` (the backward ops, autocast) then register as
  they do with its extension. `qnms` and `qroi_align` (quantized tensors) get
  their schemas only, which its meta registrations need; calling them raises
  NotImplementedError.
- either way, the operators get tpu (PrivateUse1) kernels, as a device
  backend registers its own.

The kernels are one reference per operator, vectorized compositions of ATen
ops that follow torchvision's C++ CPU kernels exactly (sampling grid,
`aligned`, the clipping and rounding of bin edges, `-FLT_MAX` for empty max
pools, argmax order, NaN-safe range tests); on tpu each ATen op is a lowered
device op, so they run in Strict, DeferAndFuse and compiled graphs alike.
Two places read device values on the host, because their results' sizes
depend on data:

- `nms` (its output length is data): the IoU matrix of the score-sorted
  boxes is computed on the device and copied to the host, which runs the
  greedy suppression (as torchvision's CUDA kernel does with its mask), and
  the kept indices go back to the device;
- `roi_align` / `ps_roi_align` with `sampling_ratio <= 0` (the sampling grid
  is `ceil(roi size / pooled size)` per RoI): the largest grid is read to
  size the samples. torchvision's detection models pass `sampling_ratio=2`.
"""

import math
import typing

import numpy as np
import torch

# Exactly the schemas of torchvision 0.28's csrc/ops/*.cpp.
SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, bool aligned) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) "
    "-> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
    "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
    "SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, "
    "SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    # Quantized tensors only: defined so torchvision's meta registrations find them.
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, float rois_scale, "
    "int rois_zero_point, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
    "bool aligned) -> Tensor",
    # torchvision/csrc/vision.cpp: the CUDA version the extension was built
    # with, -1 without CUDA (torchvision.version asks at import).
    "_cuda_version() -> int",
)

_libraries = []  # torch.library.Library objects live as long as their registrations


def install(when_imported):
    when_imported("torchvision.extension", _complete_extension)


def defined_here():
    """Whether the torchvision schemas and CPU kernels are this module's
    (torchvision's extension did not load)."""
    return any(lib.kind == "DEF" for lib in _libraries)


def _complete_extension(extension):
    if not extension._has_ops():
        definitions = torch.library.Library("torchvision", "DEF")
        for schema in SCHEMAS:
            definitions.define(schema)
        _libraries.append(definitions)
        _register_kernels("CPU")
        definitions.impl("_cuda_version", lambda: -1, "CompositeExplicitAutograd")
        extension._has_ops = lambda: True
    _register_kernels("PrivateUse1")
    autocast = torch.library.Library("torchvision", "IMPL")
    autocast.impl("nms", _autocast_nms, "AutocastPrivateUse1")
    autocast.impl("roi_align", _autocast_roi_align, "AutocastPrivateUse1")
    _libraries.append(autocast)


def _register_kernels(dispatch_key):
    lib = torch.library.Library("torchvision", "IMPL")
    for name, kernel in KERNELS.items():
        lib.impl(name, kernel, dispatch_key)
    _libraries.append(lib)


def _check(condition, message):
    if not condition:
        raise RuntimeError(message)


def _check_same_device(*tensors):
    devices = {t.device for t in tensors}
    _check(
        len(devices) == 1,
        "Expected all tensors to be on the same device, but found at least two devices, "
        + " and ".join(str(d) for d in sorted(devices, key=str)[:2])
        + "!",
    )


def _check_floating(tensor, kernel):
    _check(
        tensor.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16),
        f"\"{kernel}\" not implemented for '{str(tensor.dtype).removeprefix('torch.').capitalize()}'",
    )


def _round_half_away(x):
    """C's round(): halves away from zero (torch.round rounds them to even)."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def _batch_index(rois):
    # C++ reads `int roi_batch_ind = rois[n][0]`: truncation toward zero.
    return rois[:, 0].to(torch.int64)


# --- autocast: as torchvision's for CPU and CUDA, nms and roi_align in float32 -------

_AUTOCAST_TPU = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _float32(tensor):
    # at::autocast::cached_cast(kFloat, ...): floating tensors other than float64.
    return tensor.float() if tensor.is_floating_point() and tensor.dtype != torch.float64 else tensor


def _autocast_nms(dets, scores, iou_threshold):
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_TPU):
        return torch.ops.torchvision.nms(_float32(dets), _float32(scores), iou_threshold)


def _autocast_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_TPU):
        out = torch.ops.torchvision.roi_align(
            _float32(input), _float32(rois), spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned
        )
    return out.to(input.dtype)


# --- nms ---------------------------------------------------------------------


def nms(dets, scores, iou_threshold):
    _check(dets.dim() == 2, f"boxes should be a 2d tensor, got {dets.dim()}D")
    _check(dets.size(1) == 4, f"boxes should have 4 elements in dimension 1, got {dets.size(1)}")
    _check(scores.dim() == 1, f"scores should be a 1d tensor, got {scores.dim()}D")
    _check(
        dets.size(0) == scores.size(0),
        f"boxes and scores should have same number of elements in dimension 0, got {dets.size(0)} and {scores.size(0)}",
    )
    _check_same_device(dets, scores)
    _check_floating(dets, "nms_kernel")
    _check(dets.dtype == scores.dtype, "dets should have the same type as scores")
    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.int64, device=dets.device)
    order = torch.sort(scores, dim=0, descending=True, stable=True).indices
    x1, y1, x2, y2 = dets.index_select(0, order).unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    width = (torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])).clamp_min(0)
    height = (torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])).clamp_min(0)
    inter = width * height
    iou = inter / (areas[:, None] + areas[None, :] - inter)
    # The host round trip: the kept count is data. C++ compares the box
    # dtype's IoU with the double threshold, so the comparison is in float64.
    overlaps = iou.cpu().numpy().astype(np.float64) > iou_threshold
    suppressed = np.zeros(len(overlaps), dtype=bool)
    kept = []
    for i in range(len(overlaps)):
        if not suppressed[i]:
            kept.append(i)
            suppressed |= overlaps[i]
    kept = torch.tensor(kept, dtype=torch.int64).to(dets.device)
    return order.index_select(0, kept)


# --- roi_align and ps_roi_align: bilinear samples on a grid per bin ---------


def _roi_boxes(rois, spatial_scale, offset):
    """Scaled RoI corners, as C++ computes them in the RoI's dtype."""
    return [rois[:, i] * spatial_scale - offset for i in (1, 2, 3, 4)]


def _grid_sizes(roi_size, pooled, sampling_ratio):
    """Samples per bin along one axis, per RoI: `sampling_ratio`, or
    ceil(roi_size / pooled) (C++ truncates that double to int)."""
    if sampling_ratio > 0:
        return torch.full_like(roi_size, sampling_ratio, dtype=torch.int64), sampling_ratio
    grid = torch.ceil(roi_size / pooled).to(torch.int64)
    largest = int(grid.max().item()) if grid.numel() else 0  # the documented host read
    return grid, max(largest, 0)


def _axis_samples(start, bin_size, grid, largest, pooled, size):
    """For one axis: (index, weight) of the two neighbours of every sample,
    shapes [K, pooled, largest, 2]. A sample outside [-1, size] (NaN
    included), or beyond its RoI's grid, weighs 0; as in C++, a coordinate
    at or below 0 is 0 and one at or past size - 1 is size - 1."""
    p = torch.arange(pooled, device=start.device, dtype=start.dtype)[None, :, None]
    i = torch.arange(largest, device=start.device, dtype=start.dtype)[None, None, :]
    grid_t = grid.to(start.dtype)[:, None, None]
    coord = (start[:, None, None] + p * bin_size[:, None, None]) + (i + 0.5) * bin_size[:, None, None] / grid_t
    inside = (coord >= -1.0) & (coord <= size) & (i < grid_t)
    coord = torch.where(inside, coord, torch.zeros_like(coord)).clamp_min(0)
    low = coord.floor().to(torch.int64)
    at_edge = low >= size - 1
    low = torch.where(at_edge, torch.full_like(low, size - 1), low)
    high = torch.where(at_edge, low, low + 1)
    coord = torch.where(at_edge, low.to(coord.dtype), coord)
    frac = coord - low.to(coord.dtype)
    zero = torch.zeros_like(frac)
    weight = torch.stack([torch.where(inside, 1.0 - frac, zero), torch.where(inside, frac, zero)], -1)
    return torch.stack([low, high], -1), weight


def _bin_samples(rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, height, width, clamp_1):
    """Positions (y * width + x) and weights of every bilinear tap, shaped
    [K, PH, PW, samples * 4], and the sample count per RoI."""
    x1, y1, x2, y2 = _roi_boxes(rois, spatial_scale, 0.5 if aligned else 0.0)
    roi_width, roi_height = x2 - x1, y2 - y1
    if clamp_1:  # roi_align without `aligned`: malformed RoIs count as 1x1
        roi_width, roi_height = roi_width.clamp_min(1.0), roi_height.clamp_min(1.0)
    bin_h, bin_w = roi_height / pooled_height, roi_width / pooled_width
    grid_h, largest_h = _grid_sizes(roi_height, pooled_height, sampling_ratio)
    grid_w, largest_w = _grid_sizes(roi_width, pooled_width, sampling_ratio)
    y_index, y_weight = _axis_samples(y1, bin_h, grid_h, largest_h, pooled_height, height)
    x_index, x_weight = _axis_samples(x1, bin_w, grid_w, largest_w, pooled_width, width)
    k = rois.shape[0]
    # [K, PH, 1, Gy, 1, 2, 1] against [K, 1, PW, 1, Gx, 1, 2]
    position = y_index[:, :, None, :, None, :, None] * width + x_index[:, None, :, None, :, None, :]
    weight = y_weight[:, :, None, :, None, :, None] * x_weight[:, None, :, None, :, None, :]
    position = position.reshape(k, pooled_height, pooled_width, -1)
    weight = weight.reshape(k, pooled_height, pooled_width, -1)
    return position, weight, grid_h * grid_w


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    _check(rois.size(1) == 5, "rois must have shape as Tensor[K, 5]")
    _check(input.dtype == rois.dtype, "input should have the same type as rois")
    _check_same_device(input, rois)
    _check_floating(input, "roi_align_forward_kernel")
    n, c, h, w = input.shape
    k = rois.shape[0]
    if k == 0 or c == 0 or pooled_height * pooled_width == 0:
        return input.new_zeros((k, c, pooled_height, pooled_width))
    position, weight, count = _bin_samples(
        rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, h, w, clamp_1=not aligned
    )
    rows = (_batch_index(rois)[:, None, None, None] * (h * w) + position).reshape(-1)
    pixels = input.permute(0, 2, 3, 1).reshape(n * h * w, c).index_select(0, rows)
    pixels = pixels.reshape(k, pooled_height, pooled_width, -1, c)
    total = (pixels * weight[..., None]).sum(3)
    count = count.clamp_min(1).to(input.dtype)[:, None, None, None]
    return (total / count).permute(0, 3, 1, 2).contiguous()


def _roi_align_backward(
    grad, rois, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width, sampling_ratio, aligned
):
    _check(grad.dtype == rois.dtype, "grad should have the same type as rois")
    _check_same_device(grad, rois)
    grad_input = grad.new_zeros((batch_size * height * width, channels))
    if grad.numel() == 0:
        return grad_input.reshape(batch_size, height, width, channels).permute(0, 3, 1, 2).contiguous()
    position, weight, count = _bin_samples(
        rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, height, width, clamp_1=not aligned
    )
    rows = (_batch_index(rois)[:, None, None, None] * (height * width) + position).reshape(-1)
    per_bin = grad.permute(0, 2, 3, 1)[:, :, :, None, :]  # [K, PH, PW, 1, C]
    # An empty grid has no samples (every weight is 0): count 1 keeps 0 / 0 out.
    count = count.clamp_min(1).to(grad.dtype)[:, None, None, None, None]
    contributions = per_bin * weight[..., None] / count
    grad_input.index_add_(0, rows, contributions.reshape(-1, channels))
    return grad_input.reshape(batch_size, height, width, channels).permute(0, 3, 1, 2).contiguous()


def _position_sensitive_channels(k, channels_out, pooled_height, pooled_width, device):
    """Input channel of output (k, c_out, ph, pw): (c_out * PH + ph) * PW + pw."""
    channels = torch.arange(channels_out * pooled_height * pooled_width, device=device, dtype=torch.int32)
    return channels.reshape(1, channels_out, pooled_height, pooled_width).expand(k, -1, -1, -1).contiguous()


def _check_position_sensitive(input, rois, pooled_height, pooled_width, same_type_message):
    _check(rois.size(1) == 5, "Tensor rois should have shape as Tensor[K, 5]")
    _check(input.dtype == rois.dtype, same_type_message)
    _check_same_device(input, rois)
    _check(
        input.size(1) % (pooled_height * pooled_width) == 0,
        "input channels must be a multiple of pooling height * pooling width",
    )


def ps_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
    _check_position_sensitive(input, rois, pooled_height, pooled_width, "input should have the same type as rois")
    _check_floating(input, "ps_roi_align_forward_kernel")
    n, c, h, w = input.shape
    k = rois.shape[0]
    channels_out = c // (pooled_height * pooled_width)
    mapping = _position_sensitive_channels(k, channels_out, pooled_height, pooled_width, input.device)
    if mapping.numel() == 0:
        return input.new_zeros(mapping.shape), mapping
    # ps_roi_align always shifts by half a pixel and never forces 1x1 RoIs.
    position, weight, count = _bin_samples(
        rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, True, h, w, clamp_1=False
    )
    plane = (_batch_index(rois)[:, None, None, None] * c + mapping.to(torch.int64)) * (h * w)  # [K, Co, PH, PW]
    index = plane[..., None] + position[:, None]
    taps = input.reshape(-1).index_select(0, index.reshape(-1)).reshape(index.shape)
    total = (taps * weight[:, None]).sum(-1)
    # No clamp: an empty grid divides 0 by 0, as the C++ kernel does.
    return total / count.to(input.dtype)[:, None, None, None], mapping


def _ps_roi_align_backward(
    grad,
    rois,
    channel_mapping,
    spatial_scale,
    pooled_height,
    pooled_width,
    sampling_ratio,
    batch_size,
    channels,
    height,
    width,
):
    _check(grad.dtype == rois.dtype, "grad should have the same type as rois")
    _check_same_device(grad, rois, channel_mapping)
    grad_input = grad.new_zeros(batch_size * channels * height * width)
    if grad.numel() == 0:
        return grad_input.reshape(batch_size, channels, height, width)
    position, weight, count = _bin_samples(
        rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, True, height, width, clamp_1=False
    )
    plane = (_batch_index(rois)[:, None, None, None] * channels + channel_mapping.to(torch.int64)) * (height * width)
    index = plane[..., None] + position[:, None]
    count = count.clamp_min(1).to(grad.dtype)[:, None, None, None, None]  # no samples when 0
    contributions = grad[..., None] * weight[:, None] / count
    grad_input.index_add_(0, index.reshape(-1), contributions.reshape(-1))
    return grad_input.reshape(batch_size, channels, height, width)


# --- roi_pool and ps_roi_pool: integer bins ----------------------------------


def _integer_bins(start, roi_size, pooled, limit):
    """Each bin's cell range [lo, hi), [K, pooled]: bin p spans
    [floor(p * bin), ceil((p + 1) * bin)) from the RoI's start, clipped to
    [0, limit]."""
    bin_size = roi_size / pooled
    p = torch.arange(pooled, device=start.device, dtype=bin_size.dtype)[None, :]
    lo = torch.floor(p * bin_size[:, None]).to(torch.int64) + start[:, None]
    hi = torch.ceil((p + 1) * bin_size[:, None]).to(torch.int64) + start[:, None]
    lo, hi = lo.clamp(0, limit), hi.clamp(0, limit)
    return lo, hi


def _cells(lo, hi, size):
    cell = torch.arange(size, device=lo.device)[None, None, :]
    return (cell >= lo[..., None]) & (cell < hi[..., None])


def _pool_rois(rois, spatial_scale, plus_one):
    x1, y1, x2, y2 = (_round_half_away(rois[:, i] * spatial_scale).to(torch.int64) for i in (1, 2, 3, 4))
    extra = 1 if plus_one else 0
    roi_width = (x2 - x1 + extra).clamp_min(1)
    roi_height = (y2 - y1 + extra).clamp_min(1)
    return x1, y1, roi_width.to(rois.dtype), roi_height.to(rois.dtype)


def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    _check(input.dtype == rois.dtype, "input and rois must have the same dtype")
    _check_same_device(input, rois)
    _check(
        input.dtype in (torch.float32, torch.float64) or input.device.type != "cpu",
        "roi_pool only supports float and double types",
    )
    n, c, h, w = input.shape
    k = rois.shape[0]
    shape = (k, c, pooled_height, pooled_width)
    if k * c * pooled_height * pooled_width == 0:
        return input.new_zeros(shape), torch.zeros(shape, dtype=torch.int32, device=input.device)
    x1, y1, roi_width, roi_height = _pool_rois(rois, spatial_scale, plus_one=True)
    h_lo, h_hi = _integer_bins(y1, roi_height, pooled_height, h)
    w_lo, w_hi = _integer_bins(x1, roi_width, pooled_width, w)
    in_h, in_w = _cells(h_lo, h_hi, h), _cells(w_lo, w_hi, w)  # [K, PH, H], [K, PW, W]
    empty = (h_hi <= h_lo)[:, :, None] | (w_hi <= w_lo)[:, None, :]  # [K, PH, PW]
    planes = input.index_select(0, _batch_index(rois))  # [K, C, H, W]
    # C++ keeps the first cell (row-major) strictly above -FLT_MAX: the
    # first column per row and pooled column, then the first row.
    floor_value = torch.tensor(-torch.finfo(torch.float32).max, dtype=input.dtype, device=input.device)
    below = torch.full((), -math.inf, dtype=input.dtype, device=input.device)
    rows = torch.where(in_w[:, None, None, :, :], planes[:, :, :, None, :], below)  # [K, C, H, PW, W]
    row_max = rows.amax(-1)
    w_index = torch.arange(w, device=input.device)
    row_arg = torch.where(rows == row_max[..., None], w_index, w).amin(-1)  # [K, C, H, PW]
    cols = torch.where(in_h[:, None, :, None, :], row_max.permute(0, 1, 3, 2)[:, :, None, :, :], below)
    best = cols.amax(-1)  # [K, C, PH, PW]
    h_index = torch.arange(h, device=input.device)
    best_row = torch.where((cols == best[..., None]) & (cols > floor_value), h_index, h).amin(-1)
    found = best_row < h
    row_arg = row_arg.permute(0, 1, 3, 2)[:, :, None].expand(-1, -1, pooled_height, -1, -1)  # [K, C, PH, PW, H]
    best_col = row_arg.gather(-1, best_row.clamp_max(h - 1)[..., None])[..., 0]
    empty = empty[:, None]
    output = torch.where(found, best, floor_value)
    output = torch.where(empty, torch.zeros_like(output), output)
    argmax = torch.where(found & ~empty, best_row * w + best_col, -1).to(torch.int32)
    return output, argmax


def _roi_pool_backward(
    grad, rois, argmax, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width
):
    _check(rois.size(1) == 5, "Tensor rois should have shape as Tensor[K, 5]")
    _check(grad.dtype == rois.dtype, "grad and rois must have the same dtype")
    _check_same_device(grad, rois, argmax)
    grad_input = grad.new_zeros(batch_size * channels * height * width)
    if grad.numel() == 0:
        return grad_input.reshape(batch_size, channels, height, width)
    plane = _batch_index(rois)[:, None] * channels + torch.arange(channels, device=grad.device)[None, :]
    hit = argmax.to(torch.int64) >= 0
    index = plane[:, :, None, None] * (height * width) + argmax.to(torch.int64).clamp_min(0)
    values = torch.where(hit, grad, torch.zeros_like(grad))
    grad_input.index_add_(0, index.reshape(-1), values.reshape(-1))
    return grad_input.reshape(batch_size, channels, height, width)


def _ps_pool_bins(rois, spatial_scale, pooled_height, pooled_width, height, width, forward):
    """ps_roi_pool's bins. Its C++ forward clips bin edges to height - 1 and
    width - 1, its backward to height and width; both kept as they are."""
    x1, y1, roi_width, roi_height = _pool_rois(rois, spatial_scale, plus_one=False)
    edge = 1 if forward else 0
    h_lo, h_hi = _integer_bins(y1, roi_height, pooled_height, height - edge)
    w_lo, w_hi = _integer_bins(x1, roi_width, pooled_width, width - edge)
    cells = _cells(h_lo, h_hi, height)[:, :, None, :, None] & _cells(w_lo, w_hi, width)[:, None, :, None, :]
    area = ((h_hi - h_lo)[:, :, None] * (w_hi - w_lo)[:, None, :]).to(rois.dtype)  # [K, PH, PW]
    empty = (h_hi <= h_lo)[:, :, None] | (w_hi <= w_lo)[:, None, :]
    return cells, area, empty  # cells: [K, PH, PW, H, W]


def ps_roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    _check_position_sensitive(input, rois, pooled_height, pooled_width, "input and rois must have the same dtype")
    _check(
        input.dtype in (torch.float32, torch.float64) or input.device.type != "cpu",
        "ps_roi_pool only supports float and double types",
    )
    n, c, h, w = input.shape
    k = rois.shape[0]
    channels_out = c // (pooled_height * pooled_width)
    mapping = _position_sensitive_channels(k, channels_out, pooled_height, pooled_width, input.device)
    if mapping.numel() == 0:
        return input.new_zeros(mapping.shape), mapping
    cells, area, empty = _ps_pool_bins(rois, spatial_scale, pooled_height, pooled_width, h, w, forward=True)
    plane = _batch_index(rois)[:, None, None, None] * c + mapping.to(torch.int64)  # [K, Co, PH, PW]
    planes = input.reshape(n * c, h, w).index_select(0, plane.reshape(-1)).reshape(*plane.shape, h, w)
    total = torch.where(cells[:, None], planes, torch.zeros_like(planes)).sum((-2, -1))
    output = torch.where(empty[:, None], torch.zeros_like(total), total / area[:, None])
    return output, mapping


def _ps_roi_pool_backward(
    grad, rois, channel_mapping, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width
):
    _check(grad.dtype == rois.dtype, "grad and rois must have the same dtype")
    _check_same_device(grad, rois, channel_mapping)
    grad_input = grad.new_zeros(batch_size * channels, height, width)
    if grad.numel() == 0:
        return grad_input.reshape(batch_size, channels, height, width)
    cells, area, empty = _ps_pool_bins(rois, spatial_scale, pooled_height, pooled_width, height, width, forward=False)
    per_cell = torch.where(empty[:, None], torch.zeros_like(grad), grad / area[:, None])  # [K, Co, PH, PW]
    zero = torch.zeros((), dtype=grad.dtype, device=grad.device)
    spread = torch.where(cells[:, None], per_cell[..., None, None], zero)
    plane = _batch_index(rois)[:, None, None, None] * channels + channel_mapping.to(torch.int64)
    grad_input.index_add_(0, plane.reshape(-1), spread.reshape(-1, height, width))
    return grad_input.reshape(batch_size, channels, height, width)


# --- deform_conv2d -----------------------------------------------------------


class DeformConv2dScalars(typing.NamedTuple):
    """deform_conv2d's and _deform_conv2d_backward's arguments after their
    tensors: the same nine, named and ordered as in both schemas, so that
    both kernels read them through this one type."""

    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    dilation_h: int
    dilation_w: int
    groups: int
    offset_groups: int
    use_mask: bool

    @property
    def stride(self):
        return self.stride_h, self.stride_w

    @property
    def pad(self):
        return self.pad_h, self.pad_w

    @property
    def dilation(self):
        return self.dilation_h, self.dilation_w

    def output_size(self, input, weight):
        """(out_h, out_w), as deform_conv2d_kernel.cpp computes them."""
        (in_h, in_w), (weight_h, weight_w) = input.shape[2:], weight.shape[2:]
        out_h = (in_h + 2 * self.pad_h - (self.dilation_h * (weight_h - 1) + 1)) // self.stride_h + 1
        out_w = (in_w + 2 * self.pad_w - (self.dilation_w * (weight_w - 1) + 1)) // self.stride_w + 1
        return out_h, out_w


def _check_deform_conv2d(input, weight, offset, mask, args):
    groups, offset_groups, use_mask = args.groups, args.offset_groups, args.use_mask
    _check(input.dim() == 4, "Expected input_c.ndimension() == 4 to be true, but got false.")
    _check(offset.dim() == 4, "Expected offset_c.ndimension() == 4 to be true, but got false.")
    _check(not use_mask or mask.dim() == 4, "Expected !use_mask || mask_c.ndimension() == 4 to be true, but got false.")
    _check(weight.dim() == 4, "Expected weight_c.ndimension() == 4 to be true, but got false.")
    _check_same_device(input, weight, offset, mask)
    _check_floating(input, "deformable_im2col")
    weight_h, weight_w = weight.shape[2], weight.shape[3]
    _check(weight_h > 0 and weight_w > 0, f"weight_h: {weight_h} weight_w: {weight_w}")
    _check(args.stride_h > 0 and args.stride_w > 0, f"stride_h: {args.stride_h} stride_w: {args.stride_w}")
    _check(args.pad_h >= 0 and args.pad_w >= 0, f"pad_h: {args.pad_h} pad_w: {args.pad_w}")
    _check(args.dilation_h > 0 and args.dilation_w > 0, f"dilation_h: {args.dilation_h} dilation_w: {args.dilation_w}")
    # After the checks (C++ computes it before them, dividing by a zero stride).
    out_h, out_w = args.output_size(input, weight)
    _check(
        weight.shape[1] * groups == input.shape[1],
        "Expected weight_c.size(1) * n_weight_grps == input_c.size(1) to be true, but got false.",
    )
    _check(weight.shape[0] % groups == 0, "Expected weight_c.size(0) % n_weight_grps == 0 to be true, but got false.")
    taps = weight_h * weight_w
    _check(
        offset.shape[1] == offset_groups * 2 * taps,
        f"offset.shape[1] is not valid: got: {offset.shape[1]} expected: {offset_groups * 2 * taps}",
    )
    if use_mask:
        _check(
            mask.shape[1] == offset_groups * taps,
            f"mask.shape[1] is not valid: got: {mask.shape[1]} expected: {offset_groups * taps}",
        )
    _check(
        input.shape[1] % offset_groups == 0,
        "Expected input_c.size(1) % n_offset_grps == 0 to be true, but got false.",
    )
    _check(offset.shape[0] == input.shape[0], "invalid batch size of offset")
    _check(
        offset.shape[2] == out_h and offset.shape[3] == out_w,
        f"offset output dims: ({offset.shape[2]}, {offset.shape[3]}) - computed output dims: ({out_h}, {out_w})",
    )
    _check(mask.shape[0] == input.shape[0], "invalid batch size of mask")
    if use_mask:
        _check(
            mask.shape[2] == out_h and mask.shape[3] == out_w,
            f"mask output dims: ({mask.shape[2]}, {mask.shape[3]}) - computed output dims: ({out_h}, {out_w})",
        )
    _check(out_h > 0 and out_w > 0, f"Calculated output size too small - out_h: {out_h} out_w: {out_w}")
    return out_h, out_w


def _deform_taps(input, weight, offset, args, out_h, out_w):
    """The four bilinear neighbours of every deformed sampling point.

    Returns values [B, og, Cg, T, OH, OW, 4] and weights [B, og, 1, T, OH,
    OW, 4], both 0 at neighbours outside the image; whether each sample is
    inside (-1, size) (outside it interpolates to 0); the derivatives of the
    interpolated value along y and x (torchvision's get_coordinate_weight,
    which ignores the sample's own range test); and the neighbours' positions
    as a gather index into [B, og, Cg, H * W]."""
    b, c, h, w = input.shape
    weight_h, weight_w = weight.shape[2], weight.shape[3]
    taps = weight_h * weight_w
    stride, pad, dilation, offset_groups = args.stride, args.pad, args.dilation, args.offset_groups
    offset = offset.reshape(b, offset_groups, taps, 2, out_h, out_w)
    dtype, device = input.dtype, input.device
    ky = torch.arange(weight_h, device=device).repeat_interleave(weight_w) * dilation[0]  # tap i*kw+j -> i*dil
    kx = torch.arange(weight_w, device=device).repeat(weight_h) * dilation[1]
    oy = torch.arange(out_h, device=device) * stride[0] - pad[0]
    ox = torch.arange(out_w, device=device) * stride[1] - pad[1]
    base_y = (oy[None, :, None] + ky[:, None, None]).to(dtype)  # [T, OH, 1]
    base_x = (ox[None, None, :] + kx[:, None, None]).to(dtype)  # [T, 1, OW]
    y = base_y + offset[:, :, :, 0]  # [B, og, T, OH, OW]
    x = base_x + offset[:, :, :, 1]
    inside = (y > -1) & (y < h) & (x > -1) & (x < w)
    y_low, x_low = torch.floor(y), torch.floor(x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    y_low, x_low = y_low.to(torch.int64), x_low.to(torch.int64)
    corner_y = torch.stack([y_low, y_low, y_low + 1, y_low + 1], -1)
    corner_x = torch.stack([x_low, x_low + 1, x_low, x_low + 1], -1)
    valid = (corner_y >= 0) & (corner_y < h) & (corner_x >= 0) & (corner_x < w)
    position = torch.where(valid, corner_y * w + corner_x, 0)  # [B, og, T, OH, OW, 4]
    cg = c // offset_groups
    planes = input.reshape(b, offset_groups, cg, h * w)
    index = position.reshape(b, offset_groups, 1, -1).expand(b, offset_groups, cg, -1)
    values = planes.gather(-1, index).reshape(b, offset_groups, cg, taps, out_h, out_w, 4)
    values = torch.where(valid[:, :, None], values, torch.zeros((), dtype=dtype, device=device))
    weights = torch.stack([hy * hx, hy * lx, ly * hx, ly * lx], -1)
    weights = torch.where(valid, weights, torch.zeros((), dtype=dtype, device=device))[:, :, None]
    v1, v2, v3, v4 = values.unbind(-1)
    dvalue_dy = lx[:, :, None] * (v4 - v2) + hx[:, :, None] * (v3 - v1)
    dvalue_dx = ly[:, :, None] * (v4 - v3) + hy[:, :, None] * (v2 - v1)
    return values, weights, inside[:, :, None], dvalue_dy, dvalue_dx, index


def _grouped(tensor, groups):
    """[B, C, ...] as [B, groups, C / groups, ...]."""
    return tensor.reshape(tensor.shape[0], groups, tensor.shape[1] // groups, *tensor.shape[2:])


def deform_conv2d(input, weight, offset, mask, bias, *scalars):
    args = DeformConv2dScalars(*scalars)
    out_h, out_w = _check_deform_conv2d(input, weight, offset, mask, args)
    b, out_channels = input.shape[0], weight.shape[0]
    if b == 0:
        return input.new_zeros((0, out_channels, out_h, out_w))
    taps = _deform_taps(input, weight, offset, args, out_h, out_w)
    columns = _deform_columns(taps, mask, args)
    out = torch.einsum(
        "gok,bgkp->bgop", weight.reshape(args.groups, out_channels // args.groups, -1), _grouped(columns, args.groups)
    )
    return out.reshape(b, out_channels, out_h, out_w) + bias.reshape(1, out_channels, 1, 1)


def _deform_columns(taps, mask, args):
    """torchvision's deformable im2col from _deform_taps: [B, C * T, OH * OW],
    channel-major."""
    values, weights, inside = taps[:3]
    b, _, _, _, out_h, out_w, _ = values.shape
    sampled = torch.where(inside, (values * weights).sum(-1), torch.zeros((), dtype=values.dtype, device=values.device))
    if args.use_mask:
        sampled = sampled * mask.reshape(b, args.offset_groups, 1, -1, out_h, out_w)
    return sampled.reshape(b, -1, out_h * out_w)


def _deform_conv2d_backward(grad, input, weight, offset, mask, bias, *scalars):
    args = DeformConv2dScalars(*scalars)
    groups, offset_groups = args.groups, args.offset_groups
    b, c, h, w = input.shape
    out_channels = weight.shape[0]
    out_h, out_w = grad.shape[2], grad.shape[3]
    grad_bias = grad.sum((0, 2, 3))
    if b == 0:
        return (
            torch.zeros_like(input),
            torch.zeros_like(weight),
            torch.zeros_like(offset),
            torch.zeros_like(mask),
            grad_bias,
        )
    taps = weight.shape[2] * weight.shape[3]
    grouped_weight = weight.reshape(groups, out_channels // groups, -1)
    grouped_grad = grad.reshape(b, groups, out_channels // groups, out_h * out_w)
    # d out / d columns, [B, C * T, P]: the columns' gradient.
    grad_columns = torch.einsum("gok,bgop->bgkp", grouped_weight, grouped_grad).reshape(b, c * taps, out_h * out_w)
    sampling = _deform_taps(input, weight, offset, args, out_h, out_w)
    columns = _deform_columns(sampling, mask, args)
    grad_weight = torch.einsum("bgop,bgkp->gok", grouped_grad, _grouped(columns, groups)).reshape(weight.shape)

    values, weights, inside, dvalue_dy, dvalue_dx, index = sampling
    cg = c // offset_groups
    grad_columns = grad_columns.reshape(b, offset_groups, cg, taps, out_h, out_w)
    zero = torch.zeros((), dtype=input.dtype, device=input.device)
    if args.use_mask:
        mask_g = mask.reshape(b, offset_groups, 1, taps, out_h, out_w)
        sampled = torch.where(inside, (values * weights).sum(-1), zero)
        grad_mask = (grad_columns * sampled).sum(2).reshape(mask.shape)
        masked_grad = grad_columns * mask_g
    else:
        grad_mask = torch.zeros_like(mask)
        masked_grad = grad_columns
    grad_offset_y = (masked_grad * dvalue_dy).sum(2)
    grad_offset_x = (masked_grad * dvalue_dx).sum(2)
    grad_offset = torch.stack([grad_offset_y, grad_offset_x], 3).reshape(offset.shape)
    # col2im: each tap's gradient to its in-image neighbours (weights are 0 outside).
    spread = torch.where(inside[..., None], masked_grad[..., None] * weights, zero)
    grad_input = torch.zeros(b, offset_groups, cg, h * w, dtype=input.dtype, device=input.device)
    grad_input.scatter_add_(-1, index, spread.reshape(b, offset_groups, cg, -1))
    return grad_input.reshape(input.shape), grad_weight, grad_offset, grad_mask, grad_bias


KERNELS = {
    "nms": nms,
    "roi_align": roi_align,
    "_roi_align_backward": _roi_align_backward,
    "roi_pool": roi_pool,
    "_roi_pool_backward": _roi_pool_backward,
    "ps_roi_align": ps_roi_align,
    "_ps_roi_align_backward": _ps_roi_align_backward,
    "ps_roi_pool": ps_roi_pool,
    "_ps_roi_pool_backward": _ps_roi_pool_backward,
    "deform_conv2d": deform_conv2d,
    "_deform_conv2d_backward": _deform_conv2d_backward,
}
