// The fused recurrent cells ATen's LSTM/GRU run on a device that is not CPU
// (aten/src/ATen/native/RNN.cpp's LSTMCell/GRUCell take this path for CUDA,
// XPU and PrivateUse1): the gate nonlinearities of one time step after the
// two gate matmuls, and their backwards.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(thnn_fused_gru_cell)
TORCH_TPU_LOWERING(thnn_fused_gru_cell_backward)
TORCH_TPU_LOWERING(thnn_fused_lstm_cell)
TORCH_TPU_LOWERING(thnn_fused_lstm_cell_backward_impl)

}  // namespace torch_tpu::lower
