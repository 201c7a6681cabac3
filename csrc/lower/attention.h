// Scaled dot-product attention (the fused forward PyTorch's SDPA dispatches
// to on this device) and its backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(scaled_dot_product_fused_attention)
TORCH_TPU_LOWERING(scaled_dot_product_fused_attention_backward)

}  // namespace torch_tpu::lower
