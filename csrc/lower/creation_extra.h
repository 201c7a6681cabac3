// Creation-like ops (creation_extra.cpp): logspace; nonzero_static,
// whose result size is an argument, so it needs no host synchronization;
// and hash_tensor, a fingerprint of a tensor's values.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(hash_tensor)
TORCH_TPU_LOWERING(logspace)
TORCH_TPU_LOWERING(nonzero_static)

}  // namespace torch_tpu::lower
