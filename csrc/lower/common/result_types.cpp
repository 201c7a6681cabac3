// A lowering's result types (declared in lower/common/result_types.h).
#include "lower/common/result_types.h"

namespace torch_tpu::lower {

const TensorType& out_type(const LowerContext& ctx, size_t i) { return ctx.out_types.at(i); }

TensorType out_shape_in(const LowerContext& ctx, ElementType dtype, size_t i) {
  return {dtype, out_type(ctx, i).shape};
}

TensorType accumulation_out_type(const LowerContext& ctx, size_t i) {
  return out_shape_in(ctx, accumulation_type(out_type(ctx, i).dtype), i);
}

}  // namespace torch_tpu::lower
