// Activation functions and their backward ops. Each follows the formula of
// PyTorch's CPU kernel (aten/src/ATen/native/cpu/Activation.cpp) including
// its comparison directions, which decide where NaN goes and which side of a
// kink gets the gradient. Reduced-precision floats compute in float32 and
// round once at the end (the CPU kernels' opmath); integer results (hardtanh,
// threshold) compute in their own dtype with the Scalars cast to it.
#include "lower/activation.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "lower/common/arith.h"
#include "lower/common/result_types.h"
#include "lower/common/sampling.h"
#include "lower/common/scalars.h"
#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Tensor argument `i` broadcast to result `r`'s shape, in its compute dtype.
Value input(LowerContext& ctx, size_t i, size_t r = 0) {
  return coerce(ctx.b, ctx.tensor(i), accumulation_out_type(ctx, r));
}

// A Scalar argument shaped like `like`. Integer compute types take the
// Scalar cast to the integer (Scalar::to<int64_t>() truncates), as the CPU
// kernels do for hardtanh/threshold on integer tensors.
Value scalar(LowerContext& ctx, size_t i, const Value& like) {
  ScalarArg s = ctx.args.at(i).scalar;
  if (!hlo::is_float(like.dtype()) && s.kind == ScalarArg::Kind::Float) {
    s.kind = ScalarArg::Kind::Int;
    s.i = static_cast<int64_t>(s.f);
  }
  return ctx.b.broadcast_to(ctx.scalar(s, like.dtype()), like.shape());
}

// Scalars CPU's kernel converts to `dtype`, which may be narrower than the
// opmath type the lowering computes in (threshold's value, float
// hardtanh's and hardshrink's bounds take the tensor's own type).
void check_scalars_fit(const LowerContext& ctx, std::initializer_list<size_t> indices, ElementType dtype) {
  for (size_t i : indices) check_scalar_fits(ctx.args.at(i).scalar, dtype);
}

using math::add;
using math::div;
using math::mul;
using math::sub;
Value less(Builder& b, const Value& x, const Value& y) { return b.compare(x, y, CompareDirection::LT); }
Value less_eq(Builder& b, const Value& x, const Value& y) { return b.compare(x, y, CompareDirection::LE); }
Value greater(Builder& b, const Value& x, const Value& y) { return b.compare(x, y, CompareDirection::GT); }
Value greater_eq(Builder& b, const Value& x, const Value& y) { return b.compare(x, y, CompareDirection::GE); }

// min(max(x, lo), hi) with NaN passing through (comparisons with NaN are
// false), as at::clamp and std::min/std::max in the CPU kernels.
Value clamp_nan(Builder& b, const Value& lo, const Value& x, const Value& hi) {
  Value r = b.select(less(b, x, lo), lo, x);
  return b.select(greater(b, r, hi), hi, r);
}

std::vector<Value> result(LowerContext& ctx, const Value& v, size_t i = 0) {
  return {ctx.b.convert(v, ctx.out_types.at(i).dtype)};
}

// |x| within lambd: hardshrink's zero band and the shrinks' zero gradient.
Value in_band(LowerContext& ctx, const Value& x, size_t lambd_index) {
  Builder& b = ctx.b;
  Value l = scalar(ctx, lambd_index, x);
  return b.binary("and", greater_eq(b, x, b.unary("negate", l)), less_eq(b, x, l));
}

// log1p(exp(x)), the softplus inside mish.
Value softplus_value(Builder& b, const Value& x) { return b.unary("log_plus_one", b.unary("exponential", x)); }

// glu's halves of `x` along `dim`.
std::pair<Value, Value> halves(Builder& b, const Value& x, int64_t dim) {
  Shape start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  const int64_t n = x.shape()[dim] / 2;
  limit[dim] = n;
  Value first = b.slice(x, start, limit, strides);
  start[dim] = n;
  limit[dim] = 2 * n;
  return {first, b.slice(x, start, limit, strides)};
}

// x > 0 ? g : g * slope (leaky_relu_backward; rrelu's eval-mode backward).
Value leaky_grad(Builder& b, const Value& g, const Value& x, const Value& slope) {
  return b.select(greater(b, x, b.splat(0, x.type)), g, mul(b, g, slope));
}

}  // namespace

// elu(self, alpha, scale, input_scale): x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale.
// celu and selu reach the device as this op.
std::vector<Value> elu(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "elu");
  Value x = input(ctx, 0);
  Value neg = mul(b, mul(b, b.unary("exponential_minus_one", mul(b, x, scalar(ctx, 3, x))), scalar(ctx, 1, x)),
                  scalar(ctx, 2, x));
  return result(ctx, b.select(less_eq(b, x, b.splat(0, x.type)), neg, mul(b, x, scalar(ctx, 2, x))));
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
std::vector<Value> elu_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 5);
  Value alpha = scalar(ctx, 1, x), scale = scalar(ctx, 2, x), input_scale = scalar(ctx, 3, x);
  Value neg_coef = mul(b, alpha, scale);
  // From the result y: d/dx = input_scale * (y + alpha * scale) where x <= 0.
  Value neg = ctx.bool_arg(4)
                  ? mul(b, mul(b, g, input_scale), add(b, x, neg_coef))
                  : mul(b, mul(b, mul(b, g, input_scale), neg_coef), b.unary("exponential", mul(b, x, input_scale)));
  return result(ctx, b.select(less_eq(b, x, b.splat(0, x.type)), neg, mul(b, g, scale)));
}

// hardtanh(self, min_val, max_val) == clamp; relu6 reaches the device as this op.
std::vector<Value> hardtanh(LowerContext& ctx) {
  const ElementType out = ctx.out_types.at(0).dtype;
  if (hlo::is_float(out)) check_scalars_fit(ctx, {1, 2}, out);
  Value x = input(ctx, 0);
  return result(ctx, clamp_nan(ctx.b, scalar(ctx, 1, x), x, scalar(ctx, 2, x)));
}

// hardtanh_backward(grad_output, self, min_val, max_val): 0 where x <= min or x >= max.
std::vector<Value> hardtanh_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value outside = b.binary("or", less_eq(b, x, scalar(ctx, 2, x)), greater_eq(b, x, scalar(ctx, 3, x)));
  return result(ctx, b.select(outside, b.splat(0, g.type), g));
}

// hardshrink(self, lambd): 0 where -lambd <= x <= lambd.
std::vector<Value> hardshrink(LowerContext& ctx) {
  require_float(ctx.tensor(0).dtype(), "hardshrink");
  check_scalars_fit(ctx, {1}, ctx.out_types.at(0).dtype);
  Value x = input(ctx, 0);
  return result(ctx, ctx.b.select(in_band(ctx, x, 1), ctx.b.splat(0, x.type), x));
}

// hardshrink_backward(grad_out, self, lambd); softshrink_backward has the same form.
std::vector<Value> hardshrink_backward(LowerContext& ctx) {
  Value g = input(ctx, 0), x = input(ctx, 1);
  return result(ctx, ctx.b.select(in_band(ctx, x, 2), ctx.b.splat(0, g.type), g));
}

std::vector<Value> softshrink_backward(LowerContext& ctx) { return hardshrink_backward(ctx); }

// softshrink(self, lambd): x > l ? x - l : (x < -l ? x + l : x * 0); x * 0 keeps NaN.
std::vector<Value> softshrink(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value x = input(ctx, 0), l = scalar(ctx, 1, x);
  Value inner = b.select(less(b, x, b.unary("negate", l)), add(b, x, l), mul(b, x, b.splat(0, x.type)));
  return result(ctx, b.select(greater(b, x, l), sub(b, x, l), inner));
}

// hardsigmoid: min(max(x + 3, 0), 6) / 6.
std::vector<Value> hardsigmoid(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "hardsigmoid");
  Value x = input(ctx, 0);
  Value r = clamp_nan(b, b.splat(0, x.type), add(b, x, b.splat(3, x.type)), b.splat(6, x.type));
  return result(ctx, div(b, r, b.splat(6, x.type)));
}

// hardsigmoid_backward(grad_output, self): g / 6 where -3 < x < 3, else 0.
// As g times 1/6 rounded to float32, in every dtype: CPU's and CUDA's
// kernels write the constant as 1.0f / 6.0f, so a float64 gradient is 3e-8
// (relative) from g / 6 there, and PP-LCNet's float64 training step
// differed from CPU's by that much.
std::vector<Value> hardsigmoid_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value inside = b.binary("and", greater(b, x, b.splat(-3, x.type)), less(b, x, b.splat(3, x.type)));
  const double one_sixth = static_cast<double>(1.0f / 6.0f);
  return result(ctx, b.select(inside, mul(b, g, b.splat(one_sixth, g.type)), b.splat(0, g.type)));
}

// hardswish: x * min(max(x + 3, 0), 6) / 6.
std::vector<Value> hardswish(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "hardswish");
  Value x = input(ctx, 0);
  Value r = clamp_nan(b, b.splat(0, x.type), add(b, x, b.splat(3, x.type)), b.splat(6, x.type));
  return result(ctx, div(b, mul(b, x, r), b.splat(6, x.type)));
}

// hardswish_backward(grad_output, self): 0 up to -3, g * (x / 3 + 1/2) below 3, g
// from 3 on and for NaN (CPU's sides at the kinks).
std::vector<Value> hardswish_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value mid = mul(b, g, add(b, div(b, x, b.splat(3, x.type)), b.splat(0.5, x.type)));
  Value upper = b.select(less(b, x, b.splat(3, x.type)), mid, g);
  return result(ctx, b.select(less_eq(b, x, b.splat(-3, x.type)), b.splat(0, g.type), upper));
}

// leaky_relu(self, negative_slope): x > 0 ? x : x * slope.
std::vector<Value> leaky_relu(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "leaky_relu");
  Value x = input(ctx, 0);
  return result(ctx, b.select(greater(b, x, b.splat(0, x.type)), x, mul(b, x, scalar(ctx, 1, x))));
}

// leaky_relu_backward(grad_output, self, negative_slope, self_is_result): from
// the result y, y > 0 iff x > 0 only for a non-negative slope; CPU and CUDA
// reject the other case (the meta kernel does not).
std::vector<Value> leaky_relu_backward(LowerContext& ctx) {
  if (ctx.bool_arg(3) && ctx.double_arg(2) < 0) {
    throw std::runtime_error(  // RuntimeError, as TORCH_CHECK
        "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is "
        "caused by calling in-place forward function with a negative slope, please call out-of-place version instead. "
        "File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward "
        "calculation with negative slope");
  }
  Value g = input(ctx, 0), x = input(ctx, 1);
  return result(ctx, leaky_grad(ctx.b, g, x, scalar(ctx, 2, x)));
}

// log_sigmoid_forward(self) -> (output, buffer): min(x, 0) - log1p(exp(-|x|)),
// buffer exp(-|x|) (CPU's; CUDA leaves it empty, and so may the meta kernel).
std::vector<Value> log_sigmoid_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "log_sigmoid_forward");
  Value x = input(ctx, 0);
  Value z = b.unary("exponential", b.unary("negate", b.unary("abs", x)));
  Value zero = b.splat(0, x.type);
  Value out = sub(b, b.select(less(b, x, zero), x, zero), b.unary("log_plus_one", z));
  std::vector<Value> r = result(ctx, out);
  const TensorType& buffer = ctx.out_types.at(1);
  r.push_back(buffer.shape == x.shape() ? b.convert(z, buffer.dtype) : zeros(b, buffer));
  return r;
}

// log_sigmoid_backward(grad_output, self, buffer): (x < 0 ? 1 - z/(1+z) : z/(1+z)) * g
// with z = exp(-|x|), recomputed here because the buffer may be empty.
std::vector<Value> log_sigmoid_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value z = b.unary("exponential", b.unary("negate", b.unary("abs", x)));
  Value t = div(b, z, add(b, b.splat(1, z.type), z));
  Value d = b.select(less(b, x, b.splat(0, x.type)), sub(b, b.splat(1, t.type), t), t);
  return result(ctx, mul(b, d, g));
}

// mish: x * tanh(log1p(exp(x))).
std::vector<Value> mish(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "mish");
  Value x = input(ctx, 0);
  return result(ctx, mul(b, x, b.unary("tanh", softplus_value(b, x))));
}

// mish_backward(grad_output, self): g * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x)).
std::vector<Value> mish_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value t = b.unary("tanh", softplus_value(b, x));
  Value one = b.splat(1, x.type);
  Value d = add(b, t, mul(b, mul(b, x, b.unary("logistic", x)), sub(b, one, mul(b, t, t))));
  return result(ctx, mul(b, g, d));
}

// softplus(self, beta, threshold): x * beta > threshold ? x : log1p(exp(x * beta)) / beta.
std::vector<Value> softplus(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "softplus");
  Value x = input(ctx, 0), beta = scalar(ctx, 1, x);
  Value xb = mul(b, x, beta);
  Value soft = div(b, b.unary("log_plus_one", b.unary("exponential", xb)), beta);
  return result(ctx, b.select(greater(b, xb, scalar(ctx, 2, x)), x, soft));
}

// softplus_backward(grad_output, self, beta, threshold): g * z / (z + 1), z = exp(x * beta).
std::vector<Value> softplus_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  Value xb = mul(b, x, scalar(ctx, 2, x));
  Value z = b.unary("exponential", xb);
  Value soft = div(b, mul(b, g, z), add(b, z, b.splat(1, z.type)));
  return result(ctx, b.select(greater(b, xb, scalar(ctx, 3, x)), g, soft));
}

// threshold(self, threshold, value): x <= threshold ? value : x.
std::vector<Value> threshold(LowerContext& ctx) {
  // CPU's kernel converts the threshold to the opmath type, the value to the tensor's.
  const ElementType out = ctx.out_types.at(0).dtype;
  check_scalars_fit(ctx, {1}, accumulation_type(out));
  check_scalars_fit(ctx, {2}, out);
  Builder& b = ctx.b;
  Value x = input(ctx, 0);
  return result(ctx, b.select(less_eq(b, x, scalar(ctx, 1, x)), scalar(ctx, 2, x), x));
}

// glu(self, dim): a * sigmoid(b) of self's two halves along dim.
std::vector<Value> glu(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& self = ctx.tensor(0);
  require_float(self.dtype(), "glu");
  Value x = b.convert(self, accumulation_type(self.dtype()));
  auto [first, second] = halves(b, x, wrap_dim(ctx.int_arg(1, -1), x.rank()));
  return result(ctx, mul(b, first, b.unary("logistic", second)));
}

// glu_backward(grad_output, self, dim): [g * s, g * a * s * (1 - s)], s = sigmoid(second half).
std::vector<Value> glu_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& self = ctx.tensor(1);
  const ElementType acc = accumulation_type(self.dtype());
  Value x = b.convert(self, acc), g = b.convert(ctx.tensor(0), acc);
  const int64_t dim = wrap_dim(ctx.int_arg(2, -1), x.rank());
  auto [first, second] = halves(b, x, dim);
  Value s = b.unary("logistic", second);
  Value grad_second = mul(b, mul(b, mul(b, g, first), s), sub(b, b.splat(1, s.type), s));
  return result(ctx, b.concatenate({mul(b, g, s), grad_second}, dim));
}

// _prelu_kernel(self, weight): x > 0 ? x : weight * x (weight already broadcastable).
std::vector<Value> prelu_kernel(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "prelu_cpu");
  Value x = input(ctx, 0), w = input(ctx, 1);
  return result(ctx, b.select(greater(b, x, b.splat(0, x.type)), x, mul(b, w, x)));
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight),
// both of the broadcast shape (autograd sums grad_weight down to weight's).
std::vector<Value> prelu_kernel_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1), w = input(ctx, 2);
  Value pos = greater(b, x, b.splat(0, x.type));
  Value grad_self = b.select(pos, g, mul(b, w, g));
  Value grad_weight = b.select(pos, b.splat(0, g.type), mul(b, x, g));
  return {b.convert(grad_self, ctx.out_types.at(0).dtype),
          b.convert(coerce(b, grad_weight, accumulation_out_type(ctx, 1)), ctx.out_types.at(1).dtype)};
}

// rrelu_with_noise(self, noise!, lower, upper, training, generator). Training:
// x <= 0 draws a slope r ~ U(lower, upper), out = x * r, noise = r; noise = 1
// elsewhere (the new noise is returned after the result: the device layer
// writes it into `noise`). Eval: leaky_relu with slope (lower + upper) / 2,
// noise untouched.
std::vector<Value> rrelu_with_noise(LowerContext& ctx) {
  Builder& b = ctx.b;
  require_float(ctx.tensor(0).dtype(), "rrelu_with_noise");
  Value x = input(ctx, 0);
  const double lower = ctx.double_arg(2, 1.0 / 8), upper = ctx.double_arg(3, 1.0 / 3);
  for (size_t i : {2, 3}) {  // CPU converts the bounds to the opmath type
    if (ctx.has(i)) check_scalar_fits(ctx.args[i].scalar, x.dtype());
  }
  Value neg = less_eq(b, x, b.splat(0, x.type));
  if (!ctx.bool_arg(4)) {
    Value slope = host_number(ctx, (lower + upper) / 2, x);
    return result(ctx, b.select(greater(b, x, b.splat(0, x.type)), x, mul(b, x, slope)));
  }
  Value u = b.convert(uniform01(ctx, x.shape(), ElementType::F32), x.dtype());
  Value r = add(b, host_number(ctx, lower, x), mul(b, u, host_number(ctx, upper - lower, x)));
  std::vector<Value> out = result(ctx, b.select(neg, mul(b, x, r), x));
  out.push_back(b.convert(b.select(neg, r, b.splat(1, r.type)), ctx.tensor(1).dtype()));
  return out;
}

// rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training, self_is_result):
// g * noise when slopes were drawn, else leaky_relu_backward with the mean slope.
std::vector<Value> rrelu_with_noise_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = input(ctx, 0), x = input(ctx, 1);
  const double lower = ctx.double_arg(3), upper = ctx.double_arg(4);
  if (ctx.bool_arg(5) && upper - lower > 1e-6) return result(ctx, mul(b, g, input(ctx, 2)));
  return result(ctx, leaky_grad(b, g, x, host_number(ctx, (lower + upper) / 2, x)));
}

}  // namespace torch_tpu::lower
