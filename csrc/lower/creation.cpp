// Creation ops whose values depend on position: arange, linspace, logspace,
// eye. PyTorch's meta kernel sizes the out= tensor (ctx.out_types); the
// values follow PyTorch's CPU kernels (ATen/native/cpu/RangeFactoriesKernel.cpp;
// logspace: ATen/native/RangeFactories.cpp, logspace_out, operation by
// operation, in double where it works in double, so integer results truncate
// the same values CPU truncates).
#include "lower/creation.h"

#include <cmath>
#include <cstdint>

#include "lower/common/scalars.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Positions 0..n-1 of a 1-d result, in `dtype`.
Value positions(Builder& b, int64_t n, ElementType dtype) {
  return b.convert(b.iota({ElementType::S64, {n}}, 0), dtype);
}

Value splat_scalar(LowerContext& ctx, const ScalarArg& s, ElementType dtype, const Shape& shape) {
  return ctx.b.broadcast_to(ctx.scalar(s, dtype), shape);
}

// A double computed in the kernel, stored into a `dtype` element: C++'s
// conversion, which for bf16/f16 goes through float (c10's constructors).
// Narrow integers take the low bits of the int64 value, as x86's
// double -> int conversion does (XLA's direct convert would saturate).
Value store_as(Builder& b, const Value& v, ElementType dtype) {
  if (dtype == ElementType::BF16 || dtype == ElementType::F16) return b.convert(b.convert(v, ElementType::F32), dtype);
  if (hlo::is_integer(dtype)) return b.convert(b.convert(v, ElementType::S64), dtype);
  return b.convert(v, dtype);
}

// start.to<scalar_t>() widened back to double, as `scalar_start + step * i`
// does; and scalar_end - scalar_start, which C++ computes in scalar_t for
// floats (bf16 rounds) and in int/int64 for integers.
struct Endpoints {
  Value start, end, diff;  // 0-d f64
};

Endpoints endpoints(LowerContext& ctx, ElementType dtype) {
  Builder& b = ctx.b;
  const ScalarArg& s = ctx.args.at(0).scalar;
  const ScalarArg& e = ctx.args.at(1).scalar;
  check_scalar_fits(s, dtype);
  check_scalar_fits(e, dtype);
  if (!hlo::is_float(dtype)) {
    Value si = b.convert(b.constant_int(scalar_to_int(s), ElementType::S64), dtype);
    Value ei = b.convert(b.constant_int(scalar_to_int(e), ElementType::S64), dtype);
    Value wide_s = b.convert(si, ElementType::S64), wide_e = b.convert(ei, ElementType::S64);
    Value diff = b.binary("subtract", wide_e, wide_s);
    return {b.convert(wide_s, ElementType::F64), b.convert(wide_e, ElementType::F64),
            b.convert(diff, ElementType::F64)};
  }
  Value st = b.convert(ctx.scalar(s, ElementType::F64), dtype);
  Value et = b.convert(ctx.scalar(e, ElementType::F64), dtype);
  if (dtype == ElementType::BF16 || dtype == ElementType::F16) {
    // c10::BFloat16/Half: widen to float, operate, round back.
    st = b.convert(ctx.scalar(s, ElementType::F32), dtype);
    et = b.convert(ctx.scalar(e, ElementType::F32), dtype);
    Value d = b.binary("subtract", b.convert(et, ElementType::F32), b.convert(st, ElementType::F32));
    return {b.convert(st, ElementType::F64), b.convert(et, ElementType::F64),
            b.convert(b.convert(d, dtype), ElementType::F64)};
  }
  return {b.convert(st, ElementType::F64), b.convert(et, ElementType::F64),
          b.convert(b.binary("subtract", et, st), ElementType::F64)};
}

// PyTorch's symmetric ramp of `steps` values in `acc`: start + step * i over
// the first half, end - step * (steps - 1 - i) over the rest, so both ends
// are exact.
Value symmetric_ramp(LowerContext& ctx, int64_t steps, double start, double end, double step, ElementType acc) {
  Builder& b = ctx.b;
  const Shape shape{steps};
  Value i = b.iota({ElementType::S64, shape}, 0);
  Value halfway = b.broadcast_to(b.constant_int(steps / 2, ElementType::S64), shape);
  Value from_end = b.binary("subtract", b.broadcast_to(b.constant_int(steps - 1, ElementType::S64), shape), i);
  Value d = b.broadcast_to(ctx.cast_scalar(float_scalar(step), acc), shape);
  Value head = b.binary("add", b.broadcast_to(ctx.cast_scalar(float_scalar(start), acc), shape),
                        b.binary("multiply", d, b.convert(i, acc)));
  Value tail = b.binary("subtract", b.broadcast_to(ctx.cast_scalar(float_scalar(end), acc), shape),
                        b.binary("multiply", d, b.convert(from_end, acc)));
  return b.select(b.compare(i, halfway, CompareDirection::LT), head, tail);
}

// The symmetric ramp from `start` to `end` of a complex `dtype`, [steps]
// (steps >= 2): c10::complex arithmetic, where step = (end - start) /
// (steps - 1) and the ramp act on the real and imaginary parts apart.
Value complex_ramp(LowerContext& ctx, int64_t steps, const ScalarArg& start, const ScalarArg& end, ElementType dtype) {
  const ElementType part = hlo::complex_part_type(dtype);
  const double n = static_cast<double>(steps - 1);
  auto part_ramp = [&](double s0, double e0) {
    if (part == ElementType::F32) {
      const float s = static_cast<float>(s0), e = static_cast<float>(e0);
      return symmetric_ramp(ctx, steps, s, e, static_cast<float>((e - s) / static_cast<float>(n)), part);
    }
    return symmetric_ramp(ctx, steps, s0, e0, (e0 - s0) / n, part);
  };
  auto imag_of = [](const ScalarArg& a) { return a.kind == ScalarArg::Kind::Complex ? a.imag : 0.0; };
  Value re = part_ramp(start.as_double(), end.as_double());
  Value im = part_ramp(imag_of(start), imag_of(end));
  return ctx.b.complex(re, im);
}

}  // namespace

// arange.start_out(start, end, step, out): start + step * i in PyTorch's
// CPU accumulate type (double for float/double, float for bf16/f16, int64
// for integers), then cast to the result type.
std::vector<Value> arange(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const int64_t n = out.numel();
  if (n == 0) return {b.splat(0, out)};
  const ScalarArg& start = ctx.args.at(0).scalar;
  ScalarArg step;  // default 1
  step.i = 1;
  if (ctx.has(2)) step = ctx.args[2].scalar;
  if (!hlo::is_float(out.dtype)) {
    Value i = positions(b, n, ElementType::S64);
    Value s = b.broadcast_to(b.constant_int(scalar_to_int(start), ElementType::S64), {n});
    Value d = b.broadcast_to(b.constant_int(scalar_to_int(step), ElementType::S64), {n});
    return {b.reshape(b.convert(b.binary("add", s, b.binary("multiply", d, i)), out.dtype), out.shape)};
  }
  const ElementType acc =
      (out.dtype == ElementType::F32 || out.dtype == ElementType::F64) ? ElementType::F64 : ElementType::F32;
  Value i = positions(b, n, acc);
  Value v =
      b.binary("add", splat_scalar(ctx, start, acc, {n}), b.binary("multiply", splat_scalar(ctx, step, acc, {n}), i));
  return {b.reshape(b.convert(v, out.dtype), out.shape)};
}

// linspace.out(start, end, steps, out): PyTorch's symmetric formula,
// step = (end - start) / (steps - 1); the first half is start + step * i,
// the second end - step * (steps - 1 - i), so both ends are exact. Floats
// compute in their own type (bf16/f16 in f32), integers in double and
// truncate; steps == 1 gives start.
std::vector<Value> linspace(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const int64_t steps = out.numel();
  const ScalarArg& start_arg = ctx.args.at(0).scalar;
  const ScalarArg& end_arg = ctx.args.at(1).scalar;
  if (steps == 0) return {b.splat(0, out)};
  if (steps == 1) return {coerce(b, ctx.fill_scalar(start_arg, out), out)};  // CPU fills start
  // CPU's kernel converts both ends to the result type (start.to<scalar_t>()).
  check_scalar_fits(start_arg, out.dtype);
  check_scalar_fits(end_arg, out.dtype);
  if (hlo::is_complex(out.dtype)) {
    return {b.reshape(complex_ramp(ctx, steps, start_arg, end_arg, out.dtype), out.shape)};
  }
  const bool integral = !hlo::is_float(out.dtype);
  const ElementType acc = integral || out.dtype == ElementType::F64 ? ElementType::F64 : ElementType::F32;
  double start, end, step;
  if (integral) {
    // scalar_t start/end, double step.
    start = static_cast<double>(scalar_to_int(start_arg));
    end = static_cast<double>(scalar_to_int(end_arg));
    step = (end - start) / static_cast<double>(steps - 1);
  } else if (acc == ElementType::F32) {
    const float s = static_cast<float>(start_arg.as_double()), e = static_cast<float>(end_arg.as_double());
    start = s;
    end = e;
    step = static_cast<float>((e - s) / static_cast<float>(steps - 1));
  } else {
    start = start_arg.as_double();
    end = end_arg.as_double();
    step = (end - start) / static_cast<double>(steps - 1);
  }
  if (out.dtype == ElementType::BF16 || out.dtype == ElementType::F16) {
    // Both ends convert to the dtype. Then c10::BFloat16/Half arithmetic, as
    // CPU's kernel computes with step_t = scalar_t: every operation (and
    // every int operand) rounds to the dtype; or, where the installed torch
    // computes in float32 (its opmath type), one rounding at the end.
    const bool once = half_linspace_rounds_once();
    const Shape shape{steps};
    Value i = b.iota({ElementType::S64, shape}, 0);
    Value halfway = b.broadcast_to(b.constant_int(steps / 2, ElementType::S64), shape);
    Value from_end = b.binary("subtract", b.broadcast_to(b.constant_int(steps - 1, ElementType::S64), shape), i);
    auto to_dtype = [&](const Value& v) { return b.convert(b.convert(v, out.dtype), ElementType::F32); };
    auto rounded = [&](const Value& v) { return once ? v : to_dtype(v); };
    auto splat = [&](double v) { return b.splat(v, {ElementType::F32, shape}); };
    Value s = to_dtype(splat(static_cast<float>(start_arg.as_double())));
    Value e = to_dtype(splat(static_cast<float>(end_arg.as_double())));
    Value d = rounded(
        b.binary("divide", rounded(b.binary("subtract", e, s)), rounded(splat(static_cast<double>(steps - 1)))));
    Value head = rounded(b.binary("add", s, rounded(b.binary("multiply", d, rounded(b.convert(i, ElementType::F32))))));
    Value tail = rounded(
        b.binary("subtract", e, rounded(b.binary("multiply", d, rounded(b.convert(from_end, ElementType::F32))))));
    Value v = b.select(b.compare(i, halfway, CompareDirection::LT), head, tail);
    return {b.reshape(b.convert(v, out.dtype), out.shape)};
  }
  return {b.reshape(b.convert(symmetric_ramp(ctx, steps, start, end, step, acc), out.dtype), out.shape)};
}

// eye.out(n) / eye.m_out(n, m): ones where row == column.
std::vector<Value> eye(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  if (out.numel() == 0) return {b.splat(0, out)};
  const TensorType idx{ElementType::S64, out.shape};
  Value diag = b.compare(b.iota(idx, 0), b.iota(idx, 1), CompareDirection::EQ);
  return {b.convert(diag, out.dtype)};
}

// logspace.out(start, end, steps, base, out): base ** (start + step * i) for
// the first half, base ** (end - step * (steps - 1 - i)) for the second, with
// step = double(end - start) / (steps - 1), pow in double, then stored in
// the result type. steps == 1 fills base ** start. Complex results compute
// in their own type, as c10::complex does: the exponents are linspace's
// complex ramp, and std::pow(base, z) is exp(z log(base)), log(base) = log|base|
// (+ i pi for a negative base).
std::vector<Value> logspace(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType out = ctx.out_types.at(0);
  const int64_t steps = out.numel();
  const double base = ctx.double_arg(3, 10.0);
  if (steps == 0) return {b.splat(0, out)};
  if (hlo::is_complex(out.dtype)) {
    const ScalarArg& start = ctx.args.at(0).scalar;
    Value exponents = steps == 1 ? b.broadcast_to(ctx.scalar(start, out.dtype), {1})
                                 : complex_ramp(ctx, steps, start, ctx.args.at(1).scalar, out.dtype);
    const ElementType part = hlo::complex_part_type(out.dtype);
    Value log_modulus = ctx.cast_scalar(float_scalar(std::log(std::abs(base))), part);
    Value log_base = b.complex(log_modulus, ctx.cast_scalar(float_scalar(base < 0 ? M_PI : 0.0), part));
    Value powers = b.unary("exponential", b.binary("multiply", exponents, b.broadcast_to(log_base, {steps})));
    return {b.reshape(powers, out.shape)};
  }
  const Shape shape{steps};
  Value base_v = b.broadcast_to(ctx.cast_scalar(float_scalar(base), ElementType::F64), shape);
  if (steps == 1) {
    const double v = std::pow(base, ctx.args.at(0).scalar.as_double());
    return {b.reshape(store_as(b, ctx.cast_scalar(float_scalar(v), ElementType::F64), out.dtype), out.shape)};
  }
  Endpoints ep = endpoints(ctx, out.dtype);
  Value step = b.binary("divide", ep.diff, b.constant(static_cast<double>(steps - 1), ElementType::F64));
  Value i = b.iota({ElementType::S64, shape}, 0);
  Value from_end = b.binary("subtract", b.broadcast_to(b.constant_int(steps - 1, ElementType::S64), shape), i);
  Value d = b.broadcast_to(step, shape);
  Value head =
      b.binary("add", b.broadcast_to(ep.start, shape), b.binary("multiply", d, b.convert(i, ElementType::F64)));
  Value tail = b.binary("subtract", b.broadcast_to(ep.end, shape),
                        b.binary("multiply", d, b.convert(from_end, ElementType::F64)));
  Value halfway = b.broadcast_to(b.constant_int(steps / 2, ElementType::S64), shape);
  Value exponent = b.select(b.compare(i, halfway, CompareDirection::LT), head, tail);
  return {b.reshape(store_as(b, b.binary("power", base_v, exponent), out.dtype), out.shape)};
}

}  // namespace torch_tpu::lower
