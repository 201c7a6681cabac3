// Scans: cumprod, cummax/cummin (values and indices), logcumsumexp, on the
// one inclusive scan of lower/common/scan.h. Low-precision floats scan in
// float32 and round once (PyTorch's CPU kernels accumulate in at::acc_type).
#include "lower/scan.h"

#include <limits>

#include "lower/common/arith.h"
#include "lower/common/reduction.h"
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// The scan dim, and the input in `compute` read as rank >= 1 (a 0-d tensor
// scans as one element).
DimInput scan_input(LowerContext& ctx, ElementType compute) {
  return dim_input(ctx, ctx.b.convert(ctx.tensor(0), compute), 1);
}

// cummax/cummin(self, dim) -> (values, indices). PyTorch's CPU rule, element
// by element: take the new element when it is NaN, or when the running value
// is not NaN and the new one is >= (<=) it; so ties and NaNs move the index
// to the latest position.
std::vector<Value> cumulative_extreme(LowerContext& ctx, bool is_max) {
  Builder& b = ctx.b;
  const TensorType& vt = ctx.out_types.at(0);
  const TensorType& it = ctx.out_types.at(1);
  if (vt.numel() == 0) return {zeros(b, vt), zeros(b, it)};
  DimInput in = scan_input(ctx, vt.dtype);
  const bool fl = hlo::is_float(vt.dtype);
  Value index = b.iota({ElementType::S64, in.x.shape()}, in.dim);
  std::vector<Value> identity{reduce_init(b, is_max ? "maximum" : "minimum", vt.dtype),
                              b.constant_int(0, ElementType::S64)};
  auto combine = [&](Builder& rb, const std::vector<Value>& a, const std::vector<Value>& c) {
    Value take = rb.compare(c[0], a[0], is_max ? CompareDirection::GE : CompareDirection::LE);
    if (fl) {
      Value a_ok = rb.unary("not", is_nan(rb, a[0]));
      take = rb.binary("or", is_nan(rb, c[0]), rb.binary("and", a_ok, take));
    }
    return std::vector<Value>{rb.select(take, c[0], a[0]), rb.select(take, c[1], a[1])};
  };
  std::vector<Value> r = inclusive_scan(b, {in.x, index}, in.dim, identity, combine);
  return {b.reshape(r[0], vt.shape), b.reshape(r[1], it.shape)};
}

// log(exp(a) + exp(b)) without overflow; PyTorch's _log_add_exp_helper:
// equal infinities give themselves (not NaN), NaN propagates.
Value log_add_exp(Builder& b, const Value& a, const Value& c) {
  Value mx = b.binary("maximum", a, c);
  Value mn = b.binary("minimum", a, c);
  Value r = b.binary("add", mx, b.unary("log_plus_one", b.unary("exponential", b.binary("subtract", mn, mx))));
  Value inf = b.splat(std::numeric_limits<double>::infinity(), a.type);
  Value same_inf = b.binary("and", b.compare(mn, mx, CompareDirection::EQ),
                            b.compare(b.unary("abs", mn), inf, CompareDirection::EQ));
  r = b.select(same_inf, a, r);
  Value any_nan = b.binary("or", is_nan(b, a), is_nan(b, c));
  return b.select(any_nan, b.binary("add", a, c), r);
}

// logcumsumexp's complex step: CPU's kernel combines each element with the
// running value as _log_add_exp_helper(element, running), so of equal real
// parts the running value is `min`, and a NaN in it wins.
Value complex_log_add_exp_step(Builder& b, const Value& running, const Value& next) {
  return math::complex_log_add_exp(b, next, running);
}

Value product(Builder& b, const Value& a, const Value& c) {
  return b.binary(a.dtype() == ElementType::Pred ? "and" : "multiply", a, c);
}

// cumprod / logcumsumexp: argument 0 scanned with `op` (`identity` leaves
// the other operand unchanged) in the accumulation type of the result.
std::vector<Value> scan_accumulating(LowerContext& ctx, double identity,
                                     Value (*op)(Builder&, const Value&, const Value&)) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const ElementType acc = accumulation_type(out.dtype);
  DimInput in = scan_input(ctx, acc);
  auto combine = [op](Builder& rb, const std::vector<Value>& a, const std::vector<Value>& c) {
    return std::vector<Value>{op(rb, a[0], c[0])};
  };
  Value r = inclusive_scan(b, {in.x}, in.dim, {b.constant(identity, acc)}, combine)[0];
  return {b.reshape(b.convert(r, out.dtype), out.shape)};
}

}  // namespace

std::vector<Value> cummax(LowerContext& ctx) { return cumulative_extreme(ctx, true); }
std::vector<Value> cummin(LowerContext& ctx) { return cumulative_extreme(ctx, false); }

// cumprod(self, dim, *, dtype?): int and bool inputs arrive with an int64
// result (PyTorch promotes like cumsum).
std::vector<Value> cumprod(LowerContext& ctx) { return scan_accumulating(ctx, 1, product); }

// logcumsumexp(self, dim): identity -inf (-inf + 0j for complex).
std::vector<Value> logcumsumexp(LowerContext& ctx) {
  const bool complex = hlo::is_complex(ctx.out_types.at(0).dtype);
  return scan_accumulating(ctx, -std::numeric_limits<double>::infinity(),
                           complex ? complex_log_add_exp_step : log_add_exp);
}

}  // namespace torch_tpu::lower
