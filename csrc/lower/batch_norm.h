// Batch normalization: training and inference forms, the statistics-free
// and the update-in-place training overloads, and the backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(batch_norm_with_update)
TORCH_TPU_LOWERING(native_batch_norm)
TORCH_TPU_LOWERING(native_batch_norm_backward)
TORCH_TPU_LOWERING(native_batch_norm_no_stats)
TORCH_TPU_LOWERING(native_batch_norm_no_training)

}  // namespace torch_tpu::lower
