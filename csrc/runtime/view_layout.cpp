#include "view_layout.h"

#include <algorithm>
#include <numeric>

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

namespace {

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

std::string gather_attrs(int64_t index_vector_dim) {
  return "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
         "index_vector_dim = " + std::to_string(index_vector_dim) +
         ">, indices_are_sorted = false, slice_sizes = array<i64: 1>";
}

ElementType index_type_for(int64_t flat_numel) {
  return flat_numel < (int64_t{1} << 31) ? ElementType::S32 : ElementType::S64;
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
    const int64_t inner = layout.strides[dims.back()];
    const int64_t span = layout.sizes[dims[0]] * layout.strides[dims[0]];
    Value seg = flat;
    int64_t end = layout.offset + span;
    if (end > flat_numel) {  // the last row's gap runs past the storage: pad it
      seg = b.pad(flat, b.constant(0, flat.dtype()), {0}, {end - flat_numel}, {0});
    }
    seg = b.slice(seg, {layout.offset}, {end}, {1});
    // Pyramid: [n0, s0/s1, s1/s2, ..., s_last]
    std::vector<int64_t> pyramid{layout.sizes[dims[0]]};
    for (size_t k = 0; k + 1 < dims.size(); ++k) pyramid.push_back(layout.strides[dims[k]] / layout.strides[dims[k + 1]]);
    pyramid.push_back(inner);
    seg = b.reshape(seg, pyramid);
    std::vector<int64_t> start(pyramid.size(), 0), limit = core_shape, step(pyramid.size(), 1);
    limit.push_back(1);
    seg = b.slice(seg, start, limit, step);
    core = b.reshape(seg, core_shape);
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
  // Strided: update the stride pyramid of the segment the view spans.
  const int64_t span = layout.sizes[dims[0]] * layout.strides[dims[0]];
  const int64_t end = layout.offset + span;
  Value seg = flat;
  if (end > flat_numel) seg = b.pad(flat, b.constant(0, flat.dtype()), {0}, {end - flat_numel}, {0});
  seg = b.slice(seg, {layout.offset}, {end}, {1});
  std::vector<int64_t> pyramid{layout.sizes[dims[0]]};
  for (size_t k = 0; k + 1 < dims.size(); ++k) pyramid.push_back(layout.strides[dims[k]] / layout.strides[dims[k + 1]]);
  pyramid.push_back(layout.strides[dims.back()]);
  std::vector<int64_t> core_with_inner = core_shape;
  core_with_inner.push_back(1);
  Value zero = b.constant_int(0, ElementType::S64);
  std::vector<Value> starts(pyramid.size(), zero);
  seg = b.dynamic_update_slice(b.reshape(seg, pyramid), b.reshape(core, core_with_inner), starts);
  seg = b.reshape(seg, {span});
  if (end > flat_numel) seg = b.slice(seg, {0}, {flat_numel - layout.offset}, {1});
  *out = b.dynamic_update_slice(flat, seg, {offset});
  return true;
}

}  // namespace

Value read_view(Builder& b, const Value& flat, const ViewLayout& layout) {
  TensorType t{flat.dtype(), layout.sizes};
  if (layout.numel() == 0) return b.splat(0, t);
  const int64_t flat_numel = flat.shape()[0];
  if (layout.is_contiguous()) {
    Value seg = b.slice(flat, {layout.offset}, {layout.offset + layout.numel()}, {1});
    return b.reshape(seg, layout.sizes);
  }
  Value v;
  if (read_by_reshape(b, flat, layout, &v)) return v;
  // Overlapping windows (unfold with step < size, as_strided): a gather.
  Value idx = element_indices(b, layout, index_type_for(flat_numel));
  return b.op("gather", {flat, idx}, t, gather_attrs(static_cast<int64_t>(layout.sizes.size())));
}

Value write_view(Builder& b, const Value& flat, const Value& value, const ViewLayout& layout) {
  const int64_t flat_numel = flat.shape()[0];
  const int64_t n = layout.numel();
  if (n == 0) return flat;
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
  const int64_t rank = static_cast<int64_t>(layout.sizes.size());
  TensorType scalar{flat.dtype(), {}};
  return b.op_with_region(
      "scatter", {flat, idx, value}, {flat.type},
      "indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = " + std::to_string(rank) + ">, unique_indices = false",
      {scalar, scalar}, [](Builder&, const std::vector<Value>& args) { return std::vector<Value>{args[1]}; })[0];
}

}  // namespace torch_tpu::runtime
