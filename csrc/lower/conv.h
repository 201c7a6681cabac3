// Convolution (every rank, transposed, grouped) and its backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(convolution)
TORCH_TPU_LOWERING(convolution_backward)

}  // namespace torch_tpu::lower
