// Max pooling with data-dependent or irregular windows, and its inverse:
// adaptive max pooling, fractional max pooling (windows from random samples),
// max_unpool, with backward ops.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// grad (planes..., pooled...) added into a zero tensor of `out` at `indices`
// (flat positions within each plane of out's trailing n dims): the backward
// of every max pooling that returns indices, and max_unpool's scatter.
Value scatter_add_planes(Builder& b, const Value& grad, const Value& indices, const TensorType& out, int64_t n);

// unpool.cpp
TORCH_TPU_LOWERING(adaptive_max_pool)
TORCH_TPU_LOWERING(adaptive_max_pool2d_backward)
TORCH_TPU_LOWERING(adaptive_max_pool3d_backward)
TORCH_TPU_LOWERING(fractional_max_pool)
TORCH_TPU_LOWERING(fractional_max_pool_backward)
TORCH_TPU_LOWERING(max_unpool)

}  // namespace torch_tpu::lower
