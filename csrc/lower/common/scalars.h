// Numbers a lowering computes on the host and hands to its program.
#pragma once

#include <cstdint>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// A number the lowering computed, as a Python float would arrive.
ScalarArg float_scalar(double v);

// Scalar::to<int64_t>(): floats truncate toward zero.
int64_t scalar_to_int(const ScalarArg& s);

// `v` in `dtype`, broadcast to `shape` (0-d by default): a runtime input
// unless it is 0 or ±1 (LowerContext::cast_scalar), so a changing
// hyperparameter reuses the program.
Value host_number(LowerContext& ctx, double v, ElementType dtype, const Shape& shape = {});
// The same with `like`'s dtype and shape.
Value host_number(LowerContext& ctx, double v, const Value& like);

}  // namespace torch_tpu::lower
