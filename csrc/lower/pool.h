// Pooling: average and max pooling with regular windows (reduce_window),
// adaptive average and max pooling, fractional max pooling, max_unpool, and
// their backward ops.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(adaptive_avg_pool)
TORCH_TPU_LOWERING(adaptive_avg_pool2d_backward)
TORCH_TPU_LOWERING(adaptive_avg_pool3d_backward)
TORCH_TPU_LOWERING(adaptive_max_pool)
TORCH_TPU_LOWERING(adaptive_max_pool2d_backward)
TORCH_TPU_LOWERING(adaptive_max_pool3d_backward)
TORCH_TPU_LOWERING(avg_pool)
TORCH_TPU_LOWERING(avg_pool_backward)
TORCH_TPU_LOWERING(fractional_max_pool)
TORCH_TPU_LOWERING(fractional_max_pool_backward)
TORCH_TPU_LOWERING(max_pool_with_indices)
TORCH_TPU_LOWERING(max_pool_with_indices_backward)
TORCH_TPU_LOWERING(max_unpool)

}  // namespace torch_tpu::lower
