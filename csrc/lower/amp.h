// The gradient scaler's ops (torch.amp.GradScaler): unscaling gradients
// while noting non-finite values, and updating the scale.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// amp.cpp
TORCH_TPU_LOWERING(amp_foreach_non_finite_check_and_unscale)
TORCH_TPU_LOWERING(amp_update_scale)

}  // namespace torch_tpu::lower
