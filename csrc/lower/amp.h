// The gradient scaler's ops (torch.amp.GradScaler): unscaling gradients
// while noting non-finite values, and updating the scale. Registered in
// csrc/device/op_table.cpp. Argument indices follow the ATen schema.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// amp.cpp
TORCH_TPU_LOWERING(amp_foreach_non_finite_check_and_unscale)
TORCH_TPU_LOWERING(amp_update_scale)

}  // namespace torch_tpu::lower
