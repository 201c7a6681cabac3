// Activation functions (elu family, hardtanh, shrinks, hard sigmoid/swish,
// leaky/randomized/parametric relu, mish, softplus, log-sigmoid, threshold,
// glu) and the backward ops autograd calls for them.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// activation.cpp
TORCH_TPU_LOWERING(elu)
TORCH_TPU_LOWERING(elu_backward)
TORCH_TPU_LOWERING(glu)
TORCH_TPU_LOWERING(glu_backward)
TORCH_TPU_LOWERING(hardshrink)
TORCH_TPU_LOWERING(hardshrink_backward)
TORCH_TPU_LOWERING(hardsigmoid)
TORCH_TPU_LOWERING(hardsigmoid_backward)
TORCH_TPU_LOWERING(hardswish)
TORCH_TPU_LOWERING(hardswish_backward)
TORCH_TPU_LOWERING(hardtanh)
TORCH_TPU_LOWERING(hardtanh_backward)
TORCH_TPU_LOWERING(leaky_relu)
TORCH_TPU_LOWERING(leaky_relu_backward)
TORCH_TPU_LOWERING(log_sigmoid_backward)
TORCH_TPU_LOWERING(log_sigmoid_forward)
TORCH_TPU_LOWERING(mish)
TORCH_TPU_LOWERING(mish_backward)
TORCH_TPU_LOWERING(prelu_kernel)
TORCH_TPU_LOWERING(prelu_kernel_backward)
TORCH_TPU_LOWERING(rrelu_with_noise)
TORCH_TPU_LOWERING(rrelu_with_noise_backward)
TORCH_TPU_LOWERING(softplus)
TORCH_TPU_LOWERING(softplus_backward)
TORCH_TPU_LOWERING(softshrink)
TORCH_TPU_LOWERING(softshrink_backward)
TORCH_TPU_LOWERING(threshold)

}  // namespace torch_tpu::lower
