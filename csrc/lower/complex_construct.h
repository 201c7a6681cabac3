// Complex tensors built from two real ones (complex_construct.cpp):
// torch.complex(real, imag) and torch.polar(abs, angle). complex64 is the
// only complex type the device holds.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(complex)
TORCH_TPU_LOWERING(polar)

}  // namespace torch_tpu::lower
