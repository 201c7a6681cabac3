// Padding lowerings: reflection and replication padding and their backward ops.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// padding.cpp
TORCH_TPU_LOWERING(reflection_pad)
TORCH_TPU_LOWERING(reflection_pad_backward)
TORCH_TPU_LOWERING(replication_pad)
TORCH_TPU_LOWERING(replication_pad_backward)

}  // namespace torch_tpu::lower
