// Random ops: uniform_, normal_, bernoulli, random_, dropout, the in-place
// samplers (cauchy_, exponential_, geometric_, log_normal_), normal with
// tensor mean/std, multinomial and randperm. Value transforms follow
// PyTorch's (ATen/core/TransformationHelper.h, native/Distributions.cpp).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(bernoulli)
TORCH_TPU_LOWERING(cauchy)
TORCH_TPU_LOWERING(exponential)
TORCH_TPU_LOWERING(geometric)
TORCH_TPU_LOWERING(log_normal)
TORCH_TPU_LOWERING(multinomial)
TORCH_TPU_LOWERING(native_dropout)
TORCH_TPU_LOWERING(native_dropout_backward)
TORCH_TPU_LOWERING(normal)
TORCH_TPU_LOWERING(normal_tensor)
TORCH_TPU_LOWERING(random)
TORCH_TPU_LOWERING(randperm)
TORCH_TPU_LOWERING(uniform)

}  // namespace torch_tpu::lower
