// A lowering's results as PyTorch's meta kernel typed them (ctx.out_types),
// and the types a lowering computes them in.
#pragma once

#include <cstddef>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// Result i's type.
const TensorType& out_type(const LowerContext& ctx, size_t i = 0);

// Result i's shape in `dtype`.
TensorType out_shape_in(const LowerContext& ctx, ElementType dtype, size_t i = 0);

// Result i's shape in its accumulation type (bfloat16 and half compute in
// float32, as at::opmath_type).
TensorType accumulation_out_type(const LowerContext& ctx, size_t i = 0);

}  // namespace torch_tpu::lower
