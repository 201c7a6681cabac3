// Elementwise math beyond the basic arithmetic of elementwise.cpp: inverse
// and hyperbolic trigonometry, exp2/log10, erfc/erfinv, copysign, hypot,
// fmax/fmin, nextafter, logit, logaddexp, nan_to_num, gcd/lcm, shifts,
// round(decimals), angle, frexp. Also the pieces special.cpp shares: the
// common dtype of operands and `Arith`, float arithmetic on hlo values.
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// math.cpp
TORCH_TPU_LOWERING(acos)
TORCH_TPU_LOWERING(acosh)
TORCH_TPU_LOWERING(angle)
TORCH_TPU_LOWERING(asin)
TORCH_TPU_LOWERING(asinh)
TORCH_TPU_LOWERING(atan)
TORCH_TPU_LOWERING(atanh)
TORCH_TPU_LOWERING(bitwise_left_shift)
TORCH_TPU_LOWERING(bitwise_right_shift)
TORCH_TPU_LOWERING(copysign)
TORCH_TPU_LOWERING(cosh)
TORCH_TPU_LOWERING(erfc)
TORCH_TPU_LOWERING(erfinv)
TORCH_TPU_LOWERING(exp2)
TORCH_TPU_LOWERING(fmax)
TORCH_TPU_LOWERING(fmin)
TORCH_TPU_LOWERING(frac)
TORCH_TPU_LOWERING(frexp)
TORCH_TPU_LOWERING(gcd)
TORCH_TPU_LOWERING(heaviside)
TORCH_TPU_LOWERING(hypot)
TORCH_TPU_LOWERING(lcm)
TORCH_TPU_LOWERING(log10)
TORCH_TPU_LOWERING(logaddexp)
TORCH_TPU_LOWERING(logaddexp2)
TORCH_TPU_LOWERING(logit)
TORCH_TPU_LOWERING(logit_backward)
TORCH_TPU_LOWERING(nan_to_num)
TORCH_TPU_LOWERING(nextafter)
TORCH_TPU_LOWERING(round_decimals)
TORCH_TPU_LOWERING(signbit)
TORCH_TPU_LOWERING(sinc)
TORCH_TPU_LOWERING(sinh)

namespace math {

// Float arithmetic on hlo values of one type, so that series and
// recurrences read like the formulas they follow. Numbers become constants
// of the other operand's type.
struct Arith {
  Builder& b;

  Value c(double v, const Value& like) const;
  Value add(const Value& x, const Value& y) const { return b.binary("add", x, y); }
  Value add(const Value& x, double y) const { return add(x, c(y, x)); }
  Value sub(const Value& x, const Value& y) const { return b.binary("subtract", x, y); }
  Value sub(const Value& x, double y) const { return sub(x, c(y, x)); }
  Value sub(double x, const Value& y) const { return sub(c(x, y), y); }
  Value mul(const Value& x, const Value& y) const { return b.binary("multiply", x, y); }
  Value mul(const Value& x, double y) const { return mul(x, c(y, x)); }
  Value div(const Value& x, const Value& y) const { return b.binary("divide", x, y); }
  Value div(const Value& x, double y) const { return div(x, c(y, x)); }
  Value div(double x, const Value& y) const { return div(c(x, y), y); }
  Value neg(const Value& x) const { return b.unary("negate", x); }
  Value abs(const Value& x) const { return b.unary("abs", x); }
  Value exp(const Value& x) const { return b.unary("exponential", x); }
  Value log(const Value& x) const { return b.unary("log", x); }
  Value log1p(const Value& x) const { return b.unary("log_plus_one", x); }
  Value sqrt(const Value& x) const { return b.unary("sqrt", x); }
  Value sin(const Value& x) const { return b.unary("sine", x); }
  Value cos(const Value& x) const { return b.unary("cosine", x); }
  Value floor(const Value& x) const { return b.unary("floor", x); }
  Value pow(const Value& x, const Value& y) const { return b.binary("power", x, y); }
  Value max(const Value& x, const Value& y) const { return b.binary("maximum", x, y); }
  Value min(const Value& x, const Value& y) const { return b.binary("minimum", x, y); }
  Value trunc(const Value& x) const { return select(lt(x, 0), b.unary("ceil", x), floor(x)); }

  Value lt(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::LT); }
  Value le(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::LE); }
  Value gt(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::GT); }
  Value ge(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::GE); }
  Value eq(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::EQ); }
  Value ne(const Value& x, const Value& y) const { return b.compare(x, y, hlo::CompareDirection::NE); }
  Value lt(const Value& x, double y) const { return lt(x, c(y, x)); }
  Value le(const Value& x, double y) const { return le(x, c(y, x)); }
  Value gt(const Value& x, double y) const { return gt(x, c(y, x)); }
  Value ge(const Value& x, double y) const { return ge(x, c(y, x)); }
  Value eq(const Value& x, double y) const { return eq(x, c(y, x)); }
  Value ne(const Value& x, double y) const { return ne(x, c(y, x)); }
  Value both(const Value& p, const Value& q) const { return b.binary("and", p, q); }
  Value either(const Value& p, const Value& q) const { return b.binary("or", p, q); }
  Value negate(const Value& p) const { return b.unary("not", p); }
  Value isnan(const Value& x) const { return ne(x, x); }
  Value isinf(const Value& x) const { return eq(abs(x), INFINITY); }
  Value select(const Value& p, const Value& x, const Value& y) const { return b.select(p, x, y); }
  Value select(const Value& p, double x, const Value& y) const { return b.select(p, c(x, y), y); }
  Value select(const Value& p, const Value& x, double y) const { return b.select(p, x, c(y, x)); }

  // Cephes polevl: c[0] x^n + ... + c[n] (Horner); p1evl: leading 1 implied.
  Value polevl(const Value& x, const std::vector<double>& coefficients) const;
  Value p1evl(const Value& x, const std::vector<double>& coefficients) const;
  // Cephes chbevl: a Chebyshev series.
  Value chbevl(const Value& x, const std::vector<double>& coefficients) const;
};

// Where PyTorch's kernel computes: integer and bool inputs of float ops in
// float32 (promote_integer_inputs_to_float), bfloat16/half in float32 (opmath).
ElementType float_opmath(ElementType t);

// Argument i (a tensor or Scalar) converted to `dtype` and broadcast to the
// result's shape.
Value operand_as(LowerContext& ctx, size_t i, ElementType dtype);

// A float op of the arguments `idx` (unary or binary): the operands in their
// compute dtype go through `fn`; the value returned is cast to the result
// dtype once.
using FloatFn = std::function<Value(const Arith&, const std::vector<Value>&)>;
std::vector<Value> float_op(LowerContext& ctx, std::initializer_list<size_t> idx, const FloatFn& fn);

}  // namespace math

}  // namespace torch_tpu::lower
