// GradScaler's two kernels, as ATen's CPU and CUDA kernels compute them
// (ATen/native/cpu/AmpGradScalerKernels.cpp, cuda/AmpKernels.cu). Both stay
// on the device: the scaler reads found_inf on the host only when the
// optimizer step asks, as on CUDA.
#include "lower/amp.h"

#include <limits>

#include "lower/common/arith.h"

namespace torch_tpu::lower {

namespace {

// Elementwise i1: whether `x` is finite. |x| < inf is false for exactly NaN
// and the infinities (a comparison with NaN is false).
Value is_finite(Builder& b, const Value& x) {
  Value inf = b.broadcast_to(b.constant(std::numeric_limits<double>::infinity(), x.dtype()), x.shape());
  return b.compare(b.unary("abs", x), inf, hlo::CompareDirection::LT);
}

// A one-element tensor argument as a 0-d value of `dtype`.
Value scalar_of(LowerContext& ctx, size_t index, ElementType dtype) {
  return ctx.b.reshape(ctx.b.convert(ctx.tensor(index), dtype), {});
}

}  // namespace

// _amp_foreach_non_finite_check_and_unscale_(self[], found_inf, inv_scale):
// every gradient is multiplied by inv_scale (in float32 for half types), and
// found_inf becomes 1 when any of them holds a NaN or an infinity; it is
// left as it was otherwise (the scaler zeroes it once per step). Results:
// the gradients, then found_inf.
std::vector<Value> amp_foreach_non_finite_check_and_unscale(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& grads = ctx.args.at(0).tensors;
  const Value& found_inf = ctx.tensor(1);
  Value inv_scale = scalar_of(ctx, 2, ElementType::F32);
  Value any = b.constant(0, ElementType::Pred);
  std::vector<Value> results;
  for (const auto& g : grads) {
    const ElementType t = math::float_opmath(g->dtype());
    Value x = b.convert(*g, t);
    any = b.binary("or", any, b.unary("not", all_true(b, is_finite(b, x))));
    Value scaled = b.binary("multiply", x, b.broadcast_to(b.convert(inv_scale, t), x.shape()));
    results.push_back(b.convert(scaled, g->dtype()));
  }
  Value one = b.broadcast_to(b.constant(1, found_inf.dtype()), found_inf.shape());
  results.push_back(b.select(b.broadcast_to(any, found_inf.shape()), one, found_inf));
  return results;
}

// _amp_update_scale_(self, growth_tracker, found_inf, scale_growth_factor,
// scale_backoff_factor, growth_interval): after a step with a non-finite
// gradient the scale backs off and the count of good steps restarts; after
// growth_interval good steps in a row it grows (unless that overflows) and
// the count restarts. Results: the new scale, then the new growth_tracker.
std::vector<Value> amp_update_scale(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& scale = ctx.tensor(0);
  const Value& tracker = ctx.tensor(1);
  Value s = scalar_of(ctx, 0, ElementType::F32);
  Value n = scalar_of(ctx, 1, ElementType::S32);
  Value found =
      b.compare(scalar_of(ctx, 2, ElementType::F32), b.constant(0, ElementType::F32), hlo::CompareDirection::NE);
  const double growth = ctx.double_arg(3), backoff = ctx.double_arg(4);
  const int64_t interval = ctx.int_arg(5);

  Value successful = b.binary("add", n, b.constant_int(1, ElementType::S32));
  Value grow = b.compare(successful, b.constant_int(interval, ElementType::S32), hlo::CompareDirection::EQ);
  Value grown = b.binary("multiply", s, b.constant(growth, ElementType::F32));
  Value good_scale = b.select(b.binary("and", grow, is_finite(b, grown)), grown, s);
  Value good_count = b.select(grow, b.constant_int(0, ElementType::S32), successful);
  Value new_scale = b.select(found, b.binary("multiply", s, b.constant(backoff, ElementType::F32)), good_scale);
  Value new_count = b.select(found, b.constant_int(0, ElementType::S32), good_count);
  return {b.reshape(b.convert(new_scale, scale.dtype()), scale.shape()),
          b.reshape(b.convert(new_count, tracker.dtype()), tracker.shape())};
}

}  // namespace torch_tpu::lower
