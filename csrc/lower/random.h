// Random distributions beyond uniform/normal/bernoulli (random.cpp): the
// in-place samplers (cauchy_, exponential_, geometric_, log_normal_), normal
// with tensor mean/std, multinomial and randperm. Value transforms follow
// PyTorch's (ATen/core/TransformationHelper.h, native/Distributions.cpp).
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// Uniform in [0, 1) as f32 (24 random bits, as PyTorch's uniform_real for
// float) or f64 (53 bits), from the op's own generator stream. Shared with
// rrelu's training-mode slopes (activation.cpp).
Value uniform01(LowerContext& ctx, const Shape& shape, ElementType acc);

TORCH_TPU_LOWERING(cauchy)
TORCH_TPU_LOWERING(exponential)
TORCH_TPU_LOWERING(geometric)
TORCH_TPU_LOWERING(log_normal)
TORCH_TPU_LOWERING(multinomial)
TORCH_TPU_LOWERING(normal_tensor)
TORCH_TPU_LOWERING(randperm)

}  // namespace torch_tpu::lower
