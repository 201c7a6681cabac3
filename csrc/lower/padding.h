// Padding lowerings: reflection and replication padding and their backward ops.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// padding.cpp
TORCH_TPU_LOWERING(reflection_pad)
TORCH_TPU_LOWERING(reflection_pad_backward)
TORCH_TPU_LOWERING(replication_pad)
TORCH_TPU_LOWERING(replication_pad_backward)

}  // namespace torch_tpu::lower
