#include "view_layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace torch_tpu::runtime {

using hlo::Builder;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

int64_t ViewLayout::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ViewLayout::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t ViewLayout::extent() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  return last + 1;
}

namespace {

// A view whose offset is a program input reads and writes its window, the
// storage from the offset to one past its last element, cut out with
// dynamic_slice and put back with dynamic_update_slice, and addresses the
// window as a view at offset 0: the strided read or write inside is the
// same program for every offset. XLA clamps a dynamic start so the window
// fits the operand; a valid view's window always fits its storage (PyTorch
// checks offset + extent against the storage's size when it makes the
// view), so the clamp never moves it. The host checks that it fits.
ViewLayout window_layout(const ViewLayout& layout, int64_t flat_numel) {
  if (layout.offset < 0 || layout.offset + layout.extent() > flat_numel) {
    throw std::logic_error("internal: a view at offset " + std::to_string(layout.offset) + " spanning " +
                           std::to_string(layout.extent()) + " elements does not fit its storage of " +
                           std::to_string(flat_numel));
  }
  ViewLayout local = layout;
  local.offset = 0;
  local.dynamic_offset.reset();
  return local;
}

// Flat element index of every view element, shape `sizes`, in i64 (or i32
// when the storage is small, which XLA handles faster).
Value element_indices(Builder& b, const ViewLayout& layout, ElementType index_type) {
  TensorType t{index_type, layout.sizes};
  Value idx = b.splat(static_cast<double>(layout.offset), t);
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] == 1 || layout.strides[d] == 0) continue;
    Value term = b.iota(t, static_cast<int64_t>(d));
    if (layout.strides[d] != 1) term = b.binary("multiply", term, b.splat(static_cast<double>(layout.strides[d]), t));
    idx = b.binary("add", idx, term);
  }
  return idx;
}

ElementType index_type_for(int64_t flat_numel) {
  return flat_numel < (int64_t{1} << 31) ? ElementType::S32 : ElementType::S64;
}

// Where a nesting view (dims sorted by stride, each stride a multiple of the
// next, covering it) sits in its storage, as a box inside a reshaped segment:
// segment [seg_start, seg_start + seg_len) of the flat storage (padded with
// `pad` trailing elements when it runs past the end), reshaped to `pyramid`
// ([rows, s0/s1, ..., s_last]), sliced at `start` with the view's sizes (and
// 1 for the innermost level).
struct Placement {
  int64_t seg_start = 0, seg_len = 0, pad = 0;
  std::vector<int64_t> pyramid, start;
};

Placement place(const ViewLayout& layout, const std::vector<int64_t>& dims, int64_t flat_numel) {
  const int64_t s0 = layout.strides[dims[0]], n0 = layout.sizes[dims[0]];
  Placement p;
  p.pyramid.push_back(n0);
  for (size_t k = 0; k + 1 < dims.size(); ++k)
    p.pyramid.push_back(layout.strides[dims[k]] / layout.strides[dims[k + 1]]);
  p.pyramid.push_back(layout.strides[dims.back()]);
  p.seg_len = n0 * s0;
  p.start.assign(p.pyramid.size(), 0);
  // The segment starting at the view's first element fits: boxes at 0.
  if (layout.offset + p.seg_len <= flat_numel) {
    p.seg_start = layout.offset;
    return p;
  }
  // Otherwise the last row's trailing gap runs past the storage (a view of
  // a later column block, like k and v of a fused qkv projection). Align the
  // segment to whole rows instead and start the box at the offset's digits
  // in the pyramid, when no digit range wraps: no padded copy of the storage.
  const int64_t c0 = layout.offset / s0;
  std::vector<int64_t> digits{0};
  bool wraps = false;
  for (size_t k = 1; k < p.pyramid.size(); ++k) {
    const int64_t stride = k < dims.size() ? layout.strides[dims[k]] : 1;
    const int64_t digit = (layout.offset / stride) % p.pyramid[k];
    const int64_t extent = k < dims.size() ? layout.sizes[dims[k]] : 1;
    if (digit + extent > p.pyramid[k]) wraps = true;
    digits.push_back(digit);
  }
  if (!wraps && (c0 + n0) * s0 <= flat_numel) {
    p.seg_start = c0 * s0;
    p.start = digits;
    return p;
  }
  p.seg_start = layout.offset;
  p.pad = layout.offset + p.seg_len - flat_numel;
  return p;
}

// The segment of `flat` a placement reads or rewrites, as its pyramid.
Value placed_segment(Builder& b, const Value& flat, const Placement& p) {
  Value seg = flat;
  if (p.pad > 0) seg = b.pad(flat, b.constant(0, flat.dtype()), {0}, {p.pad}, {0});
  seg = b.slice(seg, {p.seg_start}, {p.seg_start + p.seg_len}, {1});
  return b.reshape(seg, p.pyramid);
}

// A view whose non-trivial dims, sorted by stride, nest without overlap
// (each stride a multiple of the next, covering it): read by slicing a flat
// segment, reshaping it to the stride pyramid and slicing off the gaps.
bool read_by_reshape(Builder& b, const Value& flat, const ViewLayout& layout, Value* out) {
  std::vector<int64_t> dims;  // non-trivial dims (size > 1, stride > 0)
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] > 1 && layout.strides[d] > 0) dims.push_back(static_cast<int64_t>(d));
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int64_t x, int64_t y) { return layout.strides[x] > layout.strides[y]; });
  for (size_t k = 0; k + 1 < dims.size(); ++k) {
    int64_t s = layout.strides[dims[k]], next = layout.strides[dims[k + 1]];
    if (s % next != 0 || s < next * layout.sizes[dims[k + 1]]) return false;
  }
  const int64_t flat_numel = flat.shape()[0];
  Value core;
  std::vector<int64_t> core_shape;  // sizes of `dims`, in stride order
  for (int64_t d : dims) core_shape.push_back(layout.sizes[d]);
  if (dims.empty()) {
    core = b.reshape(b.slice(flat, {layout.offset}, {layout.offset + 1}, {1}), {});
  } else {
    const Placement p = place(layout, dims, flat_numel);
    std::vector<int64_t> limit = core_shape, step(p.pyramid.size(), 1);
    limit.push_back(1);
    for (size_t k = 0; k < limit.size(); ++k) limit[k] += p.start[k];
    core = b.reshape(b.slice(placed_segment(b, flat, p), p.start, limit, step), core_shape);
  }
  // Back to the view's dim order, then size-1 and broadcast (stride-0) dims.
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return dims[x] < dims[y]; });
  core = b.transpose(core, order);
  std::vector<int64_t> kept;  // view dims present in `core`, ascending
  for (int64_t i : order) kept.push_back(dims[i]);
  *out = b.broadcast_in_dim(core, layout.sizes, kept);
  return true;
}

// The write twin of read_by_reshape: a view whose dims nest without overlap
// (a permuted or strided-slice layout, as TensorIterator gives outputs of
// ops on transposed inputs) is written with transpose, reshape and
// dynamic_update_slice instead of an element-wise scatter, which XLA runs
// as a serial loop on some backends.
bool write_by_reshape(Builder& b, const Value& flat, const Value& value, const ViewLayout& layout, Value* out) {
  std::vector<int64_t> dims;  // non-trivial dims (size > 1)
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] <= 1) continue;
    if (layout.strides[d] <= 0) return false;  // broadcast dims are never written
    dims.push_back(static_cast<int64_t>(d));
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int64_t x, int64_t y) { return layout.strides[x] > layout.strides[y]; });
  for (size_t k = 0; k + 1 < dims.size(); ++k) {
    int64_t s = layout.strides[dims[k]], next = layout.strides[dims[k + 1]];
    if (s % next != 0 || s < next * layout.sizes[dims[k + 1]]) return false;
  }
  const int64_t flat_numel = flat.shape()[0];
  const int64_t n = layout.numel();
  // The value in storage order: drop size-1 dims, put dims in stride order.
  std::vector<int64_t> kept_sizes;
  std::vector<int64_t> kept_dims;  // view dims with size > 1, ascending
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] > 1) kept_dims.push_back(static_cast<int64_t>(d));
  }
  for (int64_t d : kept_dims) kept_sizes.push_back(layout.sizes[d]);
  Value core = b.reshape(value, kept_sizes);
  std::vector<int64_t> perm, core_shape;
  for (int64_t d : dims) {
    perm.push_back(std::find(kept_dims.begin(), kept_dims.end(), d) - kept_dims.begin());
    core_shape.push_back(layout.sizes[d]);
  }
  core = b.transpose(core, perm);
  Value offset = b.constant_int(layout.offset, ElementType::S64);
  bool dense = true;  // the view covers one contiguous segment, in permuted order
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t inner = k + 1 < dims.size() ? layout.strides[dims[k + 1]] * layout.sizes[dims[k + 1]] : 1;
    if (layout.strides[dims[k]] != inner) dense = false;
  }
  if (dense) {
    Value v = b.reshape(core, {n});
    *out = (layout.offset == 0 && n == flat_numel) ? v : b.dynamic_update_slice(flat, v, {offset});
    return true;
  }
  // Strided: update the box of the view in its segment's stride pyramid.
  const Placement p = place(layout, dims, flat_numel);
  std::vector<int64_t> core_with_inner = core_shape;
  core_with_inner.push_back(1);
  std::vector<Value> starts;
  for (int64_t s : p.start) starts.push_back(b.constant_int(s, ElementType::S64));
  Value seg = b.dynamic_update_slice(placed_segment(b, flat, p), b.reshape(core, core_with_inner), starts);
  seg = b.reshape(seg, {p.seg_len});
  if (p.pad > 0) seg = b.slice(seg, {0}, {p.seg_len - p.pad}, {1});
  *out = b.dynamic_update_slice(flat, seg, {b.constant_int(p.seg_start, ElementType::S64)});
  return true;
}

}  // namespace

Value read_view(Builder& b, const Value& flat, const ViewLayout& layout) {
  TensorType t{flat.dtype(), layout.sizes};
  if (layout.numel() == 0) return b.splat(0, t);
  const int64_t flat_numel = flat.shape()[0];
  if (layout.dynamic_offset) {
    const ViewLayout local = window_layout(layout, flat_numel);
    return read_view(b, b.dynamic_slice(flat, {*layout.dynamic_offset}, {local.extent()}), local);
  }
  if (layout.is_contiguous()) {
    Value seg = b.slice(flat, {layout.offset}, {layout.offset + layout.numel()}, {1});
    return b.reshape(seg, layout.sizes);
  }
  Value v;
  if (read_by_reshape(b, flat, layout, &v)) return v;
  // Overlapping windows (unfold with step < size, as_strided): a gather.
  Value idx = element_indices(b, layout, index_type_for(flat_numel));
  return b.gather(flat, idx, hlo::GatherDims::points(1, idx.rank()), t.shape);
}

Value write_view(Builder& b, const Value& flat, const Value& value, const ViewLayout& layout) {
  const int64_t flat_numel = flat.shape()[0];
  const int64_t n = layout.numel();
  if (n == 0) return flat;
  if (layout.dynamic_offset) {
    const ViewLayout local = window_layout(layout, flat_numel);
    if (local.is_contiguous()) return b.dynamic_update_slice(flat, b.reshape(value, {n}), {*layout.dynamic_offset});
    // Elements of the window between the view's are kept: it is read first.
    const Value window = b.dynamic_slice(flat, {*layout.dynamic_offset}, {local.extent()});
    return b.dynamic_update_slice(flat, write_view(b, window, value, local), {*layout.dynamic_offset});
  }
  if (layout.is_contiguous()) {
    Value v = b.reshape(value, {n});
    if (layout.offset == 0 && n == flat_numel) return v;
    Value start = b.constant_int(layout.offset, ElementType::S64);
    return b.dynamic_update_slice(flat, v, {start});
  }
  Value out;
  if (write_by_reshape(b, flat, value, layout, &out)) return out;
  // Overlapping or broadcast layouts (as_strided): an element-wise scatter.
  Value idx = element_indices(b, layout, index_type_for(flat_numel));
  return b.scatter_points(flat, idx, value, hlo::overwrite);
}

namespace {

// The element type whose bits stand for `t`'s in a bitcast: StableHLO
// bitcasts neither complex nor bool.
ElementType bits_type(ElementType t) {
  if (hlo::is_complex(t)) return hlo::complex_part_type(t);
  if (t == ElementType::Pred) return ElementType::U8;
  return t;
}

// A complex element is a (real, imag) pair of its part type in memory, as in PyTorch;
// bool is one byte, 0 or 1.
Value to_bits(Builder& b, const Value& flat) {
  const int64_t n = flat.shape()[0];
  if (flat.dtype() == ElementType::Pred) return b.convert(flat, ElementType::U8);
  if (!hlo::is_complex(flat.dtype())) return flat;
  Value re = b.reshape(b.real(flat), {n, 1});
  Value im = b.reshape(b.imag(flat), {n, 1});
  return b.reshape(b.concatenate({re, im}, 1), {2 * n});
}

Value from_bits(Builder& b, const Value& bits, ElementType dtype) {
  if (dtype == ElementType::Pred) return b.convert(bits, ElementType::Pred);  // nonzero is true
  if (!hlo::is_complex(dtype)) return bits;
  const int64_t n = bits.shape()[0] / 2;
  Value pairs = b.reshape(n * 2 == bits.shape()[0] ? bits : b.slice(bits, {0}, {2 * n}, {1}), {n, 2});
  Value re = b.reshape(b.slice(pairs, {0, 0}, {n, 1}, {1, 1}), {n});
  Value im = b.reshape(b.slice(pairs, {0, 1}, {n, 2}, {1, 1}), {n});
  return b.op("complex", {re, im}, {dtype, {n}});
}

int64_t flat_bytes(const Value& flat) { return flat.shape()[0] * hlo::byte_size(flat.dtype()); }

}  // namespace

Value reinterpret_flat(Builder& b, const Value& flat, ElementType dtype) {
  if (flat.dtype() == dtype) return flat;
  Value v = to_bits(b, flat);
  const ElementType to = bits_type(dtype);
  const int64_t from_size = hlo::byte_size(v.dtype()), to_size = hlo::byte_size(to), n = v.shape()[0];
  if (from_size == to_size) {
    if (v.dtype() != to) v = b.bitcast_convert(v, {to, {n}});
  } else if (from_size > to_size) {  // each element splits into a minor dimension
    const int64_t r = from_size / to_size;
    v = b.reshape(b.bitcast_convert(v, {to, {n, r}}), {n * r});
  } else {  // a minor dimension of r elements merges into one; a partial last element is left out
    const int64_t r = to_size / from_size, k = n / r;
    if (k * r != n) v = b.slice(v, {0}, {k * r}, {1});
    v = b.bitcast_convert(b.reshape(v, {k, r}), {to, {k}});
  }
  return from_bits(b, v, dtype);
}

Value merge_flat(Builder& b, const Value& before, const Value& written) {
  const int64_t total = flat_bytes(before), covered = flat_bytes(written);
  if (covered == total) {
    // The wider element type stays: a loaded (u8) storage becomes f32 at its
    // first f32 write, and an f32 storage written through a u8 view stays
    // f32, so later reads of the common view need no bitcast.
    return hlo::byte_size(before.dtype()) > hlo::byte_size(written.dtype())
               ? reinterpret_flat(b, written, before.dtype())
               : written;
  }
  Value bytes = reinterpret_flat(b, written, ElementType::U8);
  Value tail = b.slice(reinterpret_flat(b, before, ElementType::U8), {covered}, {total}, {1});
  return reinterpret_flat(b, b.concatenate({bytes, tail}, 0), before.dtype());
}

}  // namespace torch_tpu::runtime
