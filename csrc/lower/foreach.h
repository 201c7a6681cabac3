// _foreach_* ops and the fused optimizer steps (_fused_adam_, _fused_adamw_,
// _fused_sgd_): one lowering over a whole tensor list, so an optimizer step
// is one program instead of one per parameter and op.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// Elementwise over lists: element i of each Tensor[] (and of each Scalar[])
// goes through the single-tensor lowering of the same name.
TORCH_TPU_LOWERING(foreach_abs)
TORCH_TPU_LOWERING(foreach_add)
TORCH_TPU_LOWERING(foreach_addcdiv)
TORCH_TPU_LOWERING(foreach_addcmul)
TORCH_TPU_LOWERING(foreach_ceil)
TORCH_TPU_LOWERING(foreach_clamp_max)
TORCH_TPU_LOWERING(foreach_clamp_min)
TORCH_TPU_LOWERING(foreach_cos)
TORCH_TPU_LOWERING(foreach_div)
TORCH_TPU_LOWERING(foreach_erf)
TORCH_TPU_LOWERING(foreach_exp)
TORCH_TPU_LOWERING(foreach_expm1)
TORCH_TPU_LOWERING(foreach_floor)
TORCH_TPU_LOWERING(foreach_lerp)
TORCH_TPU_LOWERING(foreach_log)
TORCH_TPU_LOWERING(foreach_log1p)
TORCH_TPU_LOWERING(foreach_log2)
TORCH_TPU_LOWERING(foreach_maximum)
TORCH_TPU_LOWERING(foreach_minimum)
TORCH_TPU_LOWERING(foreach_mul)
TORCH_TPU_LOWERING(foreach_neg)
TORCH_TPU_LOWERING(foreach_pow)
TORCH_TPU_LOWERING(foreach_reciprocal)
TORCH_TPU_LOWERING(foreach_round)
TORCH_TPU_LOWERING(foreach_rsqrt)
TORCH_TPU_LOWERING(foreach_sigmoid)
TORCH_TPU_LOWERING(foreach_sign)
TORCH_TPU_LOWERING(foreach_sin)
TORCH_TPU_LOWERING(foreach_sqrt)
TORCH_TPU_LOWERING(foreach_sub)
TORCH_TPU_LOWERING(foreach_tan)
TORCH_TPU_LOWERING(foreach_tanh)
TORCH_TPU_LOWERING(foreach_trunc)

// Lists in, lists out, with their own argument layout.
TORCH_TPU_LOWERING(foreach_clone)
TORCH_TPU_LOWERING(foreach_copy)
TORCH_TPU_LOWERING(foreach_max)
TORCH_TPU_LOWERING(foreach_norm)
TORCH_TPU_LOWERING(foreach_zero)

// Fused optimizer steps (in place; PyTorch's CPU kernels' arithmetic).
TORCH_TPU_LOWERING(fused_adam)
TORCH_TPU_LOWERING(fused_adamw)
TORCH_TPU_LOWERING(fused_sgd)

}  // namespace torch_tpu::lower
