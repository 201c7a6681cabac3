// FFT lowerings (fft.cpp): PyTorch's three FFT primitives, which every
// torch.fft function and stft reach, plus the complex-number pieces they
// need (conj_physical) and roll (fftshift).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(conj_physical)
TORCH_TPU_LOWERING(fft_c2c)
TORCH_TPU_LOWERING(fft_c2r)
TORCH_TPU_LOWERING(fft_r2c)
TORCH_TPU_LOWERING(roll)

}  // namespace torch_tpu::lower
