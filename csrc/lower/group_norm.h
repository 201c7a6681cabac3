// Group normalization, forward and backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(native_group_norm)
TORCH_TPU_LOWERING(native_group_norm_backward)

}  // namespace torch_tpu::lower
