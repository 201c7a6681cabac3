// Shape ops that move values: cat, flip, tril/triu.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(cat)
TORCH_TPU_LOWERING(flip)
TORCH_TPU_LOWERING(tril)
TORCH_TPU_LOWERING(triu)

}  // namespace torch_tpu::lower
