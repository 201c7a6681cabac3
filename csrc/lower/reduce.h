// Reductions: sum/mean/prod, all/any, amax/amin, max/min (with indices),
// argmax/argmin, var/std and var_mean/std_mean, vector norms, logsumexp,
// softmax/log_softmax and their backward, cumsum, hash_tensor.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(all)
TORCH_TPU_LOWERING(amax)
TORCH_TPU_LOWERING(amin)
TORCH_TPU_LOWERING(any)
TORCH_TPU_LOWERING(assert_async)
TORCH_TPU_LOWERING(argmax)
TORCH_TPU_LOWERING(argmin)
TORCH_TPU_LOWERING(cumsum)
TORCH_TPU_LOWERING(hash_tensor)
TORCH_TPU_LOWERING(linalg_vector_norm)
TORCH_TPU_LOWERING(log_softmax)
TORCH_TPU_LOWERING(log_softmax_backward)
TORCH_TPU_LOWERING(logsumexp)
TORCH_TPU_LOWERING(max_all)
TORCH_TPU_LOWERING(max_dim)
TORCH_TPU_LOWERING(mean)
TORCH_TPU_LOWERING(min_all)
TORCH_TPU_LOWERING(min_dim)
TORCH_TPU_LOWERING(prod)
TORCH_TPU_LOWERING(softmax)
TORCH_TPU_LOWERING(softmax_backward)
TORCH_TPU_LOWERING(std)
TORCH_TPU_LOWERING(std_mean)
TORCH_TPU_LOWERING(sum)
TORCH_TPU_LOWERING(var)
TORCH_TPU_LOWERING(var_mean)

}  // namespace torch_tpu::lower
