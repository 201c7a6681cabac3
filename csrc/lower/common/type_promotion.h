// PyTorch's type promotion over HLO element types, shared by every lowering
// that computes in a common dtype of its arguments (elementwise, math,
// special): c10::promoteTypes, at::native::result_type, and the
// "not implemented for 'Long'" error of a CPU kernel's dtype dispatch.
#pragma once

#include <initializer_list>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// c10::promoteTypes: bool < integer < floating < complex.
ElementType promote_types(ElementType a, ElementType b);

// at::native::result_type of the tensor and Scalar arguments `idx` (others
// skipped): dimensioned tensors, zero-dim tensors and Python numbers each
// promote among themselves; a lower-priority group counts only when its
// category is higher. Falls back to result 0's dtype when nothing counts.
ElementType result_type(LowerContext& ctx, std::initializer_list<size_t> idx);

// The dtype's name in PyTorch's error messages ("Float", "Long", ...).
const char* torch_dtype_name(ElementType t);

// The CPU/CUDA kernels have no instance for this dtype (their dispatch macro
// raises NotImplementedError); the meta kernels do not check that.
[[noreturn]] void not_implemented_for(const char* op, ElementType t);

// A float-only kernel's dispatch: not_implemented_for(op, t) unless `t` is a
// floating type.
void require_float(ElementType t, const char* op);

// The spatial kernels' own check (pooling, upsampling, grid_sample):
// NotImplementedForDtype "<op>: only floating point inputs are supported".
void require_floating_input(ElementType t, const char* op);

}  // namespace torch_tpu::lower
