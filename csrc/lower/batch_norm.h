// Batch normalization overloads beyond native_batch_norm's (declared in
// ops.h): the statistics-free and the update-in-place training forms.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// batch_norm.cpp
TORCH_TPU_LOWERING(batch_norm_with_update)
TORCH_TPU_LOWERING(native_batch_norm_no_stats)

}  // namespace torch_tpu::lower
