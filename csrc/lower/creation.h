// Creation ops whose values depend on position: arange, linspace, logspace,
// eye.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(arange)
TORCH_TPU_LOWERING(eye)
TORCH_TPU_LOWERING(linspace)
TORCH_TPU_LOWERING(logspace)

}  // namespace torch_tpu::lower
