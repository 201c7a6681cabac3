// Float arithmetic on hlo values (declared in lower/common/arith.h).
#include "lower/common/arith.h"

#include <cmath>
#include <cstdio>

#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace math {

Value Arith::c(double v, const Value& like) const {
  if (!hlo::is_float(like.dtype()) || !std::isfinite(v)) return b.splat(v, like.type);
  // Always with a '.': MLIR's lexer reads "1e+17" (the builder's "%.17g" of
  // 1e17) as an integer.
  char literal[64];
  std::snprintf(literal, sizeof(literal), "%.17e", v);
  return b.broadcast_in_dim(b.constant_bits_like(literal, like.dtype()), like.shape(), {});
}

Value Arith::mul(const Value& x, double y) const {
  if (!hlo::is_complex(x.dtype())) return mul(x, c(y, x));
  Value re = mul(b.real(x), y);
  return b.complex(re, mul(b.imag(x), y));
}

Value Arith::polevl(const Value& x, const std::vector<double>& coefficients) const {
  Value r = c(coefficients.at(0), x);
  for (size_t i = 1; i < coefficients.size(); ++i) r = add(mul(r, x), coefficients[i]);
  return r;
}

Value Arith::p1evl(const Value& x, const std::vector<double>& coefficients) const {
  Value r = add(x, coefficients.at(0));
  for (size_t i = 1; i < coefficients.size(); ++i) r = add(mul(r, x), coefficients[i]);
  return r;
}

Value Arith::chbevl(const Value& x, const std::vector<double>& coefficients) const {
  Value b0 = c(coefficients.at(0), x), b1 = c(0, x), b2 = c(0, x);
  for (size_t i = 1; i < coefficients.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = add(sub(mul(x, b1), b2), coefficients[i]);
  }
  return mul(sub(b0, b2), 0.5);
}

Value add(Builder& b, const Value& x, const Value& y) { return b.binary("add", x, y); }
Value sub(Builder& b, const Value& x, const Value& y) { return b.binary("subtract", x, y); }
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }
Value div(Builder& b, const Value& x, const Value& y) { return b.binary("divide", x, y); }

ElementType float_opmath(ElementType t) {
  if (hlo::is_complex(t)) return t;  // as c10::complex<float> / <double>: never its real part alone
  if (!hlo::is_float(t)) return ElementType::F32;
  return accumulation_type(t);
}

Value operand_as(LowerContext& ctx, size_t i, ElementType dtype) {
  const Arg& a = ctx.args.at(i);
  const Shape& shape = ctx.out_types.at(0).shape;
  if (a.kind == Arg::Kind::Scalar) return ctx.b.broadcast_to(ctx.cast_scalar(a.scalar, dtype), shape);
  return coerce(ctx.b, ctx.tensor(i), {dtype, shape});
}

std::vector<Value> float_op(LowerContext& ctx, std::initializer_list<size_t> idx, const FloatFn& fn) {
  const ElementType t = float_opmath(result_type(ctx, idx));
  std::vector<Value> xs;
  for (size_t i : idx) xs.push_back(operand_as(ctx, i, t));
  return {ctx.b.convert(fn(Arith{ctx.b}, xs), ctx.out_types.at(0).dtype)};
}
std::vector<Value> float_unary(LowerContext& ctx, Value (*fn)(const Arith&, const Value&)) {
  return float_op(ctx, {0}, [fn](const Arith& m, const std::vector<Value>& x) { return fn(m, x[0]); });
}

// _minmax_complex orders the operands: a NaN in either part of y makes y
// both, else one in x makes x both, else the one of smaller real part is
// `min` (y when the real parts are equal). Then log1p(exp(min - max)) + max;
// NaN in min gives NaN + NaN j, and equal infinite real parts give min for
// -inf (its angle is lost) and log(exp(min) + exp(max)) for +inf.
Value complex_log_add_exp(Builder& b, const Value& x, const Value& y) {
  Value x_nan = is_nan(b, x), y_nan = is_nan(b, y);
  Value x_smaller = b.compare(b.real(x), b.real(y), hlo::CompareDirection::LT);
  Value mn = b.select(y_nan, y, b.select(x_nan, x, b.select(x_smaller, x, y)));
  Value mx = b.select(y_nan, y, b.select(x_nan, x, b.select(x_smaller, y, x)));
  Value r = b.binary("add", b.unary("log_plus_one", b.unary("exponential", b.binary("subtract", mn, mx))), mx);
  Value mn_re = b.real(mn), mx_re = b.real(mx);
  Value inf = b.splat(INFINITY, mn_re.type);
  Value same_inf = b.binary("and", b.compare(mn_re, mx_re, hlo::CompareDirection::EQ),
                            b.compare(b.unary("abs", mn_re), inf, hlo::CompareDirection::EQ));
  // std::log of the sum: its modulus is infinite where either part is (C99's
  // cabs), also beside a NaN part, which XLA's complex log would make NaN.
  Value sum = b.binary("add", b.unary("exponential", mn), b.unary("exponential", mx));
  Value sum_re = b.real(sum), sum_im = b.imag(sum);
  Value infinite = b.binary("or", b.compare(b.unary("abs", sum_re), inf, hlo::CompareDirection::EQ),
                            b.compare(b.unary("abs", sum_im), inf, hlo::CompareDirection::EQ));
  Value log_modulus = b.select(infinite, inf, b.real(b.unary("log", sum)));
  Value both_exp = b.complex(log_modulus, b.binary("atan2", sum_im, sum_re));
  Value at_inf = b.select(b.compare(mn_re, b.splat(0, mn_re.type), hlo::CompareDirection::LT), mn, both_exp);
  r = b.select(same_inf, at_inf, r);
  Value nan_part = b.splat(NAN, mn_re.type);
  return b.select(b.binary("or", x_nan, y_nan), b.complex(nan_part, nan_part), r);
}

}  // namespace math

}  // namespace torch_tpu::lower
