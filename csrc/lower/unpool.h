// Max pooling with data-dependent or irregular windows, and its inverse:
// adaptive max pooling, fractional max pooling (windows from random samples),
// max_unpool, with backward ops.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// unpool.cpp
TORCH_TPU_LOWERING(adaptive_max_pool)
TORCH_TPU_LOWERING(adaptive_max_pool2d_backward)
TORCH_TPU_LOWERING(adaptive_max_pool3d_backward)
TORCH_TPU_LOWERING(fractional_max_pool)
TORCH_TPU_LOWERING(fractional_max_pool_backward)
TORCH_TPU_LOWERING(max_unpool)

}  // namespace torch_tpu::lower
