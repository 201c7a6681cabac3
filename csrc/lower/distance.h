// Distances: pdist and cdist (forward and backward), the cross product, and
// the legacy `norm` overloads (pairwise_distance, dist and
// triplet_margin_loss reach the device through them).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// distance.cpp
TORCH_TPU_LOWERING(cdist_backward)
TORCH_TPU_LOWERING(cdist_forward)
TORCH_TPU_LOWERING(linalg_cross)
TORCH_TPU_LOWERING(norm)
TORCH_TPU_LOWERING(pdist_backward)
TORCH_TPU_LOWERING(pdist_forward)

}  // namespace torch_tpu::lower
