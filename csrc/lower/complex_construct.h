// Complex tensors built from two real ones (complex_construct.cpp):
// torch.complex(real, imag) and torch.polar(abs, angle). complex64 is the
// only complex type the device holds.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(complex)
TORCH_TPU_LOWERING(polar)

}  // namespace torch_tpu::lower
