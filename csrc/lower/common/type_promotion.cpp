// PyTorch's type promotion (c10/core/ScalarType.h promoteTypes,
// ATen/native/TypeProperties.cpp result_type) over HLO element types.
#include "lower/common/type_promotion.h"

#include <optional>
#include <string>

namespace torch_tpu::lower {

namespace {

// PyTorch's type categories: bool < integer < floating < complex.
int category(ElementType t) {
  if (t == ElementType::Pred) return 0;
  if (hlo::is_complex(t)) return 3;
  return hlo::is_float(t) ? 2 : 1;
}

// at::native::ResultTypeState: dimensioned tensors, zero-dim tensors and
// Python numbers each promote among themselves; a lower-priority group only
// counts when its category is higher.
struct ResultTypeState {
  std::optional<ElementType> dim, zero, wrapped;
};

void update(std::optional<ElementType>& slot, ElementType t) { slot = slot ? promote_types(*slot, t) : t; }

std::optional<ElementType> combine_categories(std::optional<ElementType> higher, std::optional<ElementType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  // A complex operand of a lower priority (a Python complex number) still
  // makes the result complex, keeping a floating operand's precision
  // (c10 combine_categories: toComplexType(higher)).
  if (hlo::is_complex(*higher)) return higher;
  if (hlo::is_complex(*lower)) {
    if (*higher == ElementType::F64) return ElementType::C128;
    return hlo::is_float(*higher) ? ElementType::C64 : *lower;
  }
  if (hlo::is_float(*higher)) return higher;
  if (*higher == ElementType::Pred || hlo::is_float(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

ElementType promote_types(ElementType a, ElementType b) {
  if (a == b) return a;
  if (a == ElementType::Pred) return b;
  if (b == ElementType::Pred) return a;
  if (hlo::is_complex(a) || hlo::is_complex(b)) {
    // c10 promoteTypes: complex64 with float64 (or complex128) is complex128.
    const bool wide =
        a == ElementType::F64 || b == ElementType::F64 || a == ElementType::C128 || b == ElementType::C128;
    return wide ? ElementType::C128 : ElementType::C64;
  }
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (hlo::is_float(a)) {
    // f16 with bf16 has no smaller common type than f32.
    return (a == ElementType::F64 || b == ElementType::F64) ? ElementType::F64 : ElementType::F32;
  }
  if (hlo::is_unsigned(a) == hlo::is_unsigned(b)) return hlo::byte_size(a) >= hlo::byte_size(b) ? a : b;
  ElementType u = hlo::is_unsigned(a) ? a : b, s = hlo::is_unsigned(a) ? b : a;
  if (hlo::byte_size(s) > hlo::byte_size(u)) return s;
  return hlo::byte_size(u) == 1 ? ElementType::S16 : (hlo::byte_size(u) == 2 ? ElementType::S32 : ElementType::S64);
}

// The common dtype of arguments `idx` (tensors and Scalars; others skipped).
ElementType result_type(LowerContext& ctx, std::initializer_list<size_t> idx) {
  ResultTypeState st;
  bool dim_f64 = false, dim_c128 = false;
  for (size_t i : idx) {
    if (!ctx.has(i)) continue;
    const Arg& a = ctx.args[i];
    if (a.kind == Arg::Kind::Tensor && a.tensor) {
      ElementType t = a.tensor->dtype();
      if (a.tensor->rank() == 0) {
        update(st.zero, t);
      } else {
        update(st.dim, t);
        dim_f64 |= t == ElementType::F64;
        dim_c128 |= t == ElementType::C128;
      }
    } else if (a.kind == Arg::Kind::Scalar) {
      // Python float -> default dtype (float32), int -> int64, bool -> bool,
      // complex -> complex64 (the default dtype's complex type).
      ElementType t = a.scalar.kind == ScalarArg::Kind::Complex ? ElementType::C64
                      : a.scalar.kind == ScalarArg::Kind::Float ? ElementType::F32
                      : a.scalar.kind == ScalarArg::Kind::Bool  ? ElementType::Pred
                                                                : ElementType::S64;
      update(st.wrapped, t);
    } else if (a.kind == Arg::Kind::Double) {
      update(st.wrapped, ElementType::F32);
    } else if (a.kind == Arg::Kind::Int) {
      update(st.wrapped, ElementType::S64);
    }
  }
  std::optional<ElementType> r = combine_categories(st.dim, combine_categories(st.zero, st.wrapped));
  ElementType t = r.value_or(ctx.out_types.at(0).dtype);
  // Python numbers reach us as f64 0-dim CPU tensors (wrapped numbers look
  // like any 0-dim tensor here); PyTorch gives those the default dtype.
  const ElementType out = ctx.out_types.at(0).dtype;
  if (t == ElementType::F64 && !dim_f64 && out != ElementType::F64) t = hlo::is_float(out) ? out : ElementType::F32;
  // Python complex numbers likewise reach us as complex128 0-dim tensors; the
  // default complex dtype is complex64.
  if (t == ElementType::C128 && !dim_c128 && !dim_f64 && out != ElementType::C128) {
    t = hlo::is_complex(out) ? out : ElementType::C64;
  }
  return t;
}

const char* torch_dtype_name(ElementType t) {
  switch (t) {
    case ElementType::Pred:
      return "Bool";
    case ElementType::S8:
      return "Char";
    case ElementType::S16:
      return "Short";
    case ElementType::S32:
      return "Int";
    case ElementType::S64:
      return "Long";
    case ElementType::U8:
      return "Byte";
    case ElementType::F16:
      return "Half";
    case ElementType::BF16:
      return "BFloat16";
    case ElementType::F32:
      return "Float";
    case ElementType::F64:
      return "Double";
    case ElementType::C64:
      return "ComplexFloat";
    case ElementType::C128:
      return "ComplexDouble";
    default:
      return hlo::mlir_name(t);
  }
}

// The CPU/CUDA kernels have no instance for this dtype (their dispatch macro
// raises); the meta kernel does not check that.
void not_implemented_for(const char* op, ElementType t) {
  throw NotImplementedForDtype(std::string("\"") + op + "\" not implemented for '" + torch_dtype_name(t) + "'");
}

void require_float(ElementType t, const char* op) {
  if (!hlo::is_float(t)) not_implemented_for(op, t);
}

void require_floating_input(ElementType t, const char* op) {
  if (!hlo::is_float(t)) throw NotImplementedForDtype(std::string(op) + ": only floating point inputs are supported");
}

}  // namespace torch_tpu::lower
