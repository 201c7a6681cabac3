// Float arithmetic on hlo values, for lowerings written as formulas (math,
// special functions, the gradient scaler): `Arith`, the dtype PyTorch's
// float kernels compute in, and a float op over a lowering's arguments.
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

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
  // A complex x times a real y scales each part, as c10::complex * T does
  // ((-inf + 0j) * 0.5 is -inf + 0j, not -inf + nan j).
  Value mul(const Value& x, double y) const;
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

// The four arithmetic ops as functions of a builder, for lowerings with
// too few formulas to want an Arith.
Value add(Builder& b, const Value& x, const Value& y);
Value sub(Builder& b, const Value& x, const Value& y);
Value mul(Builder& b, const Value& x, const Value& y);
Value div(Builder& b, const Value& x, const Value& y);

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
// float_op of argument 0 alone.
std::vector<Value> float_unary(LowerContext& ctx, Value (*fn)(const Arith&, const Value&));

// log(exp(x) + exp(y)) of complex x and y as PyTorch's _log_add_exp_helper
// computes it (ATen/native/LogAddExp.h; logaddexp's and logcumsumexp's
// complex kernels).
Value complex_log_add_exp(Builder& b, const Value& x, const Value& y);

}  // namespace math

}  // namespace torch_tpu::lower
