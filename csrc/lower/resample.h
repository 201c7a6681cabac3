// Resampling lowerings: upsample / interpolate and grid_sample, with their
// backward ops.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// resample.cpp
TORCH_TPU_LOWERING(grid_sampler)
TORCH_TPU_LOWERING(grid_sampler_backward)
TORCH_TPU_LOWERING(upsample_bicubic)
TORCH_TPU_LOWERING(upsample_bicubic_aa)
TORCH_TPU_LOWERING(upsample_bicubic_aa_backward)
TORCH_TPU_LOWERING(upsample_bicubic_backward)
TORCH_TPU_LOWERING(upsample_bilinear_aa)
TORCH_TPU_LOWERING(upsample_bilinear_aa_backward)
TORCH_TPU_LOWERING(upsample_linear)
TORCH_TPU_LOWERING(upsample_linear_backward)
TORCH_TPU_LOWERING(upsample_nearest)
TORCH_TPU_LOWERING(upsample_nearest_backward)
TORCH_TPU_LOWERING(upsample_nearest_exact)
TORCH_TPU_LOWERING(upsample_nearest_exact_backward)

}  // namespace torch_tpu::lower
