// Products that PyTorch does not decompose before they reach the device
// (blas_extra.cpp): vdot (conjugating dot) and addbmm (a batch of matrix
// products summed into one matrix).
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(addbmm)
TORCH_TPU_LOWERING(vdot)

}  // namespace torch_tpu::lower
