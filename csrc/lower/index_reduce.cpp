// Reducing and copying scatters. Every op here addresses single elements:
// the coordinates of each update are built in full ([*update shape, rank])
// and one stablehlo.scatter combines them into the operand with the op's
// reduction. PyTorch's include_self=False means positions that receive an
// update start from the reduction's identity instead of self's value; mean
// divides by the number of contributions (self counting as one), floor
// division for integers, as PyTorch's CPU kernel does.
#include "lower/index_reduce.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "lower/common/indexing.h"
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

enum class Reduce { Overwrite, Sum, Prod, Mean, Max, Min };

Reduce parse_reduce(const std::string& s) {
  if (s == "sum" || s == "add") return Reduce::Sum;
  if (s == "prod" || s == "multiply") return Reduce::Prod;
  if (s == "mean") return Reduce::Mean;
  if (s == "amax") return Reduce::Max;
  if (s == "amin") return Reduce::Min;
  throw std::invalid_argument("reduce argument must be either sum, prod, mean, amax or amin, got " + s);
}

// The combination of an existing value `a` and an update `u`. max/min
// propagate NaN (PyTorch's scatter_reduce amax/amin).
Value combine(Builder& b, Reduce r, const Value& a, const Value& u) {
  const bool pred = a.dtype() == ElementType::Pred;
  switch (r) {
    case Reduce::Overwrite:
      return u;
    case Reduce::Sum:
    case Reduce::Mean:
      return b.binary(pred ? "or" : "add", a, u);
    case Reduce::Prod:
      return b.binary(pred ? "and" : "multiply", a, u);
    case Reduce::Max:
    case Reduce::Min: {
      Value m = b.binary(pred ? (r == Reduce::Max ? "or" : "and") : (r == Reduce::Max ? "maximum" : "minimum"), a, u);
      if (!hlo::is_float(a.dtype())) return m;
      return b.select(is_nan(b, a), a, b.select(is_nan(b, u), u, m));
    }
  }
  return u;
}

// operand[coords[i...]] (r)= updates[i...]; coords is [*updates.shape, rank].
Value scatter_points(Builder& b, const Value& operand, const Value& coords, const Value& updates, Reduce r) {
  return b.scatter_points(operand, coords, updates, [r](Builder& rb, const Value& current, const Value& update) {
    return combine(rb, r, current, update);
  });
}

// The dtype a reduction runs in: sums and products of bf16/f16 in float32.
ElementType compute_type(ElementType t, Reduce r) {
  return (r == Reduce::Sum || r == Reduce::Prod || r == Reduce::Mean) ? accumulation_type(t) : t;
}

Value identity_of(Builder& b, Reduce r, ElementType t) {
  switch (r) {
    case Reduce::Prod:
      return reduce_init(b, "multiply", t);
    case Reduce::Max:
      return reduce_init(b, "maximum", t);
    case Reduce::Min:
      return reduce_init(b, "minimum", t);
    default:
      return b.constant(0, t);
  }
}

// self reduced with `updates` at `coords` (both over the updates' shape).
// self and updates arrive in the compute type.
Value reduce_into(Builder& b, const Value& self, const Value& coords, const Value& updates, Reduce r,
                  bool include_self) {
  const ElementType t = self.dtype();
  Value base = self;
  if (!include_self || r == Reduce::Mean) {
    Value hit = scatter_points(b, zeros(b, {ElementType::Pred, self.shape()}), coords,
                               b.splat(1, {ElementType::Pred, updates.shape()}), Reduce::Overwrite);
    if (!include_self) base = b.select(hit, b.broadcast_to(identity_of(b, r, t), self.shape()), self);
  }
  Value sum = scatter_points(b, base, coords, updates, r);
  if (r != Reduce::Mean) return sum;
  const ElementType ct = t == ElementType::Pred ? ElementType::S64 : t;
  Value count = scatter_points(b, b.splat(include_self ? 1 : 0, {ct, self.shape()}), coords,
                               b.splat(1, {ct, updates.shape()}), Reduce::Sum);
  count = b.binary("maximum", count, b.splat(1, count.type));  // untouched: self / 1
  Value s = b.convert(sum, ct);
  Value q = b.binary("divide", s, count);
  if (!hlo::is_float(ct)) {  // floor division (divide truncates)
    Value rem = b.binary("remainder", s, count);
    Value signs_differ = b.binary("xor", b.compare(s, zeros(b, s.type), CompareDirection::LT),
                                  b.compare(count, zeros(b, count.type), CompareDirection::LT));
    Value adjust = b.binary("and", b.compare(rem, zeros(b, rem.type), CompareDirection::NE), signs_differ);
    q = b.select(adjust, b.binary("subtract", q, b.splat(1, q.type)), q);
  }
  return b.convert(q, t);
}

// scatter_reduce / scatter(reduce=): updates over index's extent along `dim`.
Value scatter_reduce_along(LowerContext& ctx, const Value& src, Reduce r, bool include_self) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const std::optional<ScatterAlongDim> s =
      scatter_along_dim(ctx, src, compute_type(out.dtype, r), "scatter()", /*runtime_error=*/false);
  if (!s) return coerce(b, ctx.tensor(0), out);
  Value result = reduce_into(b, s->operand, s->coords, s->updates, r, include_self);
  return b.convert(b.reshape(result, out.shape), out.dtype);
}

Value index_1d(Builder& b, const Value& index) { return b.reshape(as_index(b, index), {index.type.numel()}); }

// The index_* ops' addressing (self, dim, index, source/value, ...): self
// read as rank >= 1 in `t`, a 1-d index into its dim `dim`. `source` holds
// self's shape with `dim` of index's length; its element p goes to
// self[p with p[dim] replaced by index[p[dim]]]. No value when there is
// nothing to write (the op returns self).
struct IndexAlongDim {
  Value operand, index;
  int64_t dim = 0, size = 0;

  Shape source_shape() const {
    Shape s = operand.shape();
    s[dim] = index.shape()[0];
    return s;
  }
  // Argument `i`, in `t`, laid out as the source.
  Value source(LowerContext& ctx, size_t i, ElementType t) const {
    return ctx.b.reshape(ctx.b.convert(ctx.tensor(i), t), source_shape());
  }
  // Where each source element goes.
  Value coords(Builder& b) const {
    const Shape s = source_shape();
    return point_coordinates(b, s, dim, b.broadcast_in_dim(index, s, {dim}));
  }
};

std::optional<IndexAlongDim> index_along_dim(LowerContext& ctx, ElementType t) {
  Builder& b = ctx.b;
  IndexAlongDim a;
  a.index = index_1d(b, ctx.tensor(2));
  if (a.index.type.numel() == 0 || ctx.out_types.at(0).numel() == 0) return std::nullopt;
  a.operand = rank_at_least_1(b, b.convert(ctx.tensor(0), t));
  a.dim = wrap_dim(ctx.int_arg(1), a.operand.rank());
  a.size = a.operand.shape()[a.dim];
  return a;
}

}  // namespace

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self)
std::vector<Value> scatter_reduce(LowerContext& ctx) {
  const Reduce r = parse_reduce(ctx.args.at(4).s);
  return {scatter_reduce_along(ctx, ctx.tensor(3), r, ctx.bool_arg(5, true))};
}

// scatter.reduce(self, dim, index, src, *, reduce) and
// scatter.value_reduce(self, dim, index, value, *, reduce): "add" | "multiply".
std::vector<Value> scatter_with_reduce(LowerContext& ctx) {
  const std::string& name = ctx.args.at(4).s;
  if (name != "add" && name != "multiply") {
    throw std::invalid_argument("reduce argument must be either add or multiply.");
  }
  const Arg& src = ctx.args.at(3);
  const ElementType t = ctx.out_types.at(0).dtype;
  Value updates = src.kind == Arg::Kind::Tensor ? ctx.tensor(3) : ctx.scalar_arg(3, t);
  return {scatter_reduce_along(ctx, updates, parse_reduce(name), true)};
}

// index_reduce(self, dim, index, source, reduce, *, include_self)
std::vector<Value> index_reduce(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Reduce r = parse_reduce(ctx.args.at(4).s);
  const ElementType t = compute_type(out.dtype, r);
  const std::optional<IndexAlongDim> a = index_along_dim(ctx, t);
  if (!a) return {coerce(b, ctx.tensor(0), out)};
  ctx.check_in_range(a->index, 0, a->size, "index_reduce(): index out of range in self");
  Value result = reduce_into(b, a->operand, a->coords(b), a->source(ctx, 3, t), r, ctx.bool_arg(5, true));
  return {b.convert(b.reshape(result, out.shape), out.dtype)};
}

// index_copy(self, dim, index, source): duplicate indices keep one of the
// writes (PyTorch leaves which unspecified).
std::vector<Value> index_copy(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const std::optional<IndexAlongDim> a = index_along_dim(ctx, ctx.tensor(0).dtype());
  if (!a) return {coerce(b, ctx.tensor(0), out)};
  check_index_in_dim(ctx, a->index, a->dim, a->size, "index_copy_()");
  const Value coords = a->coords(b), source = a->source(ctx, 3, out.dtype);
  ctx.update_points_of_self(coords, source, hlo::overwrite, /*overwrite=*/true);
  Value result = scatter_points(b, a->operand, coords, source, Reduce::Overwrite);
  return {b.reshape(result, out.shape)};
}

// index_fill(self, dim, index, value): index counts from the back when
// negative, as in PyTorch's CPU kernel.
std::vector<Value> index_fill(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const std::optional<IndexAlongDim> a = index_along_dim(ctx, ctx.tensor(0).dtype());
  if (!a) return {coerce(b, ctx.tensor(0), out)};
  const Value& operand = a->operand;
  const int64_t dim = a->dim, size = a->size;
  ctx.check_in_range(
      a->index, -size, size,
      "index_fill(): index out of range for dimension " + std::to_string(dim) + " with size " + std::to_string(size));
  Value index = wrap_negative(b, a->index, size);
  Value hit = scatter_points(b, zeros(b, {ElementType::Pred, {size}}), b.reshape(index, {index.shape()[0], 1}),
                             b.splat(1, {ElementType::Pred, index.shape()}), Reduce::Overwrite);
  const Arg& v = ctx.args.at(3);
  Value value = v.kind == Arg::Kind::Tensor ? b.convert(ctx.tensor(3), out.dtype) : ctx.scalar_arg(3, out.dtype);
  Value filled = b.broadcast_to(b.reshape(value, {}), operand.shape());
  Value result = b.select(b.broadcast_in_dim(hit, operand.shape(), {dim}), filled, operand);
  return {b.reshape(result, out.shape)};
}

// masked_scatter(self, mask, source): the i-th true element of the
// (broadcast) mask, in row-major order, takes source.flatten()[i].
std::vector<Value> masked_scatter(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  if (ctx.tensor(1).dtype() != ElementType::Pred) {  // CPU's check; the meta kernel lets uint8 through
    throw std::runtime_error("masked_scatter_ only supports boolean masks, but got mask with dtype Byte");
  }
  Value self = b.broadcast_to(ctx.tensor(0), out.shape);
  Value mask = b.broadcast_to(ctx.tensor(1), out.shape);
  Value source = ctx.tensor(2);
  const int64_t n = out.numel(), m = source.type.numel();
  if (m == 0) return {self};
  Value flat_mask = b.reshape(mask, {n});
  Value ones = b.convert(flat_mask, ElementType::S64);
  Value position = b.binary("subtract", prefix_sum(b, ones, 0), b.splat(1, ones.type));
  position = b.clamp(b.constant_int(0, ElementType::S64), position, b.constant_int(m - 1, ElementType::S64));
  Value taken = b.gather_points(b.reshape(b.convert(source, out.dtype), {m}), b.reshape(position, {n, 1}));
  return {b.select(mask, b.reshape(taken, out.shape), self)};
}

namespace {

// take and put address self.flatten() (n elements) with argument 1; the
// index is range-checked (negative counts from the back) and read as int64.
struct FlatIndex {
  Value self;
  int64_t n;
  Value index;
};
FlatIndex flat_index(LowerContext& ctx) {
  const Value& self = ctx.tensor(0);
  const int64_t n = self.type.numel();
  Value index = as_index(ctx.b, ctx.tensor(1));
  ctx.check_in_range(
      index, -n, n,
      "out of range: tried to access an index out of range of a tensor with " + std::to_string(n) + " elements.");
  return {self, n, index};
}

}  // namespace

// take(self, index): self.flatten()[index], negative counting from the back.
std::vector<Value> take(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  auto [self, n, index] = flat_index(ctx);
  if (out.numel() == 0 || n == 0) return {zeros(b, out)};
  index = wrap_negative(b, index, n);
  Shape column = index.shape();
  column.push_back(1);
  return {b.reshape(b.gather_points(b.reshape(self, {n}), b.reshape(index, column)), out.shape)};
}

// put(self, index, source, accumulate): self.flatten()[index] = source
// (+= with accumulate), negative indices counting from the back.
std::vector<Value> put(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  auto [self, n, index] = flat_index(ctx);
  const int64_t k = index.type.numel();
  if (k == 0 || n == 0) return {coerce(b, self, out)};
  const Reduce r = ctx.bool_arg(3) ? Reduce::Sum : Reduce::Overwrite;
  const ElementType t = compute_type(out.dtype, r);
  index = b.reshape(wrap_negative(b, index, n), {k, 1});
  Value source = b.reshape(b.convert(ctx.tensor(2), t), {k});
  Value result = scatter_points(b, b.reshape(b.convert(self, t), {n}), index, source, r);
  return {b.convert(b.reshape(result, out.shape), out.dtype)};
}

// embedding_renorm_(self, indices, max_norm, norm_type): each row named by
// an index whose norm exceeds max_norm is scaled to max_norm / (norm + 1e-7)
// (PyTorch's rule), once, however often it is named.
std::vector<Value> embedding_renorm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value self = ctx.tensor(0);
  Value index = index_1d(b, ctx.tensor(1));
  if (index.type.numel() == 0 || out.numel() == 0) return {coerce(b, self, out)};
  const int64_t rows = self.shape()[0];
  ctx.check_in_range(index, 0, rows, "embedding_renorm_: index out of range in self");
  const ElementType t = accumulation_type(out.dtype);
  const double max_norm = ctx.double_arg(2), p = ctx.double_arg(3);
  Value x = b.convert(self, t);
  Value hit = scatter_points(b, zeros(b, {ElementType::Pred, {rows}}), b.reshape(index, {index.shape()[0], 1}),
                             b.splat(1, {ElementType::Pred, index.shape()}), Reduce::Overwrite);
  std::vector<int64_t> rest;
  for (int64_t d = 1; d < x.rank(); ++d) rest.push_back(d);
  Value a = b.unary("abs", x);
  Value norm;
  if (std::isinf(p)) {
    norm = b.reduce(a, reduce_init(b, "maximum", t), rest, "maximum");
  } else if (p == 1) {
    norm = b.reduce(a, b.constant(0, t), rest, "add");
  } else {
    Value s = b.reduce(b.binary("power", a, b.splat(p, a.type)), b.constant(0, t), rest, "add");
    norm = b.binary("power", s, b.splat(1.0 / p, s.type));
  }
  Value limit = b.splat(max_norm, norm.type);
  Value scale = b.binary("divide", limit, b.binary("add", norm, b.splat(1e-7, norm.type)));
  Value shrink = b.binary("and", hit, b.compare(norm, limit, CompareDirection::GT));
  scale = b.select(shrink, scale, b.splat(1, norm.type));
  Value r = b.binary("multiply", x, b.broadcast_in_dim(scale, x.shape(), {0}));
  return {b.convert(r, out.dtype)};
}

// ---- embedding_bag ---------------------------------------------------------------
namespace {

enum BagMode { kSum = 0, kMean = 1, kMax = 2 };

// Bag of each index position: how many of the first `bags` offsets are at or
// before it, minus one (positions before offsets[0] fall in no bag, -1).
Value bag_of_positions(Builder& b, const Value& offsets, int64_t bags, int64_t n) {
  Value off = b.slice(as_index(b, offsets), {0}, {bags}, {1});
  Value pos = b.iota({ElementType::S64, {n, bags}}, 0);
  Value started = b.compare(b.broadcast_in_dim(off, {n, bags}, {1}), pos, CompareDirection::LE);
  Value count = b.reduce(b.convert(started, ElementType::S64), b.constant_int(0, ElementType::S64), {1}, "add");
  return b.binary("subtract", count, b.splat(1, count.type));
}

// Index positions that count: padding_idx (when >= 0) takes no part.
Value counted(Builder& b, const Value& idx, int64_t padding_idx) {
  if (padding_idx < 0) return b.splat(1, {ElementType::Pred, idx.shape()});
  return b.compare(idx, b.splat(static_cast<double>(padding_idx), idx.type), CompareDirection::NE);
}

// Rows scattered by bag: out[bag[i], :] (r)= rows[i, :].
// Rows of no features (a weight of width 0) have nothing to move; XLA's
// gather takes no slice of an empty dim.
Value scatter_rows(Builder& b, const Value& base, const Value& bag, const Value& rows, Reduce r) {
  const int64_t n = rows.shape()[0], d = rows.shape()[1];
  if (d == 0) return base;
  Value along = b.broadcast_in_dim(bag, {n, d}, {0});
  return scatter_points(b, base, point_coordinates(b, {n, d}, 0, along), rows, r);
}

Value gather_rows(Builder& b, const Value& table, const Value& idx) {
  const int64_t n = idx.shape()[0], d = table.shape()[1];
  if (d == 0) return zeros(b, {table.dtype(), {n, d}});
  return b.gather_points(table, point_coordinates(b, {n, d}, 0, b.broadcast_in_dim(idx, {n, d}, {0})));
}

}  // namespace

// _embedding_bag / _embedding_bag_forward_only(weight, indices, offsets,
// scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
// padding_idx) -> (output, offset2bag, bag_size, max_indices). Empty bags
// give zeros; mean divides by the bag's non-padding count; max keeps the
// first maximal row per feature (PyTorch's CPU kernel).
std::vector<Value> embedding_bag(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value weight = ctx.tensor(0);
  Value idx = index_1d(b, ctx.tensor(1));
  const int64_t n = idx.shape()[0], bags = out.shape.at(0), dim = out.shape.at(1);
  const int mode = static_cast<int>(ctx.int_arg(4));
  const int64_t padding_idx = ctx.int_arg(8, -1);
  const ElementType t = accumulation_type(out.dtype);
  std::vector<Value> results(4);
  // PyTorch's meta kernel sizes some of these unlike its CPU kernel (bag_size
  // by offsets with include_last_offset; max_indices unused outside max
  // mode): a 1-d result is cut or zero-padded to the meta size.
  auto shaped = [&](size_t k, const Value& v) {
    const TensorType& type = ctx.out_types.at(k);
    if (type.numel() == v.type.numel()) return b.reshape(b.convert(v, type.dtype), type.shape);
    if (type.rank() != 1 || v.rank() != 1) return zeros(b, type);
    const int64_t have = v.shape()[0], want = type.shape[0];
    Value c = b.convert(v, type.dtype);
    if (have > want) return b.slice(c, {0}, {want}, {1});
    return b.pad(c, b.constant(0, type.dtype), {0}, {want - have}, {0});
  };
  if (n == 0 || bags == 0) {
    for (size_t k = 0; k < 4; ++k) results[k] = zeros(b, ctx.out_types.at(k));
    return results;
  }
  // CPU's kernel raises RuntimeError (as CUDA's device-side assert does), not embedding's IndexError.
  ctx.check_in_range(idx, 0, weight.shape()[0], "embedding_bag: index out of range in self", /*runtime_error=*/true);
  // With include_last_offset PyTorch's CPU kernel ends the last bag at the
  // last offset for the sums, but counts (bag_size, the mean's divisor) and
  // takes the max up to the end of the indices; both are followed here.
  Value bag_to_end = bag_of_positions(b, ctx.tensor(2), bags, n);
  Value bag = bag_to_end;
  if (ctx.bool_arg(7)) {
    Value end = b.broadcast_to(b.reshape(b.slice(as_index(b, ctx.tensor(2)), {bags}, {bags + 1}, {1}), {}), {n});
    Value inside = b.compare(b.iota({ElementType::S64, {n}}, 0), end, CompareDirection::LT);
    bag = b.select(inside, bag, b.splat(-1, bag.type));
  }
  Value keep = counted(b, idx, padding_idx);
  Value rows = gather_rows(b, b.convert(weight, t), idx);
  Value count = scatter_points(b, zeros(b, {ElementType::S64, {bags}}), b.reshape(bag_to_end, {n, 1}),
                               b.convert(keep, ElementType::S64), Reduce::Sum);
  Value wide_keep = b.broadcast_in_dim(keep, {n, dim}, {0});
  Value result, max_indices = zeros(b, {ElementType::S64, {bags, dim}});
  if (mode == kMax) {
    // PyTorch's CPU and CUDA kernels take a bag's first counted row, then
    // any row greater than the maximum so far: a NaN counts only as the
    // first row (nothing is greater than it, and it is greater than
    // nothing). So a later row's NaN is left out, and the bag's maximum is
    // NaN exactly when its first row's is.
    bag = bag_to_end;
    const Value in_bag = b.clamp(b.constant_int(0, ElementType::S64), bag, b.constant_int(bags - 1, ElementType::S64));
    Value positions = b.iota({ElementType::S64, {n}}, 0);
    Value first_counted =
        scatter_points(b, b.splat(static_cast<double>(n), {ElementType::S64, {bags}}), b.reshape(bag, {n, 1}),
                       b.select(keep, positions, b.splat(static_cast<double>(n), positions.type)), Reduce::Min);
    Value is_first =
        b.compare(positions, b.gather_points(first_counted, b.reshape(in_bag, {n, 1})), CompareDirection::EQ);
    Value wide_first = b.broadcast_in_dim(is_first, {n, dim}, {0});
    Value candidate = b.binary("and", wide_keep, b.binary("or", wide_first, b.unary("not", is_nan(b, rows))));
    Value lowest = b.broadcast_to(reduce_init(b, "maximum", t), {n, dim});
    Value m =
        scatter_rows(b, b.splat(-INFINITY, {t, {bags, dim}}), bag, b.select(candidate, rows, lowest), Reduce::Max);
    Value bag_max = gather_rows(b, m, in_bag);
    Value hit =
        b.binary("or", b.compare(rows, bag_max, CompareDirection::EQ), b.binary("and", wide_first, is_nan(b, bag_max)));
    Value pos = b.select(b.binary("and", hit, wide_keep), b.iota({ElementType::S64, {n, dim}}, 0),
                         b.splat(static_cast<double>(n), {ElementType::S64, {n, dim}}));
    Value first =
        scatter_rows(b, b.splat(static_cast<double>(n), {ElementType::S64, {bags, dim}}), bag, pos, Reduce::Min);
    Value padded_idx = b.pad(idx, b.constant_int(-1, ElementType::S64), {0}, {1}, {0});  // position n: none
    if (dim > 0) max_indices = b.gather_points(padded_idx, b.reshape(first, {bags, dim, 1}));
    Value empty = b.broadcast_in_dim(b.compare(count, zeros(b, count.type), CompareDirection::EQ), {bags, dim}, {0});
    result = b.select(empty, zeros(b, m.type), m);
  } else {
    if (ctx.has(6)) rows = b.binary("multiply", rows, b.broadcast_in_dim(b.convert(ctx.tensor(6), t), {n, dim}, {0}));
    rows = b.select(wide_keep, rows, zeros(b, rows.type));
    result = scatter_rows(b, zeros(b, {t, {bags, dim}}), bag, rows, Reduce::Sum);
    if (mode == kMean) {
      Value c = b.convert(b.binary("maximum", count, b.splat(1, count.type)), t);
      result = b.binary("divide", result, b.broadcast_in_dim(c, {bags, dim}, {0}));
    }
  }
  return {b.convert(result, out.dtype), shaped(1, bag), shaped(2, count), shaped(3, max_indices)};
}

namespace {

// The embedding_bag backward ops' operands: grad (argument 0) in the
// accumulation type of the result, the indices (argument `indices`) flat.
struct BagGrad {
  TensorType out;
  ElementType t;
  Value grad, idx;
  int64_t n, bags;
};
BagGrad bag_grad(LowerContext& ctx, size_t indices) {
  const TensorType& out = ctx.out_types.at(0);
  const ElementType t = accumulation_type(out.dtype);
  Value grad = ctx.b.convert(ctx.tensor(0), t);
  Value idx = index_1d(ctx.b, ctx.tensor(indices));
  return {out, t, grad, idx, idx.shape()[0], grad.shape()[0]};
}

// Bag numbers (offset2bag) clamped to the bags there are.
Value clamp_bags(Builder& b, const Value& bag, int64_t bags) {
  return b.clamp(b.constant_int(0, ElementType::S64), bag, b.constant_int(bags - 1, ElementType::S64));
}

}  // namespace

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
// padding_idx): each counted index position adds its bag's gradient row
// (scaled by its weight, 1/bag_size for mean, 1/frequency with
// scale_grad_by_freq); max sends each feature's gradient to its maximal row.
std::vector<Value> embedding_bag_dense_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [out, t, grad, idx, n, bags] = bag_grad(ctx, 1);
  const int64_t dim = out.shape.at(1);
  const int mode = static_cast<int>(ctx.int_arg(7));
  const int64_t padding_idx = ctx.int_arg(9, -1);
  if (n == 0 || bags == 0 || out.numel() == 0) return {zeros(b, out)};
  if (mode == kMax) {
    Value mi = as_index(b, ctx.tensor(4));
    Value along = b.select(b.compare(mi, zeros(b, mi.type), CompareDirection::LT),
                           b.splat(static_cast<double>(out.shape[0]), mi.type), mi);  // none: dropped
    Value r =
        scatter_points(b, zeros(b, {t, out.shape}), point_coordinates(b, {bags, dim}, 0, along), grad, Reduce::Sum);
    return {b.convert(r, out.dtype)};
  }
  Value bag = index_1d(b, ctx.tensor(2));
  Value safe_bag = clamp_bags(b, bag, bags);
  Value rows = gather_rows(b, grad, safe_bag);
  Value scale = b.convert(counted(b, idx, padding_idx), t);
  if (ctx.has(8)) scale = b.binary("multiply", scale, b.convert(ctx.tensor(8), t));
  if (mode == kMean) {
    Value size = b.gather_points(b.convert(as_index(b, ctx.tensor(3)), t), b.reshape(safe_bag, {n, 1}));
    scale = b.binary("divide", scale, b.binary("maximum", size, b.splat(1, size.type)));
  }
  if (ctx.bool_arg(6)) {
    Value freq =
        scatter_points(b, zeros(b, {t, {out.shape[0]}}), b.reshape(idx, {n, 1}), b.splat(1, {t, {n}}), Reduce::Sum);
    scale = b.binary("divide", scale, b.gather_points(freq, b.reshape(idx, {n, 1})));
  }
  rows = b.binary("multiply", rows, b.broadcast_in_dim(scale, {n, dim}, {0}));
  Value r = scatter_rows(b, zeros(b, {t, out.shape}), idx, rows, Reduce::Sum);
  return {b.convert(r, out.dtype)};
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
// per_sample_weights, padding_idx): the dense backward's arguments with
// offsets and sparse added (PyTorch registers it for CPU/CUDA only).
std::vector<Value> embedding_bag_backward(LowerContext& ctx) {
  if (ctx.bool_arg(9)) throw std::invalid_argument("tpu: embedding_bag with sparse=True gradients is not supported");
  std::vector<Arg> args = ctx.args;
  args.erase(args.begin() + 9);  // sparse
  args.erase(args.begin() + 2);  // offsets
  LowerContext dense(ctx.b, std::move(args), ctx.out_types);
  dense.matmul_precision = ctx.matmul_precision;
  dense.platform = ctx.platform;
  return embedding_bag_dense_backward(dense);  // reads no scalars, checks no ranges: nothing to hand back
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
// offset2bag, mode, padding_idx): d(out)/d(w_i) = <grad[bag_i], weight[idx_i]>.
std::vector<Value> embedding_bag_per_sample_weights_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [out, t, grad, idx, n, bags] = bag_grad(ctx, 2);
  if (n == 0 || bags == 0) return {zeros(b, out)};
  Value bag = clamp_bags(b, index_1d(b, ctx.tensor(4)), bags);
  Value prod = b.binary("multiply", gather_rows(b, grad, bag), gather_rows(b, b.convert(ctx.tensor(1), t), idx));
  Value dot = b.reduce(prod, b.constant(0, t), {1}, "add");
  dot = b.select(counted(b, idx, ctx.int_arg(6, -1)), dot, zeros(b, dot.type));
  return {b.convert(dot, out.dtype)};
}

// ---- segment_reduce -----------------------------------------------------------------
namespace {

// Where each position along `axis` of data goes: segment ids shaped like
// lengths' leading dims + [N] (-1 past the last segment), and the segment
// lengths. `lengths` (leading dims + [S]) or `offsets` (leading + [S + 1]).
struct Segments {
  Value id;      // s64, lead + [N]
  Value length;  // s64, lead + [S]
  int64_t count = 0;
};

Segments segments_of(LowerContext& ctx, size_t lengths_at, size_t offsets_at, int64_t n) {
  Builder& b = ctx.b;
  Value starts, ends_all;
  Segments s;
  if (ctx.has(lengths_at)) {
    Value len = as_index(b, ctx.tensor(lengths_at));
    const int64_t axis = len.rank() - 1;
    s.count = len.shape()[axis];
    s.length = len;
    Value ends = prefix_sum(b, len, axis);
    starts = b.binary("subtract", ends, len);
    ends_all = ends;
  } else {
    Value off = as_index(b, ctx.tensor(offsets_at));
    const int64_t axis = off.rank() - 1;
    s.count = off.shape()[axis] - 1;
    Shape lo(off.rank(), 0), hi = off.shape(), st(off.rank(), 1);
    hi[axis] = s.count;
    starts = b.slice(off, lo, hi, st);
    lo[axis] = 1;
    hi[axis] = s.count + 1;
    ends_all = b.slice(off, lo, hi, st);
    s.length = b.binary("subtract", ends_all, starts);
  }
  // id(p) = #{j : start_j <= p and p < end_j ... } - 1, via starts only,
  // and -1 where p is past every segment's end.
  const int64_t lead = starts.rank() - 1;
  Shape pair(starts.shape().begin(), starts.shape().end() - 1);
  pair.push_back(n);
  pair.push_back(s.count);
  std::vector<int64_t> start_dims;
  for (int64_t d = 0; d < lead; ++d) start_dims.push_back(d);
  start_dims.push_back(lead + 1);
  Value p = b.iota({ElementType::S64, pair}, lead);
  Value in = b.binary("and", b.compare(b.broadcast_in_dim(starts, pair, start_dims), p, CompareDirection::LE),
                      b.compare(p, b.broadcast_in_dim(ends_all, pair, start_dims), CompareDirection::LT));
  Value one_hot = b.select(in, b.iota({ElementType::S64, pair}, lead + 1), b.splat(-1, {ElementType::S64, pair}));
  s.id = b.reduce(one_hot, reduce_init(b, "maximum", ElementType::S64), {lead + 1}, "maximum");
  return s;
}

Reduce segment_reduce_kind(const std::string& name) {
  if (name == "max") return Reduce::Max;
  if (name == "min") return Reduce::Min;
  return parse_reduce(name);
}

// Coordinates of every data element in the result: its segment id along axis.
Value segment_coords(Builder& b, const Segments& s, const Shape& data_shape, int64_t axis) {
  std::vector<int64_t> id_dims;
  for (int64_t d = 0; d <= axis; ++d) id_dims.push_back(d);
  return point_coordinates(b, data_shape, axis, b.broadcast_in_dim(s.id, data_shape, id_dims));
}

}  // namespace

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe,
// initial): each segment reduced from `initial` (or the reduction's
// identity); mean divides by the segment length, an empty segment giving
// `initial` (NaN without one), as PyTorch's CPU kernel does.
std::vector<Value> segment_reduce(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Reduce r = segment_reduce_kind(ctx.args.at(1).s);
  Value data = ctx.tensor(0);
  const int64_t axis = wrap_dim(ctx.int_arg(5), data.rank());
  const ElementType t = accumulation_type(out.dtype);
  Segments s = segments_of(ctx, 2, 4, data.shape()[axis]);
  const bool has_initial = ctx.has(7);
  Value init = has_initial ? ctx.scalar_arg(7, t) : identity_of(b, r, t);
  Value base = b.broadcast_to(init, out.shape);
  if (data.type.numel() == 0 || out.numel() == 0) return {b.convert(base, out.dtype)};
  Value coords = segment_coords(b, s, data.shape(), axis);
  Value result;
  // bfloat16/float16 sums and products: CPU's kernel adds each element in
  // turn in the dtype itself (scalar_t arithmetic, rounding every step), so
  // the positions along the axis are taken one at a time, in order.
  const bool in_turn = t != out.dtype && (r == Reduce::Sum || r == Reduce::Mean || r == Reduce::Prod);
  auto rounded = [&](const Value& v) { return in_turn ? b.convert(b.convert(v, out.dtype), t) : v; };
  if (in_turn) {
    const Value data_t = b.convert(data, t);
    Shape sizes = data.shape();
    sizes[axis] = 1;
    Shape coord_sizes = sizes;
    coord_sizes.push_back(coords.shape().back());
    auto out_of = b.while_loop(
        {b.constant_int(0, ElementType::S64), rounded(base)},
        [&](Builder& rb, const std::vector<Value>& st) {
          return std::vector<Value>{
              rb.compare(st[0], rb.constant_int(data.shape()[axis], ElementType::S64), CompareDirection::LT)};
        },
        [&](Builder& rb, const std::vector<Value>& st) {
          std::vector<Value> starts(data.rank(), rb.constant_int(0, ElementType::S64));
          starts[axis] = st[0];
          Value elements = rb.dynamic_slice(data_t, starts, sizes);
          starts.push_back(rb.constant_int(0, ElementType::S64));
          Value where = rb.dynamic_slice(coords, starts, coord_sizes);
          Value next = scatter_points(rb, st[1], where, elements, r == Reduce::Prod ? Reduce::Prod : Reduce::Sum);
          return std::vector<Value>{rb.binary("add", st[0], rb.constant_int(1, ElementType::S64)),
                                    rb.convert(rb.convert(next, out.dtype), t)};
        });
    result = out_of[1];
  } else {
    result = scatter_points(b, base, coords, b.convert(data, t), r);
  }
  if (r == Reduce::Mean) {
    std::vector<int64_t> len_dims;
    for (int64_t d = 0; d <= axis; ++d) len_dims.push_back(d);
    Value len = b.broadcast_in_dim(rounded(b.convert(s.length, t)), out.shape, len_dims);
    Value mean = b.binary("divide", result, len);
    Value empty = b.compare(len, zeros(b, len.type), CompareDirection::EQ);
    Value empty_value = has_initial ? rounded(base) : b.splat(NAN, len.type);
    result = b.select(empty, empty_value, mean);
  }
  return {b.convert(result, out.dtype)};
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets,
// axis, initial): sum copies the segment's gradient to its elements, mean
// divides it by the length, max/min share it among the elements equal to
// the result, prod multiplies it by the product of the other elements.
std::vector<Value> segment_reduce_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Reduce r = segment_reduce_kind(ctx.args.at(3).s);
  const ElementType t = accumulation_type(out.dtype);
  Value grad = b.convert(ctx.tensor(0), t), output = b.convert(ctx.tensor(1), t), data = b.convert(ctx.tensor(2), t);
  const int64_t axis = wrap_dim(ctx.int_arg(6), data.rank());
  if (data.type.numel() == 0 || grad.type.numel() == 0) return {zeros(b, out)};
  Segments s = segments_of(ctx, 4, 5, data.shape()[axis]);
  Value coords = segment_coords(b, s, data.shape(), axis);
  // Positions past the last segment read segment 0 and are zeroed below.
  Value valid = b.compare(coords, zeros(b, coords.type), CompareDirection::GE);
  Value ok = b.reduce(valid, b.constant(1, ElementType::Pred), {coords.rank() - 1}, "and");
  Value safe = b.binary("maximum", coords, zeros(b, coords.type));
  Value g = b.gather_points(grad, safe);
  Value result = g;
  if (r == Reduce::Mean) {
    std::vector<int64_t> len_dims;
    for (int64_t d = 0; d <= axis; ++d) len_dims.push_back(d);
    Value len = b.broadcast_in_dim(b.convert(s.length, t), grad.shape(), len_dims);
    result = b.gather_points(b.binary("divide", grad, len), safe);
  } else if (r == Reduce::Max || r == Reduce::Min) {
    Value o = b.gather_points(output, safe);
    Value hit = b.binary("or", b.compare(data, o, CompareDirection::EQ), is_nan(b, o));
    Value ties = scatter_points(b, zeros(b, grad.type), coords, b.convert(hit, t), Reduce::Sum);
    Value share = b.binary("divide", grad, b.binary("maximum", ties, b.splat(1, ties.type)));
    result = b.select(hit, b.gather_points(share, safe), zeros(b, data.type));
  } else if (r == Reduce::Prod) {
    Value o = b.gather_points(output, safe);
    result = b.binary("multiply", g, b.binary("divide", o, data));
  }
  return {b.convert(b.select(ok, result, zeros(b, result.type)), out.dtype)};
}

}  // namespace torch_tpu::lower
