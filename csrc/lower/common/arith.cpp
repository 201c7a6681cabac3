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
  return b.op("complex", {mul(b.real(x), y), mul(b.imag(x), y)}, x.type);
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

}  // namespace math

}  // namespace torch_tpu::lower
