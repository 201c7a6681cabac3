// complex and polar: stablehlo.complex of two float32 parts, broadcast to
// PyTorch's result shape (both ops are TensorIterator ops on CPU).
#include "lower/complex_construct.h"

#include <stdexcept>
#include <string>

namespace torch_tpu::lower {

namespace {

// The parts' type for a complex result; only complex64 (float32 parts)
// exists here. PyTorch's rule (complex_check_dtype): the parts' dtype decides
// the result dtype, so float64 or float16 parts cannot be written into a
// complex64 out= tensor; CPU raises RuntimeError (std::invalid_argument
// reaches Python as one).
TensorType part_type(const LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  if (out.dtype != ElementType::C64) throw NotImplementedForDtype("tpu: only complex64 results are supported");
  for (size_t i = 0; i < 2; ++i) {
    const ElementType part = ctx.tensor(i).dtype();
    if (part == ElementType::F64 || part == ElementType::F16) {
      throw std::invalid_argument(std::string("Expected object of scalar type ") +
                                  (part == ElementType::F64 ? "ComplexDouble" : "ComplexHalf") +
                                  " but got scalar type ComplexFloat for argument 'out'");
    }
  }
  return {ElementType::F32, out.shape};
}

}  // namespace

// complex(real, imag) -> real + i * imag.
std::vector<Value> complex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const TensorType part = part_type(ctx);
  if (out.numel() == 0) return {zeros(b, out)};
  return {b.op("complex", {coerce(b, ctx.tensor(0), part), coerce(b, ctx.tensor(1), part)}, out)};
}

// polar(abs, angle) -> abs * cos(angle) + i * abs * sin(angle), as std::polar.
std::vector<Value> polar(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const TensorType part = part_type(ctx);
  if (out.numel() == 0) return {zeros(b, out)};
  Value r = coerce(b, ctx.tensor(0), part), theta = coerce(b, ctx.tensor(1), part);
  Value re = b.binary("multiply", r, b.unary("cosine", theta));
  Value im = b.binary("multiply", r, b.unary("sine", theta));
  return {b.op("complex", {re, im}, out)};
}

}  // namespace torch_tpu::lower
