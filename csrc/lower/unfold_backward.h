// Backward of Tensor.unfold (sliding windows along one dim).
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// unfold_backward.cpp
TORCH_TPU_LOWERING(unfold_backward)

}  // namespace torch_tpu::lower
