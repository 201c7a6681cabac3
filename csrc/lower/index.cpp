// Indexing ops: gather/scatter along a dim, index_select/index_add, advanced
// indexing (index.Tensor, index_put) and embedding's backward. All become
// stablehlo.gather or stablehlo.scatter. Index values are not checked (that
// would need the host to wait); out-of-range starts are clamped by gather and
// dropped by scatter, so a bad index gives a wrong value, never a crash.
#include "lower/index.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "lower/common/indexing.h"
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

enum class Combine { Overwrite, Add };

// Duplicate indices: Add sums them (scatter_add, index_put accumulate=True);
// Overwrite keeps one of the writes, which PyTorch leaves unspecified too.
hlo::ScatterCombiner combiner(Combine combine) {
  if (combine == Combine::Overwrite) return hlo::overwrite;
  return [](Builder& rb, const Value& current, const Value& update) {
    return rb.binary(current.dtype() == ElementType::Pred ? "or" : "add", current, update);
  };
}

// Sums run in f32 for bf16/f16, one rounding at the end.
ElementType sum_type(ElementType t, Combine combine) { return combine == Combine::Add ? accumulation_type(t) : t; }

// scatter / scatter_add: self[..index[i]..] (combine)= updates[i] over
// index's shape. 0-d tensors act as 1-d ones of one element.
Value scatter_along(LowerContext& ctx, const Value& updates_in, Combine combine) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  // CPU's scatter raises RuntimeError.
  const std::optional<ScatterAlongDim> s =
      scatter_along_dim(ctx, updates_in, sum_type(out.dtype, combine), "scatter", /*runtime_error=*/true);
  if (!s) return coerce(b, ctx.tensor(0), out);
  if (s->updates.dtype() == out.dtype) {  // not a 16-bit float sum, which runs in float32
    ctx.update_points_of_self(s->coords, s->updates, combiner(combine), combine == Combine::Overwrite);
  }
  Value r = b.scatter_points(s->operand, s->coords, s->updates, combiner(combine));
  return b.convert(b.reshape(r, out.shape), out.dtype);
}

// ---- advanced indexing -----------------------------------------------------

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (o == 1) o = s[i];
    }
  }
  return out;
}

// How self[indices] addresses self: which dims are indexed, the start
// coordinates [*B, K] (B the broadcast shape of the index tensors), and where
// the non-indexed dims land in the result. PyTorch's rule: when the indexed
// dims are adjacent, B replaces them in place; otherwise B comes first.
struct AdvancedIndex {
  std::vector<int64_t> dims;       // indexed dims of self, ascending
  std::vector<int64_t> rest_dims;  // the others, ascending
  Value coords;
  Shape batch;                       // B
  std::vector<int64_t> rest_places;  // result positions of rest_dims
  Shape result;
};

AdvancedIndex advanced_index(Builder& b, const Value& self, const std::vector<std::optional<Value>>& indices) {
  AdvancedIndex a;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    if (indices[i]->dtype() == ElementType::Pred || indices[i]->dtype() == ElementType::U8) {
      throw std::invalid_argument("tpu: index with a boolean mask needs nonzero() first");
    }
    a.dims.push_back(static_cast<int64_t>(i));
    shapes.push_back(indices[i]->shape());
  }
  if (a.dims.empty()) throw std::invalid_argument("tpu: advanced indexing without index tensors");
  a.batch = broadcast_shapes(shapes);
  const int64_t nb = static_cast<int64_t>(a.batch.size());
  Shape column = a.batch;
  column.push_back(1);
  std::vector<Value> parts;
  for (int64_t d : a.dims) {
    Value idx = b.broadcast_to(as_index(b, *indices[d]), a.batch);
    parts.push_back(b.reshape(wrap_negative(b, idx, self.shape()[d]), column));
  }
  a.coords = b.concatenate(parts, nb);
  const bool adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  for (int64_t d = 0; d < self.rank(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) a.rest_dims.push_back(d);
  }
  int64_t before = 0;  // rest dims that stay in front of B
  for (int64_t d : a.rest_dims) before += adjacent && d < a.dims.front();
  for (int64_t j = 0; j < static_cast<int64_t>(a.rest_dims.size()); ++j) {
    a.rest_places.push_back(j < before ? j : j + nb);
  }
  for (int64_t j = 0; j < before; ++j) a.result.push_back(self.shape()[a.rest_dims[j]]);
  a.result.insert(a.result.end(), a.batch.begin(), a.batch.end());
  for (size_t j = before; j < a.rest_dims.size(); ++j) a.result.push_back(self.shape()[a.rest_dims[j]]);
  return a;
}

bool any_indexed_dim_empty(const Value& self, const AdvancedIndex& a) {
  for (int64_t d : a.dims) {
    if (self.shape()[d] == 0) return true;
  }
  return false;
}

// `values` shaped like the indexing result: PyTorch broadcasts it
// right-aligned, after dropping leading size-1 dims (x[i] = v[None]).
Value values_for(Builder& b, Value values, const Shape& result) {
  Shape s = values.shape();
  while (s.size() > result.size() && s.front() == 1) s.erase(s.begin());
  return b.broadcast_to(b.reshape(values, s), result);
}

// operand's slices along `dim` at the positions in the 1-d `index`.
Value select_along(Builder& b, const Value& operand, int64_t dim, const Value& index) {
  return b.gather_slices(operand, dim, b.reshape(index, {index.shape()[0], 1}));
}

// ---- boolean masks in index_put ----------------------------------------------

bool is_mask(const std::optional<Value>& t) {
  return t && (t->dtype() == ElementType::Pred || t->dtype() == ElementType::U8);
}

// Position of the mask in `indices`, or -1. A mask mixed with other index
// tensors is not supported (it would need nonzero's count at trace time).
int64_t mask_position(const std::vector<std::optional<Value>>& indices) {
  int64_t pos = -1, tensors = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    tensors += indices[i].has_value();
    if (is_mask(indices[i])) pos = static_cast<int64_t>(i);
  }
  if (pos >= 0 && tensors > 1) {
    throw std::invalid_argument(
        "tpu: index_put with a boolean mask together with other index tensors is not supported");
  }
  return pos;
}

// self[mask] = values (or += with Add): a rank-k mask at dim p names its true
// elements in row-major order, and the indexing result is
// self.shape[:p] + [nnz] + self.shape[p+k:]. The i-th true element takes row
// i of values along that axis (or its one broadcast row); i comes from the
// mask's prefix count, so no nonzero() and no host round trip.
Value masked_put(Builder& b, const Value& self, const Value& mask_in, int64_t p, Value values, Combine combine) {
  Value mask = b.convert(mask_in, ElementType::Pred);
  const int64_t k = mask.rank();
  for (int64_t i = 0; i < k; ++i) {
    if (p + i >= self.rank() || mask.shape()[i] != self.shape()[p + i]) {
      throw std::invalid_argument("The shape of the mask at index " + std::to_string(i) +
                                  " does not match the shape of the indexed tensor at index " + std::to_string(p + i));
    }
  }
  const int64_t n = mask.type.numel();
  Shape flat(self.shape().begin(), self.shape().begin() + p);
  const int64_t q = p;  // the masked axis in `flat`
  flat.push_back(n);
  flat.insert(flat.end(), self.shape().begin() + p + k, self.shape().end());
  // values against the indexing result: leading 1s dropped, then right-aligned.
  Shape vs = values.shape();
  while (vs.size() > flat.size() && vs.front() == 1) vs.erase(vs.begin());
  vs.insert(vs.begin(), flat.size() - vs.size(), 1);
  values = b.reshape(values, vs);
  Value m = b.reshape(mask, {n});
  Value updates;
  if (vs[q] == 1) {
    updates = b.broadcast_in_dim(values, flat, range(static_cast<int64_t>(flat.size())));
  } else {
    if (values.type.numel() == 0) return self;  // nnz is 0: nothing written
    Shape full = flat;
    full[q] = vs[q];
    values = b.broadcast_in_dim(values, full, range(static_cast<int64_t>(full.size())));
    // Row of each true element; false elements read a clamped row, unused.
    Value row =
        b.binary("subtract", prefix_sum(b, b.convert(m, ElementType::S64), 0), b.splat(1, {ElementType::S64, {n}}));
    updates = select_along(b, values, q, row);
  }
  Value operand = b.reshape(self, flat);
  Value written = updates;
  if (combine == Combine::Add)
    written = b.binary(operand.dtype() == ElementType::Pred ? "or" : "add", operand, updates);
  Value keep = b.broadcast_in_dim(m, flat, {q});
  return b.reshape(b.select(keep, written, operand), self.shape());
}

// Per-index factor: 0 for padding_idx, 1/count(index) with scale_grad_by_freq.
Value embedding_row_weights(Builder& b, const Value& idx, int64_t num_weights, int64_t padding_idx,
                            bool scale_grad_by_freq, ElementType t) {
  const int64_t n = idx.shape()[0];
  TensorType row{t, {n}};
  Value w = b.splat(1, row);
  if (scale_grad_by_freq) {
    Value column = b.reshape(idx, {n, 1});
    Value counts = b.scatter_points(zeros(b, {t, {num_weights}}), column, w, hlo::accumulate);
    w = b.binary("divide", w, b.gather_points(counts, column));
  }
  if (padding_idx >= 0) {
    Value keep = b.compare(idx, b.splat(static_cast<double>(padding_idx), idx.type), CompareDirection::NE);
    w = b.select(keep, w, zeros(b, row));
  }
  return w;
}

// index / index_put: each index tensor counts from the front or (negative)
// from the back of its dim.
void check_advanced_ranges(LowerContext& ctx, const Value& self, const AdvancedIndex& a, const char* op) {
  const auto& indices = ctx.args.at(1).tensors;
  for (int64_t d : a.dims) {
    const int64_t size = self.shape()[d];
    ctx.check_in_range(*indices[d], -size, size,
                       std::string(op) + ": index out of bounds for dimension " + std::to_string(d) + " with size " +
                           std::to_string(size));
  }
}

// Where each element of the indexing result sits in self, as [*a.result,
// rank] int64: the index's coordinates in the indexed dims, the element's
// own position in the others.
Value element_coordinates(Builder& b, const AdvancedIndex& a, int64_t rank) {
  const int64_t nb = static_cast<int64_t>(a.batch.size()), places = static_cast<int64_t>(a.result.size());
  std::vector<int64_t> batch_places;  // the result dims B occupies
  for (int64_t p = 0; p < places; ++p) {
    if (std::find(a.rest_places.begin(), a.rest_places.end(), p) == a.rest_places.end()) batch_places.push_back(p);
  }
  Shape column = a.result;
  column.push_back(1);
  std::vector<Value> cols;
  for (int64_t d = 0; d < rank; ++d) {
    const auto indexed = std::find(a.dims.begin(), a.dims.end(), d);
    Value c;
    if (indexed != a.dims.end()) {
      Shape lo(nb + 1, 0), hi = a.batch;
      lo[nb] = indexed - a.dims.begin();
      hi.push_back(lo[nb] + 1);
      c = b.broadcast_in_dim(b.reshape(b.slice(a.coords, lo, hi, Shape(nb + 1, 1)), a.batch), a.result, batch_places);
    } else {
      const auto rest = std::find(a.rest_dims.begin(), a.rest_dims.end(), d) - a.rest_dims.begin();
      c = b.iota({ElementType::S64, a.result}, a.rest_places[rest]);
    }
    cols.push_back(b.reshape(c, column));
  }
  return b.concatenate(cols, places);
}

// Coordinates of every element of `shape`, row-major, as [n, rank] int64.
Value coordinates(Builder& b, const Shape& shape, int64_t n) {
  std::vector<Value> cols;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    cols.push_back(b.reshape(b.iota({ElementType::S64, shape}, d), {n, 1}));
  }
  return b.concatenate(cols, 1);
}

}  // namespace

std::vector<Value> gather(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value self = ctx.tensor(0);
  if (out.numel() == 0 || self.type.numel() == 0) return {zeros(b, out)};
  const int64_t dim = wrap_dim(ctx.int_arg(1), self.rank());
  Value index = rank_at_least_1(b, as_index(b, ctx.tensor(2)));
  const int64_t size = self.rank() == 0 ? 1 : self.shape()[dim];
  check_index_in_dim(ctx, index, dim, size, "gather", /*runtime_error=*/true);  // CPU's gather raises RuntimeError
  self = rank_at_least_1(b, self);
  Value coords = point_coordinates(b, index.shape(), dim, index);
  Value r = b.gather_points(self, coords);
  return {b.reshape(r, out.shape)};
}

std::vector<Value> scatter(LowerContext& ctx) {
  const Arg& src = ctx.args.at(3);
  const ElementType t = ctx.out_types.at(0).dtype;
  Value updates = src.kind == Arg::Kind::Tensor ? ctx.tensor(3) : ctx.scalar_arg(3, t);
  return {scatter_along(ctx, updates, Combine::Overwrite)};
}

std::vector<Value> scatter_add(LowerContext& ctx) { return {scatter_along(ctx, ctx.tensor(3), Combine::Add)}; }

std::vector<Value> index_select(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value self = ctx.tensor(0);
  if (out.numel() == 0 || self.type.numel() == 0) return {zeros(b, out)};
  if (self.rank() == 0) return {b.reshape(self, out.shape)};  // the only valid index is 0
  const int64_t dim = wrap_dim(ctx.int_arg(1), self.rank());
  Value index = ctx.tensor(2);
  index = b.reshape(as_index(b, index), {index.type.numel()});
  ctx.check_in_range(index, 0, self.shape()[dim], "index_select (or embedding): index out of range in self");
  return {b.reshape(select_along(b, self, dim, index), out.shape)};
}

std::vector<Value> index_add(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value self = ctx.tensor(0);
  Value index = ctx.tensor(2);
  const int64_t n = index.type.numel();
  if (n == 0 || out.numel() == 0) return {coerce(b, self, out)};
  const ElementType t = accumulation_type(out.dtype);
  Value operand = rank_at_least_1(b, b.convert(self, t));
  const int64_t dim = wrap_dim(ctx.int_arg(1), operand.rank());
  ctx.check_in_range(index, 0, operand.shape()[dim], "index_add: index out of range in self");
  Shape update_shape = operand.shape();
  update_shape[dim] = n;
  Value updates = b.reshape(b.convert(ctx.tensor(3), t), update_shape);
  if (ctx.has(4) && ctx.args[4].scalar.as_double() != 1.0) {
    check_scalar_fits(ctx.args[4].scalar, out.dtype);  // CPU converts alpha to self's type, not to `t`
    updates = b.binary("multiply", updates, b.broadcast_to(ctx.scalar_arg(4, t), update_shape));
  }
  Value positions = b.reshape(as_index(b, index), {n, 1});
  if (t == out.dtype) {  // not a 16-bit float sum, which runs in float32
    Value along = b.broadcast_in_dim(b.reshape(positions, {n}), update_shape, {dim});
    ctx.update_points_of_self(point_coordinates(b, update_shape, dim, along), updates, hlo::accumulate,
                              /*overwrite=*/false);
  }
  Value r = b.scatter_slices(operand, dim, positions, updates, hlo::accumulate);
  return {b.convert(b.reshape(r, out.shape), out.dtype)};
}

std::vector<Value> index(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& self = ctx.tensor(0);
  if (out.numel() == 0) return {zeros(b, out)};
  AdvancedIndex a = advanced_index(b, self, ctx.args.at(1).tensors);
  check_advanced_ranges(ctx, self, a, "index");
  if (any_indexed_dim_empty(self, a)) return {zeros(b, out)};
  hlo::GatherDims g;
  g.offset_dims = a.rest_places;
  g.collapsed_slice_dims = a.dims;
  g.start_index_map = a.dims;
  g.index_vector_dim = static_cast<int64_t>(a.batch.size());
  g.slice_sizes = self.shape();
  for (int64_t d : a.dims) g.slice_sizes[d] = 1;
  return {b.reshape(b.gather(self, a.coords, g, a.result), out.shape)};
}

// _index_put_impl_(self, indices, values, accumulate, unsafe)
std::vector<Value> index_put(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& self = ctx.tensor(0);
  const auto& indices = ctx.args.at(1).tensors;
  const Combine combine = ctx.bool_arg(3) ? Combine::Add : Combine::Overwrite;
  const ElementType t = sum_type(out.dtype, combine);
  if (out.numel() == 0) return {self};
  const int64_t mask_at = mask_position(indices);
  if (mask_at >= 0) {
    Value r = masked_put(b, b.convert(self, t), *indices[mask_at], mask_at, b.convert(ctx.tensor(2), t), combine);
    return {b.convert(r, out.dtype)};
  }
  AdvancedIndex a = advanced_index(b, self, indices);
  check_advanced_ranges(ctx, self, a, "index_put");
  TensorType result{out.dtype, a.result};
  if (result.numel() == 0 || any_indexed_dim_empty(self, a)) return {self};
  Value updates = values_for(b, b.convert(ctx.tensor(2), t), a.result);
  if (t == out.dtype) {  // not a 16-bit float sum, which runs in float32
    ctx.update_points_of_self(element_coordinates(b, a, self.rank()), updates, combiner(combine),
                              combine == Combine::Overwrite);
  }
  hlo::ScatterDims s;
  s.update_window_dims = a.rest_places;
  s.inserted_window_dims = a.dims;
  s.scatter_dims_to_operand_dims = a.dims;
  s.index_vector_dim = static_cast<int64_t>(a.batch.size());
  Value r = b.scatter(b.convert(self, t), a.coords, updates, s, combiner(combine));
  return {b.convert(r, out.dtype)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
// scale_grad_by_freq): rows of grad_output summed into the rows their
// indices name; the padding row gets nothing; with scale_grad_by_freq each
// contribution is divided by how often its index occurs in the batch.
std::vector<Value> embedding_dense_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value grad = ctx.tensor(0);
  Value indices = ctx.tensor(1);
  const int64_t num_weights = ctx.int_arg(2);
  const int64_t padding_idx = ctx.int_arg(3);
  const bool by_freq = ctx.bool_arg(4);
  const int64_t n = indices.type.numel();
  const int64_t width = out.shape.at(1);
  if (n == 0 || out.numel() == 0) return {zeros(b, out)};
  const ElementType t = accumulation_type(out.dtype);
  Value idx = b.reshape(as_index(b, indices), {n});
  Value rows = b.reshape(b.convert(grad, t), {n, width});
  Value weight = embedding_row_weights(b, idx, num_weights, padding_idx, by_freq, t);
  rows = b.binary("multiply", rows, b.broadcast_in_dim(weight, {n, width}, {0}));
  Value r = b.scatter_slices(zeros(b, {t, out.shape}), 0, b.reshape(idx, {n, 1}), rows, hlo::accumulate);
  return {b.convert(r, out.dtype)};
}

// nonzero_static(self, *, size, fill_value): the first `size` rows of
// nonzero(self), padded with fill_value. Each true element's rank among the
// true elements (an inclusive prefix count) is its row; its coordinates are
// scattered there. Elements past `size` go to one spare row that is cut off.
std::vector<Value> nonzero_static(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  const int64_t fill = ctx.int_arg(2, -1);
  const int64_t n = x.type.numel();
  if (out.numel() == 0) return {b.splat(0, out)};
  const int64_t size = out.shape.at(0), rank = out.shape.at(1);
  const TensorType padded{ElementType::S64, {size + 1, rank}};
  Value base = b.broadcast_to(b.constant_int(fill, ElementType::S64), padded.shape);
  if (n == 0) return {b.convert(b.slice(base, {0, 0}, {size, rank}, {1, 1}), out.dtype)};
  Value nz = b.reshape(b.convert(x, ElementType::Pred), {n});
  Value count = b.convert(nz, ElementType::S64);
  Value rank_of = prefix_sum(b, count, 0);
  Value row = b.binary("subtract", rank_of, b.broadcast_to(b.constant_int(1, ElementType::S64), {n}));
  Value spare = b.broadcast_to(b.constant_int(size, ElementType::S64), {n});
  Value keep = b.binary("and", nz, b.compare(row, spare, CompareDirection::LT));
  Value index = b.reshape(b.select(keep, row, spare), {n, 1});
  Value rows = b.scatter_slices(base, 0, index, coordinates(b, x.shape(), n), hlo::overwrite);
  return {b.convert(b.slice(rows, {0, 0}, {size, rank}, {1, 1}), out.dtype)};
}

}  // namespace torch_tpu::lower
