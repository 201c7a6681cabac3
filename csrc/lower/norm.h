// Layer normalization and weight normalization, forward and backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(native_layer_norm)
TORCH_TPU_LOWERING(native_layer_norm_backward)
TORCH_TPU_LOWERING(weight_norm_interface)
TORCH_TPU_LOWERING(weight_norm_interface_backward)

}  // namespace torch_tpu::lower
