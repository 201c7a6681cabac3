// Statistics and searches: nansum, var_mean/std_mean, aminmax,
// count_nonzero, trace, renorm, searchsorted/bucketize and isin. Result shapes and dtypes are PyTorch's
// (ctx.out_types); low-precision floats are computed in float32 and rounded
// once (at::acc_type).
#include "lower/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// (variance, mean) over dims in the accumulation type; the divisor is
// max(N - correction, 0), correction None meaning 1 (Bessel).
std::pair<Value, Value> variance_and_mean(LowerContext& ctx) {
  Builder& b = ctx.b;
  const ElementType acc = accumulation_type(ctx.out_types.at(0).dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank());
  const double n = static_cast<double>(reduced_count(x, dims));
  const double correction = ctx.has(2) ? ctx.double_arg(2) : 1.0;
  Value s = reduce_with(b, x, dims, "add");
  Value mean = b.binary("divide", s, b.splat(n, s.type));
  Value d = b.binary("subtract", x, expand_back(b, mean, x, dims));
  Value ss = reduce_with(b, b.binary("multiply", d, d), dims, "add");
  Value var = b.binary("divide", ss, b.splat(std::max(n - correction, 0.0), ss.type));
  return {var, mean};
}

std::vector<Value> moments(LowerContext& ctx, bool sqrt_of_var) {
  Builder& b = ctx.b;
  auto [var, mean] = variance_and_mean(ctx);
  if (sqrt_of_var) var = b.unary("sqrt", var);
  const TensorType& t0 = ctx.out_types.at(0);
  const TensorType& t1 = ctx.out_types.at(1);
  return {b.reshape(b.convert(var, t0.dtype), t0.shape), b.reshape(b.convert(mean, t1.dtype), t1.shape)};
}

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

// var_mean.correction / std_mean.correction(self, dim?, *, correction?, keepdim)
std::vector<Value> var_mean(LowerContext& ctx) { return moments(ctx, false); }
std::vector<Value> std_mean(LowerContext& ctx) { return moments(ctx, true); }

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
  Value norm = vector_norm(b, x, dims, ctx.double_arg(1));
  Value maxnorm = b.broadcast_to(ctx.cast_scalar(ctx.args.at(3).scalar, acc), norm.shape());
  Value factor = b.binary("divide", maxnorm, b.binary("add", norm, b.splat(1e-7, norm.type)));
  factor = b.select(b.compare(norm, maxnorm, CompareDirection::GT), factor, b.splat(1, norm.type));
  Value r = b.binary("multiply", x, b.broadcast_in_dim(factor, x.shape(), {dim}));
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
  Value lo_n = b.broadcast_to(lo, vt.shape), hi_n = b.broadcast_to(hi, vt.shape);
  Value scaled = b.binary("multiply", b.binary("subtract", v, lo_n), b.splat(static_cast<double>(bins), vt));
  Value position = b.binary("divide", scaled, b.binary("subtract", hi_n, lo_n));
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

}  // namespace torch_tpu::lower
