// Numbers a lowering computes on the host (declared in lower/common/scalars.h).
#include "lower/common/scalars.h"

namespace torch_tpu::lower {

ScalarArg float_scalar(double v) {
  ScalarArg s;
  s.kind = ScalarArg::Kind::Float;
  s.f = v;
  return s;
}

int64_t scalar_to_int(const ScalarArg& s) { return s.kind == ScalarArg::Kind::Float ? static_cast<int64_t>(s.f) : s.i; }

Value host_number(LowerContext& ctx, double v, ElementType dtype, const Shape& shape) {
  return ctx.b.broadcast_to(ctx.cast_scalar(float_scalar(v), dtype), shape);
}

Value host_number(LowerContext& ctx, double v, const Value& like) {
  return host_number(ctx, v, like.dtype(), like.shape());
}

}  // namespace torch_tpu::lower
