// Scans along one dim: cumprod, cummax/cummin, logcumsumexp (cumsum lives in
// reduce.cpp).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(cummax)
TORCH_TPU_LOWERING(cummin)
TORCH_TPU_LOWERING(cumprod)
TORCH_TPU_LOWERING(logcumsumexp)

}  // namespace torch_tpu::lower
