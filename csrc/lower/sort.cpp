// Sorting and selection: sort, topk, kthvalue, median/nanmedian, mode.
// One stable stablehlo.sort of (values, positions) whose comparator puts NaN
// above every number (PyTorch's order: NaN is the largest value), so ties
// keep their input order and every selection is a slice or a gather of the
// sorted pair.
#include "lower/sort.h"

#include <limits>
#include <stdexcept>
#include <string>

#include "lower/common/reduction.h"
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// a before b: a < b (descending: a > b), NaN counting as the largest value.
Value comes_before(Builder& b, const Value& a, const Value& c, bool descending) {
  Value before = b.compare(a, c, descending ? CompareDirection::GT : CompareDirection::LT);
  if (!hlo::is_float(a.dtype())) return before;
  const Value& larger = descending ? a : c;   // the one a NaN must be
  const Value& smaller = descending ? c : a;  // ... and this one must not be
  Value nan_order = b.binary("and", is_nan(b, larger), b.unary("not", is_nan(b, smaller)));
  return b.binary("or", before, nan_order);
}

Shape without(const Shape& s, int64_t dim) {
  Shape r = s;
  r.erase(r.begin() + dim);
  return r;
}

Value slice_along(Builder& b, const Value& x, int64_t dim, int64_t start, int64_t limit) {
  Shape lo(x.rank(), 0), hi = x.shape(), st(x.rank(), 1);
  lo[dim] = start;
  hi[dim] = limit;
  return b.slice(x, lo, hi, st);
}

// The values and indices at sorted position `pos` (x's shape without dim).
std::vector<Value> pick_sorted(LowerContext& ctx, const Sorted& s, int64_t dim, const Value& pos) {
  Builder& b = ctx.b;
  return {b.reshape(take_along(b, s.values, dim, pos), ctx.out_types.at(0).shape),
          b.reshape(take_along(b, s.indices, dim, pos), ctx.out_types.at(1).shape)};
}

// CPU raises IndexError for selecting along an empty dim (meta does not check).
void check_nonempty(const DimInput& in, const char* op) {
  if (in.x.shape()[in.dim] == 0) {
    throw std::out_of_range(std::string(op) + "(): Expected reduction dim " + std::to_string(in.dim) +
                            " to have non-zero size.");
  }
}

// Sorted position of the median along `in.dim`. PyTorch: median is the lower
// median, NaN if the slice has a NaN (its index the first NaN's, which sorts
// first among the NaNs); nanmedian is the lower median of the non-NaN values
// (position n / 2 of an all-NaN slice, as PyTorch's CPU kernel answers).
Value median_position(Builder& b, const Value& x, int64_t dim, bool ignore_nan) {
  const int64_t n = x.shape()[dim];
  TensorType pos_t{ElementType::S64, without(x.shape(), dim)};
  if (!hlo::is_float(x.dtype())) return b.splat(static_cast<double>((n - 1) / 2), pos_t);
  Value nans = b.reduce(b.convert(is_nan(b, x), ElementType::S64), b.constant_int(0, ElementType::S64), {dim}, "add");
  Value count = b.binary("subtract", b.splat(static_cast<double>(n), pos_t), nans);
  if (!ignore_nan) {
    Value has_nan = b.compare(nans, zeros(b, pos_t), CompareDirection::GT);
    return b.select(has_nan, count, b.splat(static_cast<double>((n - 1) / 2), pos_t));
  }
  Value lower = b.binary("divide", b.binary("subtract", count, b.splat(1, pos_t)), b.splat(2, pos_t));
  Value all_nan = b.compare(count, zeros(b, pos_t), CompareDirection::EQ);
  return b.select(all_nan, b.splat(static_cast<double>(n / 2), pos_t), lower);
}

std::vector<Value> median_of_dim(LowerContext& ctx, bool ignore_nan) {
  DimInput in = dim_input(ctx, ctx.tensor(0), 1);
  check_nonempty(in, ignore_nan ? "nanmedian" : "median");
  if (ctx.out_types.at(0).numel() == 0) return {zeros(ctx.b, ctx.out_types[0]), zeros(ctx.b, ctx.out_types[1])};
  Sorted s = sort_along(ctx.b, in.x, in.dim, false);
  return pick_sorted(ctx, s, in.dim, median_position(ctx.b, in.x, in.dim, ignore_nan));
}

// median() / nanmedian() of every element; an empty input gives NaN.
std::vector<Value> median_of_all(LowerContext& ctx, bool ignore_nan) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value x = ctx.tensor(0);
  if (x.type.numel() == 0) return {full(b, std::numeric_limits<double>::quiet_NaN(), out)};
  x = b.reshape(x, {x.type.numel()});
  Sorted s = sort_along(b, x, 0, false);
  Value v = take_along(b, s.values, 0, median_position(b, x, 0, ignore_nan));
  return {b.reshape(v, out.shape)};
}

// Position of the first maximum of `score` (s64) along `dim`.
Value first_argmax(Builder& b, const Value& score, int64_t dim) {
  Value index = b.iota(score.type, dim);
  Value lowest = reduce_init(b, "maximum", ElementType::S64);
  return b.reduce({score, index}, {lowest, b.constant_int(0, ElementType::S64)}, {dim},
                  [&](Builder& rb, const std::vector<Value>& a) {
                    Value gt = rb.compare(a[0], a[2], CompareDirection::GT);
                    Value eq = rb.compare(a[0], a[2], CompareDirection::EQ);
                    Value first = rb.compare(a[1], a[3], CompareDirection::LT);
                    Value pick = rb.binary("or", gt, rb.binary("and", eq, first));
                    return std::vector<Value>{rb.select(pick, a[0], a[2]), rb.select(pick, a[1], a[3])};
                  })[1];
}

}  // namespace

Sorted sort_along(Builder& b, const Value& x, int64_t dim, bool descending) {
  Value index = b.iota({ElementType::S64, x.shape()}, dim);
  std::vector<Value> r = b.sort({x, index}, dim, /*is_stable=*/true, [&](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{comes_before(rb, a[0], a[1], descending)};
  });
  return {r[0], r[1]};
}

Value take_along(Builder& b, const Value& x, int64_t dim, const Value& pos) {
  const Shape& s = pos.shape();
  const int64_t r = x.rank();
  Shape column = s;
  column.push_back(1);
  std::vector<Value> parts;
  for (int64_t d = 0, k = 0; d < r; ++d) {
    Value c = d == dim ? pos : b.iota({ElementType::S64, s}, k++);
    parts.push_back(b.reshape(c, column));
  }
  return b.gather_points(x, b.concatenate(parts, static_cast<int64_t>(s.size())));
}

// sort(self, dim, descending) and sort.stable(self, *, stable, dim,
// descending): the stable overload's arg 1 is a bool (or None), the other's
// the int dim. Every sort here is stable (a valid result for stable=False).
std::vector<Value> sort(LowerContext& ctx) {
  Builder& b = ctx.b;
  const size_t dim_at = ctx.has(1) && ctx.args[1].kind == Arg::Kind::Int ? 1 : 2;
  const TensorType& vt = ctx.out_types.at(0);
  const TensorType& it = ctx.out_types.at(1);
  if (vt.numel() == 0) return {zeros(b, vt), zeros(b, it)};
  DimInput in = dim_input(ctx, ctx.tensor(0), dim_at);
  Sorted s = sort_along(b, in.x, in.dim, ctx.bool_arg(dim_at + 1));
  return {b.reshape(s.values, vt.shape), b.reshape(s.indices, it.shape)};
}

// topk(self, k, dim, largest, sorted): the first k of a sort, descending
// for the largest; the result is sorted whatever `sorted` says.
std::vector<Value> topk(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& vt = ctx.out_types.at(0);
  const TensorType& it = ctx.out_types.at(1);
  if (vt.numel() == 0) return {zeros(b, vt), zeros(b, it)};
  DimInput in = dim_input(ctx, ctx.tensor(0), 2);
  const int64_t k = ctx.int_arg(1);
  Sorted s = sort_along(b, in.x, in.dim, ctx.bool_arg(3, true));
  return {b.reshape(slice_along(b, s.values, in.dim, 0, k), vt.shape),
          b.reshape(slice_along(b, s.indices, in.dim, 0, k), it.shape)};
}

// kthvalue(self, k, dim, keepdim): the k-th smallest (1-based).
std::vector<Value> kthvalue(LowerContext& ctx) {
  Builder& b = ctx.b;
  DimInput in = dim_input(ctx, ctx.tensor(0), 2);
  const int64_t k = ctx.int_arg(1);
  if (k < 1 || k > in.x.shape()[in.dim]) {
    throw std::runtime_error("kthvalue(): selected number k out of range for dimension " + std::to_string(in.dim));
  }
  if (ctx.out_types.at(0).numel() == 0) return {zeros(b, ctx.out_types[0]), zeros(b, ctx.out_types[1])};
  Sorted s = sort_along(b, in.x, in.dim, false);
  return pick_sorted(ctx, s, in.dim,
                     b.splat(static_cast<double>(k - 1), {ElementType::S64, without(in.x.shape(), in.dim)}));
}

std::vector<Value> median_all(LowerContext& ctx) { return median_of_all(ctx, false); }
std::vector<Value> nanmedian_all(LowerContext& ctx) { return median_of_all(ctx, true); }
std::vector<Value> median_dim(LowerContext& ctx) { return median_of_dim(ctx, false); }
std::vector<Value> nanmedian_dim(LowerContext& ctx) { return median_of_dim(ctx, true); }

// mode(self, dim, keepdim): the most frequent value, the smallest among
// equally frequent ones, and the index of its last occurrence (PyTorch's CPU
// kernel walks the sorted runs and keeps the first longest; NaNs never
// compare equal, so each is a run of its own).
std::vector<Value> mode(LowerContext& ctx) {
  Builder& b = ctx.b;
  DimInput in = dim_input(ctx, ctx.tensor(0), 1);
  check_nonempty(in, "mode");
  if (ctx.out_types.at(0).numel() == 0) return {zeros(b, ctx.out_types[0]), zeros(b, ctx.out_types[1])};
  const int64_t n = in.x.shape()[in.dim];
  Sorted s = sort_along(b, in.x, in.dim, false);
  Value pos = b.iota({ElementType::S64, in.x.shape()}, in.dim);
  // Run starts and ends: an element differing from its neighbour.
  Value differs = b.compare(slice_along(b, s.values, in.dim, 1, n), slice_along(b, s.values, in.dim, 0, n - 1),
                            CompareDirection::NE);
  Shape no_pad(in.x.rank(), 0), edge(in.x.rank(), 0);
  edge[in.dim] = 1;
  Value yes = b.constant(1, ElementType::Pred);
  Value starts = b.pad(differs, yes, edge, no_pad, no_pad);
  Value ends = b.pad(differs, yes, no_pad, edge, no_pad);
  Value zero = zeros(b, pos.type);
  auto keep_max = [](Builder& rb, const std::vector<Value>& a, const std::vector<Value>& c) {
    return std::vector<Value>{rb.binary("maximum", a[0], c[0])};
  };
  Value run_start =
      inclusive_scan(b, {b.select(starts, pos, zero)}, in.dim, {b.constant_int(0, ElementType::S64)}, keep_max)[0];
  Value length = b.binary("add", b.binary("subtract", pos, run_start), b.splat(1, pos.type));
  Value best = first_argmax(b, b.select(ends, length, zero), in.dim);
  return pick_sorted(ctx, s, in.dim, best);
}

}  // namespace torch_tpu::lower
