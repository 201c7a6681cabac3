// The negative log likelihood loss, forward and backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(nll_loss_backward)
TORCH_TPU_LOWERING(nll_loss_forward)

}  // namespace torch_tpu::lower
