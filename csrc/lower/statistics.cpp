// Statistics and searches: nansum, aminmax, count_nonzero, trace, renorm,
// searchsorted/bucketize, isin, histc and histogram/histogramdd. Result shapes and dtypes
// are PyTorch's (ctx.out_types); low-precision floats are computed in float32 and rounded once (at::acc_type).
#include "lower/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// The type values and boundaries are compared in: their common type.
ElementType common_type(ElementType a, ElementType b) {
  if (a == b) return a;
  if (hlo::is_float(a) || hlo::is_float(b)) {
    if (a == ElementType::F64 || b == ElementType::F64) return ElementType::F64;
    return ElementType::F32;
  }
  return ElementType::S64;
}

// seq[..., pos[...]] along seq's last dim: pos has seq's leading dims (when
// seq has any) followed by its own.
Value gather_last(Builder& b, const Value& seq, const Value& pos) {
  const int64_t pr = pos.rank();
  Shape column = pos.shape();
  column.push_back(1);
  std::vector<Value> parts;
  for (int64_t d = 0; d + 1 < seq.rank(); ++d) parts.push_back(b.reshape(b.iota(pos.type, d), column));
  parts.push_back(b.reshape(pos, column));
  return b.gather_points(seq, b.concatenate(parts, pr));
}

// Binary search of each value in `values` among the last dim of `seq`
// (1-d, or with the values' leading dims), the way PyTorch's kernel does it:
// the first position whose boundary is >= value (> with `right`). Unrolled to
// the bit length of the boundary count.
Value binary_search(Builder& b, const Value& seq, const Value& values, bool right) {
  const int64_t n = seq.shape().back();
  TensorType pos_t{ElementType::S64, values.shape()};
  Value lo = zeros(b, pos_t), hi = b.splat(static_cast<double>(n), pos_t);
  if (n == 0) return lo;
  Value one = b.splat(1, pos_t);
  Value last = b.splat(static_cast<double>(n - 1), pos_t);
  for (int64_t size = n; size > 0; size /= 2) {
    Value mid = b.binary("shift_right_logical", b.binary("add", lo, hi), one);
    Value boundary = gather_last(b, seq, b.binary("minimum", mid, last));
    // Go right while the boundary is not >= (>) the value: NaN values go
    // past every boundary, as on CPU.
    Value stop = b.compare(boundary, values, right ? CompareDirection::GT : CompareDirection::GE);
    Value active = b.compare(lo, hi, CompareDirection::LT);
    lo = b.select(b.binary("and", active, b.unary("not", stop)), b.binary("add", mid, one), lo);
    hi = b.select(b.binary("and", active, stop), mid, hi);
  }
  return lo;
}

// A Scalar or tensor argument as a value of type `t`.
Value operand(LowerContext& ctx, size_t i, ElementType t) {
  if (ctx.args.at(i).kind == Arg::Kind::Tensor) return ctx.b.convert(ctx.tensor(i), t);
  return ctx.cast_scalar(ctx.args.at(i).scalar, t);
}

ElementType operand_type(LowerContext& ctx, size_t i) {
  if (ctx.args.at(i).kind == Arg::Kind::Tensor) return ctx.tensor(i).dtype();
  return ctx.args[i].scalar.kind == ScalarArg::Kind::Float ? ElementType::F32 : ElementType::S64;
}

}  // namespace

// nansum(self, dim?, keepdim, *, dtype): NaN counts as zero.
std::vector<Value> nansum(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  if (hlo::is_float(acc)) x = b.select(is_nan(b, x), zeros(b, x.type), x);
  Value s = reduce_with(b, x, reduction_dims(ctx, 1, x.rank()), acc == ElementType::Pred ? "or" : "add");
  return {b.reshape(b.convert(s, out.dtype), out.shape)};
}

// aminmax(self, *, dim?, keepdim) -> (min, max), NaN propagating.
std::vector<Value> aminmax(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (x.type.numel() == 0 && !ctx.has(1)) {
    throw std::runtime_error(
        "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  }
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank());
  const TensorType& t0 = ctx.out_types.at(0);
  const TensorType& t1 = ctx.out_types.at(1);
  // CPU's structured kernel requires out= results of self's dtype (meta lets others through).
  for (const TensorType* t : {&t0, &t1}) {
    if (t->dtype != x.dtype()) {
      throw std::runtime_error(std::string("Expected out tensor to have dtype ") + hlo::mlir_name(x.dtype()) +
                               ", but got " + hlo::mlir_name(t->dtype) + " instead");
    }
  }
  return {b.reshape(nan_max_min(b, x, dims, false), t0.shape), b.reshape(nan_max_min(b, x, dims, true), t1.shape)};
}

// count_nonzero.dim_IntList(self, dim[]): an empty list counts everything.
std::vector<Value> count_nonzero(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value x = ctx.tensor(0);
  Value nz = b.convert(b.convert(x, ElementType::Pred), ElementType::S64);
  return {b.reshape(b.convert(reduce_with(b, nz, reduction_dims(ctx, 1, x.rank()), "add"), out.dtype), out.shape)};
}

// trace(self): the sum of the main diagonal of a matrix; integers sum to int64.
std::vector<Value> trace(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  Value on_diagonal = b.compare(b.iota({ElementType::S64, x.shape()}, 0), b.iota({ElementType::S64, x.shape()}, 1),
                                CompareDirection::EQ);
  Value d = b.select(on_diagonal, x, zeros(b, x.type));
  return {
      b.reshape(b.convert(reduce_with(b, d, {0, 1}, acc == ElementType::Pred ? "or" : "add"), out.dtype), out.shape)};
}

// renorm(self, p, dim, maxnorm): each slice along `dim` whose p-norm exceeds
// maxnorm is scaled by maxnorm / (norm + 1e-7) (PyTorch's factor).
std::vector<Value> renorm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  if (x.rank() == 0) x = b.reshape(x, {1});
  const int64_t dim = wrap_dim(ctx.int_arg(2), x.rank());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != dim) dims.push_back(d);
  }
  Value norm = vector_norm(b, x, dims, ctx.double_arg(1));  // real, also for a complex x
  Value maxnorm = b.broadcast_to(ctx.cast_scalar(ctx.args.at(3).scalar, norm.dtype()), norm.shape());
  Value factor = b.binary("divide", maxnorm, b.binary("add", norm, b.splat(1e-7, norm.type)));
  factor = b.select(b.compare(norm, maxnorm, CompareDirection::GT), factor, b.splat(1, norm.type));
  Value r = b.binary("multiply", x, b.convert(b.broadcast_in_dim(factor, x.shape(), {dim}), x.dtype()));
  return {b.reshape(b.convert(r, out.dtype), out.shape)};
}

// searchsorted.Tensor / .Scalar(sorted_sequence, self, *, out_int32, right,
// side, sorter): side "right" means right=True; `sorter` gives the order
// of an unsorted sequence.
std::vector<Value> searchsorted(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const ElementType t = common_type(ctx.tensor(0).dtype(), operand_type(ctx, 1));
  Value seq = b.convert(ctx.tensor(0), t);
  Value values = operand(ctx, 1, t);
  bool right = ctx.bool_arg(3);
  if (ctx.has(4) && ctx.args[4].kind == Arg::Kind::String) right = ctx.args[4].s == "right";
  if (ctx.has(5)) {
    Value sorter = b.convert(ctx.tensor(5), ElementType::S64);
    ctx.check_in_range(sorter, 0, seq.shape().back(), "searchsorted(): sorter index out of range");
    seq = gather_last(b, seq, sorter);
  }
  return {b.reshape(b.convert(binary_search(b, seq, values, right), out.dtype), out.shape)};
}

// bucketize.Tensor / .Scalar(self, boundaries, *, out_int32, right): a
// searchsorted of every value among one 1-d boundary list.
std::vector<Value> bucketize(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (ctx.tensor(1).rank() != 1) {  // CPU's check; the meta kernel does not make it
    throw std::runtime_error("boundaries tensor must be 1 dimension, but got dim(" +
                             std::to_string(ctx.tensor(1).rank()) + ")");
  }
  if (out.numel() == 0) return {zeros(b, out)};
  const ElementType t = common_type(operand_type(ctx, 0), ctx.tensor(1).dtype());
  Value values = operand(ctx, 0, t);
  Value seq = b.convert(ctx.tensor(1), t);
  return {b.reshape(b.convert(binary_search(b, seq, values, ctx.bool_arg(3)), out.dtype), out.shape)};
}

// isin(elements, test_elements, *, assume_unique, invert): each element
// compared with every test element (NaN is in nothing).
std::vector<Value> isin(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType t = common_type(operand_type(ctx, 0), operand_type(ctx, 1));
  Value e = operand(ctx, 0, t), s = operand(ctx, 1, t);
  const bool invert = ctx.bool_arg(3);
  const int64_t n = s.type.numel();
  if (out.numel() == 0 || n == 0) return {full(b, invert ? 1 : 0, out)};
  Value flat = b.reshape(s, {n});
  Shape pair = e.shape();
  pair.push_back(n);
  std::vector<int64_t> e_dims;
  for (int64_t d = 0; d < e.rank(); ++d) e_dims.push_back(d);
  Value eq =
      b.compare(b.broadcast_in_dim(e, pair, e_dims), b.broadcast_in_dim(flat, pair, {e.rank()}), CompareDirection::EQ);
  Value found = b.reduce(eq, b.constant(0, ElementType::Pred), {e.rank()}, "or");
  if (invert) found = b.unary("not", found);
  return {b.reshape(found, out.shape)};
}

// histc: counts of the input's elements in `bins` equal bins over [min, max];
// min == max means the data's own range, widened by 1 either side where that
// is a single value. Elements outside the range (and NaN) are not counted;
// max falls in the last bin. A bin is (x - min) * bins / (max - min) in the
// input's arithmetic (integers: truncating division, as CUDA's kernel; CPU
// takes floats only), so integer inputs work as on CUDA: MoE routers count
// tokens per expert this way. Every shape is static, so it runs on the device.
std::vector<Value> histc(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  const int64_t bins = out.shape.at(0);
  const int64_t n = x.type.numel();
  if (n == 0) return {b.splat(0, out)};
  const bool integral = !hlo::is_float(x.dtype());
  const ElementType t = integral ? ElementType::S64 : accumulation_type(x.dtype());
  Value v = b.convert(b.reshape(x, {n}), t);
  const double min_arg = ctx.has(2) ? ctx.args[2].scalar.as_double() : 0.0;
  const double max_arg = ctx.has(3) ? ctx.args[3].scalar.as_double() : 0.0;
  Value lo, hi;
  if (min_arg == max_arg) {
    lo = reduce_with(b, v, {0}, "minimum");
    hi = reduce_with(b, v, {0}, "maximum");
    if (!integral) {
      // CUDA reads this range to the host and raises; here the program
      // checks it and the device layer raises by the next synchronization.
      const Value inf = b.constant(std::numeric_limits<double>::infinity(), t);
      Value finite = b.binary("and", b.compare(b.unary("abs", lo), inf, CompareDirection::LT),
                              b.compare(b.unary("abs", hi), inf, CompareDirection::LT));
      ctx.check_all(finite, "histc(): range of [min, max] of the input's values is not finite");
    }
    Value one_value = b.compare(lo, hi, CompareDirection::EQ);
    lo = b.select(one_value, b.binary("subtract", lo, b.constant(1, t)), lo);
    hi = b.select(one_value, b.binary("add", hi, b.constant(1, t)), hi);
  } else {
    lo = integral ? b.constant_int(static_cast<int64_t>(min_arg), t) : b.constant(min_arg, t);
    hi = integral ? b.constant_int(static_cast<int64_t>(max_arg), t) : b.constant(max_arg, t);
  }
  const TensorType vt = v.type;
  // bfloat16/float16: CPU's kernel computes the position in the input type,
  // c10's arithmetic rounding after each operation.
  const bool rounds = !integral && t != x.dtype();
  auto rounded = [&](const Value& r) { return rounds ? b.convert(b.convert(r, x.dtype()), t) : r; };
  Value lo_n = b.broadcast_to(lo, vt.shape), hi_n = b.broadcast_to(hi, vt.shape);
  Value scaled = rounded(
      b.binary("multiply", rounded(b.binary("subtract", v, lo_n)), rounded(b.splat(static_cast<double>(bins), vt))));
  Value position = rounded(b.binary("divide", scaled, rounded(b.binary("subtract", hi_n, lo_n))));
  const TensorType index_type{ElementType::S64, vt.shape};
  // In range, position >= 0: converting truncates, which is floor here.
  Value bin =
      b.binary("minimum", b.convert(position, ElementType::S64), b.splat(static_cast<double>(bins - 1), index_type));
  Value inside = b.binary("and", b.compare(v, lo_n, CompareDirection::GE), b.compare(v, hi_n, CompareDirection::LE));
  // Outside elements add 0 to bin 0: every index stays in bounds.
  Value index = b.select(inside, bin, b.splat(0, index_type));
  const ElementType count_type = integral ? ElementType::S64 : t;
  Value ones = b.select(inside, b.splat(1, {count_type, vt.shape}), b.splat(0, {count_type, vt.shape}));
  Value counts = b.scatter_points(b.splat(0, {count_type, {bins}}), index, ones, hlo::accumulate);
  return {b.convert(counts, out.dtype)};
}

namespace {

// One dimension's bins for histogram/histogramdd: 1-d increasing edges of
// the points' type.
struct HistogramBins {
  Value edges;
  // Edges from linspace: CPU's kernel maps a value to its bin by linear
  // interpolation and corrects that among the neighbouring edges
  // (LINEAR_INTERPOLATION_WITH_LOCAL_SEARCH); others are searched
  // (BINARY_SEARCH, std::upper_bound).
  bool linear = false;
};

// edges[k] as a 0-d value.
Value edge_at(Builder& b, const Value& edges, int64_t k) { return b.reshape(b.slice(edges, {k}, {k + 1}, {1}), {}); }

// Each value's bin among `bins` (CPU's aten/src/ATen/native/cpu/HistogramKernel.cpp): the
// last edge at or below it, the last bin also taking its right edge; `inside`
// is false for values outside [first, last] edge and NaN.
std::pair<Value, Value> bin_of(Builder& b, const Value& x, const HistogramBins& bins) {
  const int64_t n_edges = bins.edges.shape().at(0);
  const Shape& shape = x.shape();
  const TensorType index_t{ElementType::S64, shape};
  Value left = b.broadcast_to(edge_at(b, bins.edges, 0), shape);
  Value right = b.broadcast_to(edge_at(b, bins.edges, n_edges - 1), shape);
  Value inside = b.binary("and", b.compare(x, left, CompareDirection::GE), b.compare(x, right, CompareDirection::LE));
  Value upper;  // std::upper_bound's position
  if (!bins.linear) {
    upper = binary_search(b, bins.edges, x, /*right=*/true);
  } else {
    // (x - left) * (n_edges - 1) / (right - left) in the points' type,
    // truncated; then upper_bound over edges [pos - 1, pos + 2).
    Value scaled =
        b.binary("multiply", b.binary("subtract", x, left), b.splat(static_cast<double>(n_edges - 1), x.type));
    Value guess = b.convert(b.binary("divide", scaled, b.binary("subtract", right, left)), ElementType::S64);
    guess = b.select(inside, guess, b.splat(0, index_t));  // NaN and outside: any bin, not counted
    Value lo = b.binary("maximum", b.binary("subtract", guess, b.splat(1, index_t)), b.splat(0, index_t));
    Value hi = b.binary("minimum", b.binary("add", guess, b.splat(2, index_t)),
                        b.splat(static_cast<double>(n_edges), index_t));
    upper = lo;
    for (int64_t k = 0; k < 3; ++k) {
      Value at = b.binary("add", lo, b.splat(static_cast<double>(k), index_t));
      Value edge =
          gather_last(b, bins.edges, b.binary("minimum", at, b.splat(static_cast<double>(n_edges - 1), index_t)));
      Value counts = b.binary("and", b.compare(at, hi, CompareDirection::LT), b.compare(edge, x, CompareDirection::LE));
      upper = b.binary("add", upper, b.convert(counts, ElementType::S64));
    }
  }
  Value bin = b.binary("subtract", upper, b.splat(1, index_t));
  bin = b.binary("minimum", bin, b.splat(static_cast<double>(n_edges - 2), index_t));
  bin = b.binary("maximum", bin, b.splat(0, index_t));
  return {b.select(inside, bin, b.splat(0, index_t)), inside};
}

// The histogram of `points` ([M, D], the points' type) over `bins` (D of
// them), each point adding its weight ([M], or 1) to its bin; with
// `density`, divided by the total and by each bin's volume, as CPU's
// histogramdd_out_cpu_template does.
Value histogram_of(Builder& b, const Value& points, const std::vector<HistogramBins>& bins,
                   const std::optional<Value>& weight, bool density, const TensorType& out) {
  const int64_t m = points.shape().at(0);
  if (out.numel() == 0) return zeros(b, out);
  const ElementType t = out.dtype;
  const TensorType index_t{ElementType::S64, {m}};
  Value flat_index = b.splat(0, index_t);
  Value counted = b.splat(1, {ElementType::Pred, {m}});
  int64_t stride = out.numel();
  for (size_t d = 0; d < bins.size(); ++d) {
    stride /= out.shape.at(d);
    Value x = b.reshape(b.slice(points, {0, static_cast<int64_t>(d)}, {m, static_cast<int64_t>(d) + 1}, {1, 1}), {m});
    auto [bin, inside] = bin_of(b, x, bins[d]);
    flat_index = b.binary("add", flat_index, b.binary("multiply", bin, b.splat(static_cast<double>(stride), index_t)));
    counted = b.binary("and", counted, inside);
  }
  const TensorType update_t{t, {m}};
  Value update = weight ? b.convert(*weight, t) : b.splat(1, update_t);
  update = b.select(counted, update, b.splat(0, update_t));
  Value hist = b.scatter_points(b.splat(0, {t, {out.numel()}}), flat_index, update, hlo::accumulate);
  hist = b.reshape(hist, out.shape);
  if (!density) return hist;
  // hist / hist.sum() / each dim's bin lengths, each division in the
  // accumulation type and rounded, as CPU's div_ calls.
  const ElementType acc = accumulation_type(t);
  std::vector<int64_t> every_dim(out.shape.size());
  for (size_t d = 0; d < every_dim.size(); ++d) every_dim[d] = static_cast<int64_t>(d);
  Value total = b.convert(b.convert(reduce_with(b, b.convert(hist, acc), every_dim, "add"), t), acc);
  hist = b.convert(b.binary("divide", b.convert(hist, acc), b.broadcast_to(total, out.shape)), t);
  for (size_t d = 0; d < bins.size(); ++d) {
    const int64_t n = out.shape.at(d);
    Value lengths =
        b.binary("subtract", b.slice(bins[d].edges, {1}, {n + 1}, {1}), b.slice(bins[d].edges, {0}, {n}, {1}));
    Value across = b.broadcast_in_dim(b.convert(lengths, acc), out.shape, {static_cast<int64_t>(d)});
    hist = b.convert(b.binary("divide", b.convert(hist, acc), across), t);
  }
  return hist;
}

// The points of histogram (every element, [numel, 1]) or histogramdd (the
// last dim is D, [M, D]) and their weights ([M]).
Value points_of(Builder& b, const Value& self, bool one_dimensional) {
  const int64_t numel = self.type.numel();
  if (one_dimensional) return b.reshape(self, {numel, 1});
  const int64_t d = self.shape().back();
  return b.reshape(self, {d == 0 ? 0 : numel / d, d});
}

std::optional<Value> weight_of(LowerContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  const Value& w = ctx.tensor(i);
  return ctx.b.reshape(w, {w.type.numel()});
}

// Equal-width edges for each of `bin_counts` (CPU's histogramdd_bin_edges):
// over `range` (2 per dim) when given, else over each dim's [min, max]
// ([0, 1] without points), widened by 0.5 either side where that is one
// value; linspace(left, right, bins + 1) in the points' type.
std::vector<HistogramBins> equal_width_bins(LowerContext& ctx, const Value& points,
                                            const std::vector<int64_t>& bin_counts, size_t range_index) {
  Builder& b = ctx.b;
  const ElementType t = points.dtype();
  const int64_t m = points.shape().at(0);
  std::vector<HistogramBins> bins;
  for (size_t d = 0; d < bin_counts.size(); ++d) {
    Value left, right;  // f64, as CPU holds them
    if (ctx.has(range_index)) {
      left = b.constant(ctx.args[range_index].doubles.at(2 * d), ElementType::F64);
      right = b.constant(ctx.args[range_index].doubles.at(2 * d + 1), ElementType::F64);
    } else if (m == 0) {
      left = b.constant(0, ElementType::F64);
      right = b.constant(1, ElementType::F64);
    } else {
      const auto dd = static_cast<int64_t>(d);
      Value x = b.reshape(b.slice(points, {0, dd}, {m, dd + 1}, {1, 1}), {m});
      left = b.convert(nan_max_min(b, x, {0}, /*is_max=*/false), ElementType::F64);
      right = b.convert(nan_max_min(b, x, {0}, /*is_max=*/true), ElementType::F64);
      // CPU reads the range to the host and raises; the program checks it
      // and the device layer raises by the next synchronization.
      const Value inf = b.constant(std::numeric_limits<double>::infinity(), ElementType::F64);
      Value finite = b.binary("and", b.compare(b.unary("abs", left), inf, CompareDirection::LT),
                              b.compare(b.unary("abs", right), inf, CompareDirection::LT));
      ctx.check_all(finite, "torch.histogramdd: dimension " + std::to_string(d) + "'s range is not finite");
    }
    Value one_value = b.compare(left, right, CompareDirection::EQ);
    left = b.select(one_value, b.binary("subtract", left, b.constant(0.5, ElementType::F64)), left);
    right = b.select(one_value, b.binary("add", right, b.constant(0.5, ElementType::F64)), right);
    // linspace's kernel: both ends in the result type, the step in it too
    // (float for bfloat16/float16, as the device's linspace lowering),
    // start + step * i for the first half and end - step * (steps - 1 - i)
    // for the second, so both ends are exact.
    const int64_t steps = bin_counts[d] + 1;
    const ElementType step_t = t == ElementType::F64 ? ElementType::F64 : ElementType::F32;
    Value start = b.convert(b.convert(left, t), step_t), end = b.convert(b.convert(right, t), step_t);
    Value step =
        b.binary("divide", b.binary("subtract", end, start), b.constant(static_cast<double>(steps - 1), step_t));
    const Shape shape{steps};
    Value i = b.iota({ElementType::S64, shape}, 0);
    Value from_end = b.binary("subtract", b.splat(static_cast<double>(steps - 1), {ElementType::S64, shape}), i);
    Value step_n = b.broadcast_to(step, shape);
    Value head = b.binary("add", b.broadcast_to(start, shape), b.binary("multiply", step_n, b.convert(i, step_t)));
    Value tail =
        b.binary("subtract", b.broadcast_to(end, shape), b.binary("multiply", step_n, b.convert(from_end, step_t)));
    Value first_half =
        b.compare(i, b.splat(static_cast<double>(steps / 2), {ElementType::S64, shape}), CompareDirection::LT);
    Value edges = steps == 1 ? b.broadcast_to(start, shape) : b.select(first_half, head, tail);
    bins.push_back({b.convert(edges, t), /*linear=*/true});
  }
  return bins;
}

}  // namespace

// histogram.bin_ct(self, bins, *, range, weight, density) -> (hist,
// bin_edges): equal-width bins over every element. Argument checks are CPU's
// (the device's meta kernel, csrc/device/missing_meta_kernels.cpp); every
// shape follows from the bin count, so nothing waits for the device.
std::vector<Value> histogram_bin_ct(LowerContext& ctx) {
  Value points = points_of(ctx.b, ctx.tensor(0), /*one_dimensional=*/true);
  std::vector<HistogramBins> bins = equal_width_bins(ctx, points, {ctx.int_arg(1)}, 2);
  return {histogram_of(ctx.b, points, bins, weight_of(ctx, 3), ctx.bool_arg(4), ctx.out_types.at(0)), bins[0].edges};
}

// histogram.bins_tensor(self, bins, *, weight, density) -> (hist,
// bin_edges): bins given by their edges, returned as they are.
std::vector<Value> histogram_bins_tensor(LowerContext& ctx) {
  Value points = points_of(ctx.b, ctx.tensor(0), /*one_dimensional=*/true);
  const Value& edges = ctx.tensor(1);
  return {histogram_of(ctx.b, points, {{edges}}, weight_of(ctx, 2), ctx.bool_arg(3), ctx.out_types.at(0)), edges};
}

// _histogramdd_bin_edges(self, bins, *, range, weight, density) -> Tensor[]:
// torch.histogramdd's edges for bin counts.
std::vector<Value> histogramdd_bin_edges(LowerContext& ctx) {
  Value points = points_of(ctx.b, ctx.tensor(0), /*one_dimensional=*/false);
  std::vector<Value> edges;
  for (const HistogramBins& bins : equal_width_bins(ctx, points, ctx.ints(1), 2)) edges.push_back(bins.edges);
  return edges;
}

// _histogramdd_from_bin_cts(self, bins, *, range, weight, density): the
// histogram over those edges.
std::vector<Value> histogramdd_from_bin_cts(LowerContext& ctx) {
  Value points = points_of(ctx.b, ctx.tensor(0), /*one_dimensional=*/false);
  std::vector<HistogramBins> bins = equal_width_bins(ctx, points, ctx.ints(1), 2);
  return {histogram_of(ctx.b, points, bins, weight_of(ctx, 3), ctx.bool_arg(4), ctx.out_types.at(0))};
}

// _histogramdd_from_bin_tensors(self, bins, *, weight, density): bins given
// by each dim's edges.
std::vector<Value> histogramdd_from_bin_tensors(LowerContext& ctx) {
  Value points = points_of(ctx.b, ctx.tensor(0), /*one_dimensional=*/false);
  std::vector<HistogramBins> bins;
  for (const auto& edges : ctx.args.at(1).tensors) bins.push_back({edges.value()});
  return {histogram_of(ctx.b, points, bins, weight_of(ctx, 2), ctx.bool_arg(3), ctx.out_types.at(0))};
}

}  // namespace torch_tpu::lower
