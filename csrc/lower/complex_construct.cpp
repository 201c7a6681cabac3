// complex and polar: stablehlo.complex of two float parts, broadcast to
// PyTorch's result shape (both ops are TensorIterator ops on CPU).
#include "lower/complex_construct.h"

#include <stdexcept>
#include <string>

namespace torch_tpu::lower {

namespace {

const char* complex_dtype_name(ElementType part) {
  return part == ElementType::F64 ? "ComplexDouble" : part == ElementType::F16 ? "ComplexHalf" : "ComplexFloat";
}

// The parts' type for a complex result: complex64 has float32 parts,
// complex128 float64 ones (complex32 does not exist here). PyTorch's rule
// (complex_check_dtype): the parts' dtype decides the result dtype, so parts
// of another width cannot be written into the out= tensor; CPU raises
// RuntimeError (std::invalid_argument reaches Python as one).
TensorType part_type(const LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  if (!hlo::is_complex(out.dtype)) throw NotImplementedForDtype("tpu: complex results are complex64 or complex128");
  const ElementType expected = hlo::complex_part_type(out.dtype);
  for (size_t i = 0; i < 2; ++i) {
    const ElementType part = ctx.tensor(i).dtype();
    if (part == ElementType::F64 || part == ElementType::F16 || part == ElementType::F32) {
      if (part != expected) {
        throw std::invalid_argument(std::string("Expected object of scalar type ") + complex_dtype_name(part) +
                                    " but got scalar type " + complex_dtype_name(expected) + " for argument 'out'");
      }
    }
  }
  return {expected, out.shape};
}

}  // namespace

// complex(real, imag) -> real + i * imag.
std::vector<Value> complex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const TensorType part = part_type(ctx);
  if (out.numel() == 0) return {zeros(b, out)};
  Value re = coerce(b, ctx.tensor(0), part);
  return {b.complex(re, coerce(b, ctx.tensor(1), part))};
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
  return {b.complex(re, im)};
}

}  // namespace torch_tpu::lower
