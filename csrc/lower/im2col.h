// Patch rearrangements: im2col (nn.functional.unfold), col2im (fold) and
// channel_shuffle.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// im2col.cpp
TORCH_TPU_LOWERING(channel_shuffle)
TORCH_TPU_LOWERING(col2im)
TORCH_TPU_LOWERING(im2col)

}  // namespace torch_tpu::lower
