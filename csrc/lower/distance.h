// Distances: pdist and cdist (forward and backward), the cross product, and
// the legacy `norm` overloads (pairwise_distance, dist and
// triplet_margin_loss reach the device through them). Registered in
// csrc/device/op_table.cpp. Argument indices follow the ATen schema.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// distance.cpp
TORCH_TPU_LOWERING(cdist_backward)
TORCH_TPU_LOWERING(cdist_forward)
TORCH_TPU_LOWERING(linalg_cross)
TORCH_TPU_LOWERING(norm)
TORCH_TPU_LOWERING(pdist_backward)
TORCH_TPU_LOWERING(pdist_forward)

}  // namespace torch_tpu::lower
