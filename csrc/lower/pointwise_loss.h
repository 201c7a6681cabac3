// Losses that are not nll: pointwise regression and binary losses (mse,
// huber, smooth_l1, binary_cross_entropy) and the margin losses
// (multi_margin, multilabel_margin), forward and backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// pointwise_loss.cpp
TORCH_TPU_LOWERING(binary_cross_entropy)
TORCH_TPU_LOWERING(binary_cross_entropy_backward)
TORCH_TPU_LOWERING(huber_loss)
TORCH_TPU_LOWERING(huber_loss_backward)
TORCH_TPU_LOWERING(mse_loss)
TORCH_TPU_LOWERING(mse_loss_backward)
TORCH_TPU_LOWERING(multi_margin_loss)
TORCH_TPU_LOWERING(multi_margin_loss_backward)
TORCH_TPU_LOWERING(multilabel_margin_loss_backward)
TORCH_TPU_LOWERING(multilabel_margin_loss_forward)
TORCH_TPU_LOWERING(smooth_l1_loss)
TORCH_TPU_LOWERING(smooth_l1_loss_backward)

}  // namespace torch_tpu::lower
