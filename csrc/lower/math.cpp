// Elementwise math: each lowering follows PyTorch's CPU kernel
// (aten/src/ATen/native/cpu/UnaryOpsKernel.cpp, BinaryOpsKernel.cpp), edge
// cases included. Float ops compute in float32 for bfloat16/half inputs and
// round once (opmath), and in float32 for integer inputs.
#include "lower/math.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "lower/common/arith.h"
#include "lower/common/reduction.h"
#include "lower/common/result_types.h"
#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace {

using math::Arith;
using math::float_op;
using math::float_unary;
using math::operand_as;

std::vector<Value> unary_chlo(LowerContext& ctx, const char* name) {
  return float_op(ctx, {0},
                  [name](const Arith& m, const std::vector<Value>& x) { return m.b.chlo(name, {x[0]}, x[0].type); });
}

// The sign bit of a float (set for -0.0 and negative NaNs), through its bits.
Value sign_bit(Builder& b, const Value& x) {
  const ElementType bits = hlo::byte_size(x.dtype()) == 8   ? ElementType::S64
                           : hlo::byte_size(x.dtype()) == 4 ? ElementType::S32
                                                            : ElementType::S16;
  Value i = b.bitcast_convert(x, {bits, x.shape()});
  return b.compare(i, b.splat(0, i.type), hlo::CompareDirection::LT);
}

// 2^n exactly, for integral float n in [-150, 150]: two factors 2^h with
// |h| <= 75, each built from its exponent bits.
Value exact_pow2(const Arith& m, const Value& n) {
  auto pow2 = [&](const Value& h) {
    Value e = m.b.convert(m.add(h, 127), ElementType::S32);
    Value bits = m.b.binary("shift_left", e, m.b.splat(23, e.type));
    return m.b.bitcast_convert(bits, {ElementType::F32, n.shape()});
  };
  Value h1 = m.floor(m.mul(n, 0.5));
  return m.mul(pow2(h1), pow2(m.sub(n, h1)));
}

// exp2 in float32 without the error of exp(x * ln2) for large |x|: x = n + f
// with integral n, exactly; 2^x = exp(f ln2) * 2^n.
Value exp2_value(const Arith& m, const Value& x) {
  Value n = m.b.unary("round_nearest_even", x);
  Value f = m.sub(x, n);
  Value n_clamped = m.b.clamp(m.c(-150, n), n, m.c(150, n));
  Value r = m.mul(m.exp(m.mul(f, M_LN2)), exact_pow2(m, n_clamped));
  r = m.select(m.eq(x, INFINITY), INFINITY, r);
  return m.select(m.eq(x, -INFINITY), 0.0, r);
}

}  // namespace

// ---- trigonometric and hyperbolic (CHLO expands them) --------------------------
std::vector<Value> acos(LowerContext& ctx) { return unary_chlo(ctx, "acos"); }
std::vector<Value> acosh(LowerContext& ctx) { return unary_chlo(ctx, "acosh"); }
std::vector<Value> asin(LowerContext& ctx) { return unary_chlo(ctx, "asin"); }
std::vector<Value> asinh(LowerContext& ctx) { return unary_chlo(ctx, "asinh"); }
std::vector<Value> atan(LowerContext& ctx) { return unary_chlo(ctx, "atan"); }
std::vector<Value> atanh(LowerContext& ctx) { return unary_chlo(ctx, "atanh"); }
std::vector<Value> cosh(LowerContext& ctx) { return unary_chlo(ctx, "cosh"); }
std::vector<Value> sinh(LowerContext& ctx) { return unary_chlo(ctx, "sinh"); }
std::vector<Value> erfc(LowerContext& ctx) { return unary_chlo(ctx, "erfc"); }
std::vector<Value> erfinv(LowerContext& ctx) { return unary_chlo(ctx, "erf_inv"); }

// sin(pi x) / (pi x), 1 at 0 (at::native sinc).
std::vector<Value> sinc(LowerContext& ctx) {
  return float_unary(ctx, [](const Arith& m, const Value& x) {
    Value product = m.mul(x, M_PI);
    return m.select(m.eq(x, 0), 1.0, m.div(m.sin(product), product));
  });
}

// ---- exponentials and logarithms --------------------------------------------------
std::vector<Value> log10(LowerContext& ctx) {
  return float_unary(ctx, [](const Arith& m, const Value& x) { return m.mul(m.log(x), 1 / M_LN10); });
}

std::vector<Value> exp2(LowerContext& ctx) {
  return float_unary(ctx, [](const Arith& m, const Value& x) {
    if (x.dtype() != ElementType::F32) return m.exp(m.mul(x, M_LN2));
    return exp2_value(m, x);
  });
}

// log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps >= 0; the bounds are
// in the input dtype, as the CPU kernel's scalar_t eps.
std::vector<Value> logit(LowerContext& ctx) {  // (self, eps?)
  const bool clamp = ctx.has(1) && ctx.double_arg(1) >= 0;
  const ElementType in = hlo::is_float(ctx.tensor(0).dtype()) ? ctx.tensor(0).dtype() : ElementType::F32;
  Value lo, hi;
  if (clamp) {
    Value eps = ctx.b.constant(ctx.double_arg(1), in);
    lo = ctx.b.convert(eps, math::float_opmath(in));
    hi = ctx.b.convert(ctx.b.binary("subtract", ctx.b.constant(1, in), eps), math::float_opmath(in));
  }
  return float_op(ctx, {0}, [&](const Arith& m, const std::vector<Value>& v) {
    Value x = v[0];
    if (clamp) {
      Value l = m.b.broadcast_to(lo, x.shape()), h = m.b.broadcast_to(hi, x.shape());
      x = m.select(m.lt(x, l), l, m.select(m.gt(x, h), h, x));
    }
    return m.select(m.eq(x, 1), INFINITY, m.log(m.div(x, m.sub(1, x))));
  });
}

// grad / (x (1 - x)); outside [0, 1] NaN, or outside [eps, 1 - eps] zero.
std::vector<Value> logit_backward(LowerContext& ctx) {  // (grad_output, self, eps?)
  const bool has_eps = ctx.has(2) && ctx.double_arg(2) >= 0;
  const double eps = has_eps ? ctx.double_arg(2) : 0;
  return float_op(ctx, {0, 1}, [&](const Arith& m, const std::vector<Value>& v) {
    const Value &g = v[0], &x = v[1];
    Value d = m.div(g, m.mul(x, m.sub(1, x)));
    Value outside = m.either(m.lt(x, has_eps ? eps : 0), m.gt(x, has_eps ? 1 - eps : 1));
    return m.select(outside, has_eps ? 0.0 : NAN, d);
  });
}

// max(a, b) + log1p(exp(-|a - b|)); equal infinities give themselves.
static Value logaddexp_value(const Arith& m, const Value& a, const Value& b, bool base2) {
  Value mx = m.select(m.lt(a, b), b, a);  // std::max
  Value d = m.neg(m.abs(m.sub(a, b)));
  Value r = base2 ? m.add(mx, m.mul(m.log1p(m.exp(m.mul(d, M_LN2))), 1 / M_LN2)) : m.add(mx, m.log1p(m.exp(d)));
  return m.select(m.both(m.isinf(a), m.eq(a, b)), a, r);
}

std::vector<Value> logaddexp(LowerContext& ctx) {
  const ElementType type = result_type(ctx, {0, 1});
  if (hlo::is_complex(type)) {  // CPU's complex kernel; logaddexp2 has none
    return {math::complex_log_add_exp(ctx.b, operand_as(ctx, 0, type), operand_as(ctx, 1, type))};
  }
  require_float(type, "logaddexp_cpu");
  return float_op(ctx, {0, 1},
                  [](const Arith& m, const std::vector<Value>& v) { return logaddexp_value(m, v[0], v[1], false); });
}

std::vector<Value> logaddexp2(LowerContext& ctx) {
  require_float(result_type(ctx, {0, 1}), "logaddexp2_cpu");
  return float_op(ctx, {0, 1},
                  [](const Arith& m, const std::vector<Value>& v) { return logaddexp_value(m, v[0], v[1], true); });
}

// ---- sign and magnitude --------------------------------------------------------------
std::vector<Value> frac(LowerContext& ctx) {
  if (!hlo::is_float(ctx.tensor(0).dtype())) not_implemented_for("frac_cpu", ctx.tensor(0).dtype());
  return float_unary(ctx, [](const Arith& m, const Value& x) { return m.sub(x, m.trunc(x)); });
}

std::vector<Value> copysign(LowerContext& ctx) {
  return float_op(ctx, {0, 1}, [](const Arith& m, const std::vector<Value>& v) {
    Value mag = m.abs(v[0]);
    return m.select(sign_bit(m.b, v[1]), m.neg(mag), mag);
  });
}

// std::hypot: scaled so that large operands do not overflow; an infinity wins
// over NaN.
std::vector<Value> hypot(LowerContext& ctx) {
  require_float(result_type(ctx, {0, 1}), "hypot_cpu");
  return float_op(ctx, {0, 1}, [](const Arith& m, const std::vector<Value>& v) {
    Value a = m.abs(v[0]), b = m.abs(v[1]);
    Value hi = m.max(a, b), lo = m.min(a, b);
    Value ratio = m.div(lo, hi);
    Value r = m.mul(hi, m.sqrt(m.add(m.mul(ratio, ratio), 1)));
    r = m.select(m.eq(hi, 0), 0.0, r);
    r = m.select(m.either(m.isnan(a), m.isnan(b)), NAN, r);
    return m.select(m.either(m.isinf(a), m.isinf(b)), INFINITY, r);
  });
}

// angle of a real number: pi for negatives, 0 otherwise, NaN stays; of a
// complex number, atan2(imag, real) as std::arg, in its part type.
std::vector<Value> angle(LowerContext& ctx) {
  const Value& z = ctx.tensor(0);
  if (hlo::is_complex(z.dtype())) {
    Builder& b = ctx.b;
    return {coerce(b, b.binary("atan2", b.imag(z), b.real(z)), ctx.out_types.at(0))};
  }
  return float_unary(ctx, [](const Arith& m, const Value& x) {
    return m.select(m.isnan(x), x, m.select(m.lt(x, 0), M_PI, m.c(0, x)));
  });
}

std::vector<Value> signbit(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  Builder& b = ctx.b;
  if (hlo::is_float(x.dtype())) return {sign_bit(b, x)};
  if (hlo::is_unsigned(x.dtype()) || x.dtype() == ElementType::Pred)
    return {b.splat(0, {ElementType::Pred, x.shape()})};
  return {b.compare(x, b.splat(0, x.type), hlo::CompareDirection::LT)};
}

// x == 0 ? values : (x > 0), in the common dtype.
std::vector<Value> heaviside(LowerContext& ctx) {  // (self, values)
  const ElementType t = result_type(ctx, {0, 1});
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, t), v = operand_as(ctx, 1, t);
  Value zero = b.splat(0, x.type);
  Value step = b.convert(b.compare(x, zero, hlo::CompareDirection::GT), t);
  return {b.convert(b.select(b.compare(x, zero, hlo::CompareDirection::EQ), v, step), out_type(ctx).dtype)};
}

// fmax/fmin: a NaN operand yields the other one.
static std::vector<Value> nan_ignoring(LowerContext& ctx, const char* op) {
  const ElementType t = result_type(ctx, {0, 1});
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, t), y = operand_as(ctx, 1, t);
  if (t == ElementType::Pred)
    return {b.convert(b.binary(std::string(op) == "maximum" ? "or" : "and", x, y), out_type(ctx).dtype)};
  Value r = b.binary(op, x, y);
  if (hlo::is_float(t)) {
    Arith m{b};
    r = m.select(m.isnan(x), y, m.select(m.isnan(y), x, r));
  }
  return {b.convert(r, out_type(ctx).dtype)};
}
std::vector<Value> fmax(LowerContext& ctx) { return nan_ignoring(ctx, "maximum"); }
std::vector<Value> fmin(LowerContext& ctx) { return nan_ignoring(ctx, "minimum"); }

// In the operands' own float dtype: the next representable value of it.
std::vector<Value> nextafter(LowerContext& ctx) {
  const ElementType t = result_type(ctx, {0, 1});
  if (!hlo::is_float(t)) not_implemented_for("nextafter_cpu", t);
  Value x = operand_as(ctx, 0, t), y = operand_as(ctx, 1, t);
  return {ctx.b.convert(ctx.b.chlo("next_after", {x, y}, x.type), out_type(ctx).dtype)};
}

// NaN -> nan (0), +inf -> posinf (dtype max), -inf -> neginf (dtype lowest);
// integers are copied.
std::vector<Value> nan_to_num(LowerContext& ctx) {  // (self, nan?, posinf?, neginf?)
  const Value& x = ctx.tensor(0);
  const TensorType t = out_type(ctx);
  Builder& b = ctx.b;
  if (!hlo::is_float(x.dtype())) return {b.convert(x, t.dtype)};
  const double max = x.dtype() == ElementType::BF16  ? 3.38953138925153547590e+38
                     : x.dtype() == ElementType::F16 ? 65504.0
                     : x.dtype() == ElementType::F32 ? 3.40282346638528859812e+38
                                                     : 1.79769313486231570815e+308;
  Arith m{b};
  Value r = m.select(m.isnan(x), ctx.has(1) ? ctx.double_arg(1) : 0.0, x);
  r = m.select(m.eq(x, INFINITY), ctx.has(2) ? ctx.double_arg(2) : max, r);
  r = m.select(m.eq(x, -INFINITY), ctx.has(3) ? ctx.double_arg(3) : -max, r);
  return {b.convert(r, t.dtype)};
}

// round(x, decimals): nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) *
// 10^-d for negative d, in opmath (at::native round_decimals_kernel).
std::vector<Value> round_decimals(LowerContext& ctx) {  // (self, decimals)
  const ElementType in = ctx.tensor(0).dtype();
  if (!hlo::is_float(in)) not_implemented_for("round_cpu", in);
  const int64_t decimals = ctx.int_arg(1);
  double ten_pow = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  if (math::float_opmath(in) == ElementType::F32) ten_pow = static_cast<float>(ten_pow);  // opmath_t, inf if too large
  return float_op(ctx, {0}, [&](const Arith& m, const std::vector<Value>& v) {
    auto nearbyint = [&](const Value& y) { return m.b.unary("round_nearest_even", y); };
    const Value& x = v[0];
    return decimals < 0 ? m.mul(nearbyint(m.div(x, ten_pow)), ten_pow) : m.div(nearbyint(m.mul(x, ten_pow)), ten_pow);
  });
}

// ---- integers ---------------------------------------------------------------------
// Euclid's algorithm on |a|, |b| (at::native calc_gcd), all elements in one
// loop that runs until every remainder is zero.
static Value gcd_value(Builder& b, const Value& x, const Value& y) {
  auto abs = [&](const Value& v) { return hlo::is_unsigned(v.dtype()) ? v : b.unary("abs", v); };
  auto loop = b.while_loop(
      {abs(x), abs(y)},
      [&](Builder& r, const std::vector<Value>& v) {
        return std::vector<Value>{any_true(r, r.compare(v[0], r.splat(0, v[0].type), hlo::CompareDirection::NE))};
      },
      [&](Builder& r, const std::vector<Value>& v) {
        Value nonzero = r.compare(v[0], r.splat(0, v[0].type), hlo::CompareDirection::NE);
        Value divisor = r.select(nonzero, v[0], r.splat(1, v[0].type));
        Value rem = r.binary("remainder", v[1], divisor);
        return std::vector<Value>{r.select(nonzero, rem, v[0]), r.select(nonzero, v[0], v[1])};
      });
  return loop[1];
}

static ElementType integer_dtype(LowerContext& ctx, const char* op) {
  const ElementType t = result_type(ctx, {0, 1});
  if (!hlo::is_integer(t)) not_implemented_for(op, t);
  return t;
}

std::vector<Value> gcd(LowerContext& ctx) {
  const ElementType t = integer_dtype(ctx, "gcd_cpu");
  return {ctx.b.convert(gcd_value(ctx.b, operand_as(ctx, 0, t), operand_as(ctx, 1, t)), out_type(ctx).dtype)};
}

// |a / gcd * b|, 0 where the gcd is 0 (at::native calc_lcm).
std::vector<Value> lcm(LowerContext& ctx) {
  const ElementType t = integer_dtype(ctx, "lcm_cpu");
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, t), y = operand_as(ctx, 1, t);
  Value g = gcd_value(b, x, y);
  Value zero = b.splat(0, g.type);
  Value g_is_zero = b.compare(g, zero, hlo::CompareDirection::EQ);
  Value l = b.binary("multiply", b.binary("divide", x, b.select(g_is_zero, b.splat(1, g.type), g)), y);
  if (!hlo::is_unsigned(t)) l = b.unary("abs", l);
  return {b.convert(b.select(g_is_zero, zero, l), out_type(ctx).dtype)};
}

// at::native lshift/rshift: a shift that is negative or not below the bit
// width gives 0 (left) or the sign fill (right); right shifts of signed
// types are arithmetic.
static std::vector<Value> shift(LowerContext& ctx, bool left) {
  const ElementType t = integer_dtype(ctx, left ? "lshift_cpu" : "rshift_cpu");
  Builder& b = ctx.b;
  Value a = operand_as(ctx, 0, t), s = operand_as(ctx, 1, t);
  const bool is_signed = !hlo::is_unsigned(t);
  const int64_t bits = 8 * hlo::byte_size(t);
  const int64_t max_shift = left ? bits : bits - (is_signed ? 1 : 0);
  Value out_of_range = b.compare(s, b.splat(static_cast<double>(max_shift), s.type), hlo::CompareDirection::GE);
  if (is_signed)
    out_of_range = b.binary("or", out_of_range, b.compare(s, b.splat(0, s.type), hlo::CompareDirection::LT));
  Value safe = b.select(out_of_range, b.splat(0, s.type), s);
  const char* right_op = is_signed ? "shift_right_arithmetic" : "shift_right_logical";
  Value shifted = b.binary(left ? "shift_left" : right_op, a, safe);
  Value fill =
      left || !is_signed ? b.splat(0, a.type) : b.binary(right_op, a, b.splat(static_cast<double>(bits - 1), a.type));
  return {b.convert(b.select(out_of_range, fill, shifted), out_type(ctx).dtype)};
}
std::vector<Value> bitwise_left_shift(LowerContext& ctx) { return shift(ctx, true); }
std::vector<Value> bitwise_right_shift(LowerContext& ctx) { return shift(ctx, false); }

// ---- frexp -----------------------------------------------------------------------
// x = mantissa * 2^exponent with |mantissa| in [0.5, 1), read from the
// float32 bits with integer ops only (XLA flushes subnormal floats to zero,
// their bits survive): a subnormal's fraction is shifted up to its leading
// one. 0, inf and NaN give themselves and exponent 0, as std::frexp.
std::vector<Value> frexp(LowerContext& ctx) {
  const ElementType in = ctx.tensor(0).dtype();
  if (!hlo::is_float(in)) throw std::invalid_argument("torch.frexp() only supports floating-point dtypes");
  if (in == ElementType::F64) not_implemented_for("frexp", in);
  Builder& b = ctx.b;
  Value x = b.convert(ctx.tensor(0), ElementType::F32);
  const TensorType ints{ElementType::S32, x.shape()};
  auto k = [&](int64_t v) { return b.splat(static_cast<double>(v), ints); };
  auto eq = [&](const Value& a, const Value& c) { return b.compare(a, c, hlo::CompareDirection::EQ); };
  Value bits = b.bitcast_convert(x, ints);
  Value sign = b.binary("and", bits, k(static_cast<int32_t>(0x80000000u)));
  Value biased = b.binary("and", b.binary("shift_right_logical", bits, k(23)), k(0xff));
  Value fraction = b.binary("and", bits, k(0x7fffff));
  // Subnormal: value = fraction * 2^-149 with the leading one at bit (31 - clz).
  Value clz = b.unary("count_leading_zeros", fraction);
  Value shift = b.binary("subtract", clz, k(8));  // moves the leading one to bit 23
  Value normalized = b.binary("and", b.binary("shift_left", fraction, shift), k(0x7fffff));
  Value subnormal = b.binary("and", eq(biased, k(0)), b.compare(fraction, k(0), hlo::CompareDirection::NE));
  Value exponent = b.select(subnormal, b.binary("subtract", k(-125), shift), b.binary("subtract", biased, k(126)));
  Value mantissa_fraction = b.select(subnormal, normalized, fraction);
  Value mantissa_bits = b.binary("or", b.binary("or", sign, mantissa_fraction), k(126 << 23));
  Value mantissa = b.bitcast_convert(mantissa_bits, x.type);
  Value special = b.binary("or", eq(biased, k(0xff)), b.binary("and", eq(biased, k(0)), eq(fraction, k(0))));
  mantissa = b.select(special, x, mantissa);
  exponent = b.select(special, k(0), exponent);
  return {b.convert(mantissa, ctx.out_types.at(0).dtype), b.convert(exponent, ctx.out_types.at(1).dtype)};
}

}  // namespace torch_tpu::lower
