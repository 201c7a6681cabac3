// Backward of Tensor.unfold (sliding windows along one dim).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// unfold_backward.cpp
TORCH_TPU_LOWERING(unfold_backward)

}  // namespace torch_tpu::lower
