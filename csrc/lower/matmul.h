// Matrix products: mm, bmm, addmm, addmv, baddbmm, addbmm, dot, vdot and _grouped_mm.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(addbmm)
TORCH_TPU_LOWERING(addmm)
TORCH_TPU_LOWERING(addmv)
TORCH_TPU_LOWERING(baddbmm)
TORCH_TPU_LOWERING(bmm)
TORCH_TPU_LOWERING(dot)
TORCH_TPU_LOWERING(grouped_mm)
TORCH_TPU_LOWERING(mm)
TORCH_TPU_LOWERING(vdot)

}  // namespace torch_tpu::lower
