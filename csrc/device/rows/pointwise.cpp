// The rows of the registration table (csrc/device/rows/rows.h) for elementwise
// arithmetic and comparisons, activations, math and special functions; their
// lowerings are in csrc/lower/ (elementwise, activation, math, special and
// complex_construct). Above the rows, the checks, argument rewrites and meta
// kernels only these rows name.
#include "device/rows/rows.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/relu_native.h>
#include <c10/util/overflows.h>
#include <limits>
#include <optional>

#include "device/argument_checks.h"
#include "lower/activation.h"
#include "lower/complex_construct.h"
#include "lower/elementwise.h"
#include "lower/lowering.h"
#include "lower/math.h"
#include "lower/special.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// The result type of an in-place elementwise op's first `operands` arguments.
at::ScalarType promoted_type(const std::vector<c10::IValue>& args, size_t operands) {
  at::native::ResultTypeState state{};
  for (size_t i = 0; i < operands && i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor() && v.toTensor().defined()) {
      state = at::native::update_result_type_state(v.toTensor(), state);
    } else if (v.isScalar()) {
      state = at::native::update_result_type_state(v.toScalar(), state);
    }
  }
  return at::native::result_type(state);
}

// Whether the overload writes its first argument in place (add_, not add.out).
bool writes_self(const c10::FunctionSchema& schema, const Args& args) {
  return !schema.arguments().empty() && writes_argument(schema.arguments()[0]) && !schema.arguments()[0].is_out() &&
         !args.empty() && args[0].isTensor();
}

void check_castable_to_self(at::ScalarType result, const Args& args) {
  at::ScalarType self_t = args[0].toTensor().scalar_type();
  TORCH_CHECK(at::canCast(result, self_t), "result type ", result, " can't be cast to the desired output type ",
              self_t);
}

// ---- per-op checks ---------------------------------------------------------------------

// In-place elementwise ops: the result must be castable to self's dtype
// (TensorIterator's rule on CPU and CUDA; PyTorch's Python meta kernels do
// not check it when the other operand is a wrapped number).
void check_inplace_castable(const c10::FunctionSchema& schema, const Args& args) {
  if (writes_self(schema, args)) check_castable_to_self(promoted_type(args, args.size()), args);
}

// The same where the in-place overload's last argument multiplies and takes
// no part in type promotion: add's and sub's alpha, addcmul's and addcdiv's
// value.
void check_scaled_inplace_castable(const c10::FunctionSchema& schema, const Args& args) {
  if (writes_self(schema, args)) check_castable_to_self(promoted_type(args, args.size() - 1), args);
}

// add's, sub's and rsub's alpha (native/BinaryOps.h alpha_check, on CPU and
// CUDA): no float alpha for integers, no complex alpha for real numbers, no
// bool alpha but for bools. PyTorch's Python meta kernels for the in-place
// overloads do not check it.
void check_alpha(const c10::FunctionSchema&, const Args& args) {
  if (args.size() > 2 && args[2].isScalar()) at::native::alpha_check(promoted_type(args, 2), args[2].toScalar());
}

// sub and rsub of bools: the installed torch's own sub_check (an inline of
// its headers), so the exception is that torch's (RuntimeError up to 2.13,
// NotImplementedError from 2.14), where its Python meta kernel raises ValueError.
// Then their alpha, as add's (check_alpha).
void check_subtraction_operands(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor()) return;
  if (args[1].isTensor()) {
    at::native::sub_check(args[0].toTensor(), args[1].toTensor());
  } else if (args[1].isScalar()) {
    at::native::sub_check(args[0].toTensor(), args[1].toScalar());
  }
  check_alpha(schema, args);
}

// div with a rounding mode of complex numbers: no kernel on CPU or CUDA
// (PyTorch's Python meta kernel raises RuntimeError instead).
void check_rounding_division_real(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[2].isString() || !args[0].isTensor()) return;
  const at::ScalarType common = args[1].isTensor() ? at::result_type(args[0].toTensor(), args[1].toTensor())
                                                   : at::result_type(args[0].toTensor(), args[1].toScalar());
  const bool floor = args[2].toStringRef() == "floor";
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(common), "\"", floor ? "div_floor_cpu" : "div_trunc_cpu",
                              "\" not implemented for '", common, "'");
}

// div_ as true division: integers divide into the default float type.
void check_inplace_division_castable(const c10::FunctionSchema& schema, const Args& args) {
  if (!writes_self(schema, args)) return;
  at::ScalarType t = promoted_type(args, 2);
  // div_.Tensor_mode rounds, unless its rounding_mode is None.
  const bool true_div = args.size() < 3 || args[2].isNone();
  if (true_div && at::isIntegralType(t, /*includeBool=*/true)) t = at::typeMetaToScalarType(at::get_default_dtype());
  check_castable_to_self(t, args);
}

// complex(real, imag): CPU's kernel checks the parts (the Python meta kernel
// asserts, or promotes float32 with float64 to complex128).
void check_complex_parts(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return;
  const at::Tensor &re = args[0].toTensor(), &im = args[1].toTensor();
  TORCH_CHECK(re.is_floating_point() && im.is_floating_point(),
              "Expected both inputs to be Half, Float or Double tensors but got ", re.scalar_type(), " and ",
              im.scalar_type());
  TORCH_CHECK(re.scalar_type() == im.scalar_type(), "Expected object of scalar type ", re.scalar_type(),
              " but got scalar type ", im.scalar_type(), " for second argument");
}

// clamp and the activations made of it (relu, hardtanh): no order on
// complex numbers (native/TensorCompare.cpp); XLA's compiler aborts on one.
void check_real_clamp(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  TORCH_CHECK_NOT_IMPLEMENTED(!self || !self->is_complex(), "clamp is not supported for complex types");
}

// clamp with neither bound: CPU's RuntimeError (the Python meta kernel raises ValueError).
void check_clamp_bounds(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 3) return;
  TORCH_CHECK(!(args[1].isNone() && args[2].isNone()), "torch.clamp: At least one of 'min' or 'max' must not be None");
  check_real_clamp(schema, args);
}

// maximum, minimum, fmax, fmin (native/BinaryOps.cpp): no order on complex
// numbers (the installed torch's exception: TypeError from 2.15).
void check_real_operands(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *other = tensor_at(args, 1);
  if (!self || !other) return;
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(!self->is_complex() && !other->is_complex(), schema.name().substr(6),
                " not implemented for complex tensors.");
  });
}

// clamp of integers with a bound past the dtype: the installed torch's rule.
// Up to torch 2.14, c10 converts the bound and refuses it (a negative bound
// wraps into an unsigned dtype: uint8 takes -1 as 255); torch 2.15 drops a
// bound that clamps nothing (a min below the dtype's range, a max above it)
// and refuses the other side in its own words. The installed torch's CPU
// kernel, on one element, raises its error; a bound it takes is replaced by
// the value it clamps with (its clamp of the dtype's extreme), which the
// lowering converts without overflow.
enum class ClampBounds { Both, Min, Max };

void normalize_integer_clamp(Args& args, ClampBounds which) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || !at::isIntegralType(self->scalar_type(), /*includeBool=*/false)) return;
  const size_t min_at = which == ClampBounds::Max ? 0 : 1, max_at = which == ClampBounds::Both ? 2 : 1;
  const bool has_min = which != ClampBounds::Max, has_max = which != ClampBounds::Min;
  auto integer_bound = [&](size_t i) { return i < args.size() && args[i].isInt(); };
  c10::Scalar lowest, highest;
  bool past = false;
  AT_DISPATCH_V2(
      self->scalar_type(), "clamp", AT_WRAP([&] {
        lowest = std::numeric_limits<scalar_t>::lowest();
        highest = std::numeric_limits<scalar_t>::max();
        for (size_t i : {min_at, max_at}) {
          if (integer_bound(i) && c10::overflows<scalar_t, int64_t>(args[i].toInt(), /*strict_unsigned=*/true)) {
            past = true;
          }
        }
      }),
      AT_EXPAND(AT_INTEGRAL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  if (!past) return;
  const at::TensorOptions options(self->scalar_type());
  auto bound = [&](size_t i, bool present) {
    return present && integer_bound(i) ? std::optional<c10::Scalar>(args[i].toInt()) : std::nullopt;
  };
  const std::optional<c10::Scalar> min = bound(min_at, has_min), max = bound(max_at, has_max);
  const at::Tensor one = at::zeros({1}, options);
  if (which == ClampBounds::Both) at::clamp(one, min, max);
  if (which == ClampBounds::Min) at::clamp_min(one, *min);
  if (which == ClampBounds::Max) at::clamp_max(one, *max);
  if (min) args[min_at] = at::clamp_min(at::full({1}, lowest, options), *min).item();
  if (max) args[max_at] = at::clamp_max(at::full({1}, highest, options), *max).item();
}

void normalize_clamp_bounds(Args& args) { normalize_integer_clamp(args, ClampBounds::Both); }
void normalize_clamp_min_bound(Args& args) { normalize_integer_clamp(args, ClampBounds::Min); }
void normalize_clamp_max_bound(Args& args) { normalize_integer_clamp(args, ClampBounds::Max); }

// relu of bool: the installed torch's CPU relu refuses it before computing
// (RuntimeError up to 2.13, NotImplementedError from 2.14), so that kernel,
// on an empty CPU tensor, raises this torch's exception and message.
void check_relu_of_bool(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (self && self->scalar_type() == at::kBool) at::native::relu(at::empty({0}, at::TensorOptions(at::kBool)));
}

void check_sign_not_complex(const c10::FunctionSchema& schema, const Args& args) {
  if (complex_operand(args) < 0) return;
  raise_cpus_error(schema, args);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Unlike NumPy, torch.sign is not intended to support complex numbers. ",
                              "Please use torch.sgn instead.");
}
bool not_floating(at::ScalarType t) { return !at::isFloatingType(t); }

// addcdiv's meta function (native/PointwiseOps.cpp): integer quotients are
// refused, bool included (PyTorch's Python meta prints this as a tuple, and
// lets bool through to a program that does not compile).
void check_addcdiv_integer_division(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *tensor1 = tensor_at(args, 1), *tensor2 = tensor_at(args, 2);
  if (!tensor1 || !tensor2) return;
  TORCH_CHECK(!(at::isIntegralType(tensor1->scalar_type(), /*includeBool=*/true) &&
                at::isIntegralType(tensor2->scalar_type(), /*includeBool=*/true)),
              "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ", "for integer inputs and as ",
              "(input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
}

// masked_fill's kernels (CPU and CUDA alike).
void check_masked_fill_mask(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* mask = tensor_at(args, 1);
  if (!mask) return;
  TORCH_CHECK(mask->scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask->dtype().name());
}

// masked_fill's value as CPU's and CUDA's kernels take it: a number, or a
// 0-d tensor they read (value.item(), a synchronization on CUDA), converted
// to self's dtype checked, so a value that does not fit raises their "value
// cannot be converted to type ... without overflow" (PyTorch's meta kernel,
// torch._refs.masked_fill, raises OverflowError for inf into an integer).
// That kernel also refuses every complex value for a real or bool self,
// where CPU's takes one with no imaginary part (and any for bool: true
// where it is not zero): such a value is passed on converted. Here, before
// the op cache, so a replayed call checks too; a value tensor that always
// fits is not read. A non-bool mask or a value of other rank is left to the
// checks and meta kernel, which raise first on CPU.
void normalize_masked_fill_value(Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *mask = tensor_at(args, 1);
  if (!self || !mask || mask->scalar_type() != at::kBool || args.size() < 3) return;
  const at::ScalarType dtype = self->scalar_type();
  if (args[2].isScalar()) {  // masked_fill.Scalar
    const c10::Scalar value = args[2].toScalar();
    const c10::Scalar converted = converted_value(value, dtype);
    if (value.isComplex() && !at::isComplexType(dtype)) args[2] = converted;
    return;
  }
  const at::Tensor* value = tensor_at(args, 2);
  if (!value || value->dim() != 0) return;
  if (value->is_complex() && !at::isComplexType(dtype)) {
    args[2] = at::scalar_tensor(converted_value(value->item(), dtype), at::TensorOptions(dtype));
  } else {
    check_value_fits(*value, dtype);
  }
}

// where's (native/TensorCompare.cpp).
// where's uint8 condition: CPU and CUDA read it as bool, with a deprecation
// warning (native/TensorCompare.cpp); PyTorch's meta kernel refuses it.
void normalize_where_condition(Args& args) {
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& condition = args[0].toTensor();
  if (!condition.defined() || condition.scalar_type() != at::kByte) return;
  TORCH_WARN_ONCE(
      "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future version "
      "of PyTorch. Use a boolean condition instead.");
  args[0] = condition.to(at::kBool);
}

void check_where_condition(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* condition = tensor_at(args, 0);
  if (!condition) return;
  TORCH_CHECK(condition->scalar_type() == at::kByte || condition->scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition->scalar_type());
}

// lerp's meta functions (native/Lerp.cpp).
void check_lerp_dtypes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *end = tensor_at(args, 1), *weight = tensor_at(args, 2);
  if (!self || !end) return;
  TORCH_CHECK(self->dtype() == end->dtype(), "expected dtype ", self->dtype().name(), " for `end` but got dtype ",
              end->dtype().name());
  if (weight && !weight->unsafeGetTensorImpl()->is_wrapped_number()) {
    TORCH_CHECK(self->dtype() == weight->dtype(), "expected dtype ", self->dtype().name(),
                " for `weight` but got dtype ", weight->dtype().name());
  }
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    {L::abs, "abs abs_ abs.out"},
    {L::acos, "acos acos_ acos.out"},
    {L::acosh, "acosh acosh_ acosh.out"},
    OpSpec(L::add, "add.Tensor add_.Tensor add.out add.Scalar add_.Scalar")
        .check(check_alpha)
        .check(check_scaled_inplace_castable)
        .floats_in(),
    OpSpec(L::addcdiv, "addcdiv addcdiv_ addcdiv.out")
        .check(check_addcdiv_integer_division)
        .check(check_scaled_inplace_castable)
        .floats_in(),
    OpSpec(L::addcmul, "addcmul addcmul_ addcmul.out").check(check_scaled_inplace_castable).floats_in(),
    {L::angle, "angle angle.out"},
    {L::asin, "asin asin_ asin.out"},
    {L::asinh, "asinh asinh_ asinh.out"},
    {L::atan, "atan atan_ atan.out"},
    OpSpec(L::atan2, "atan2 atan2_ atan2.out").check(check_not_complex).check(check_inplace_castable),
    {L::atanh, "atanh atanh_ atanh.out"},
    OpSpec(L::bitwise_and, "bitwise_and.Tensor bitwise_and_.Tensor bitwise_and.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    OpSpec(L::bitwise_left_shift,
           "bitwise_left_shift.Tensor bitwise_left_shift_.Tensor bitwise_left_shift.Tensor_out "
           "bitwise_left_shift.Tensor_Scalar bitwise_left_shift_.Tensor_Scalar bitwise_left_shift.Tensor_Scalar_out "
           "bitwise_left_shift.Scalar_Tensor bitwise_left_shift.Scalar_Tensor_out __lshift__.Tensor __lshift__.Scalar "
           "__ilshift__.Tensor __ilshift__.Scalar")
        .gap("lshift", not_floating),
    {L::bitwise_not, "bitwise_not bitwise_not_ bitwise_not.out"},
    OpSpec(L::bitwise_or, "bitwise_or.Tensor bitwise_or_.Tensor bitwise_or.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    OpSpec(L::bitwise_right_shift,
           "bitwise_right_shift.Tensor bitwise_right_shift_.Tensor bitwise_right_shift.Tensor_out "
           "bitwise_right_shift.Tensor_Scalar bitwise_right_shift_.Tensor_Scalar bitwise_right_shift.Tensor_Scalar_out "
           "bitwise_right_shift.Scalar_Tensor bitwise_right_shift.Scalar_Tensor_out __rshift__.Tensor "
           "__rshift__.Scalar __irshift__.Tensor __irshift__.Scalar")
        .gap("rshift", not_floating),
    OpSpec(L::bitwise_xor, "bitwise_xor.Tensor bitwise_xor_.Tensor bitwise_xor.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    {L::ceil, "ceil ceil_ ceil.out"},
    OpSpec(L::clamp, "clamp clamp_ clamp.out clamp.Tensor clamp_.Tensor clamp.Tensor_out")
        .normalize(normalize_clamp_bounds)
        .check(check_clamp_bounds)
        .check(check_inplace_castable),
    OpSpec(L::clamp_max, "clamp_max clamp_max_ clamp_max.out clamp_max.Tensor clamp_max_.Tensor clamp_max.Tensor_out")
        .normalize(normalize_clamp_max_bound)
        .check(check_real_clamp)
        .check(check_inplace_castable),
    OpSpec(L::clamp_min, "clamp_min clamp_min_ clamp_min.out clamp_min.Tensor clamp_min_.Tensor clamp_min.Tensor_out")
        .normalize(normalize_clamp_min_bound)
        .check(check_real_clamp)
        .check(check_inplace_castable),
    OpSpec(L::complex, "complex complex.out").check(check_complex_parts),
    {L::copysign, "copysign.Tensor copysign_.Tensor copysign.out copysign.Scalar copysign_.Scalar copysign.Scalar_out"},
    {L::cos, "cos cos_ cos.out"},
    {L::cosh, "cosh cosh_ cosh.out"},
    {L::digamma, "digamma digamma_ digamma.out"},
    OpSpec(L::div, "div.Tensor div_.Tensor div.out div.Tensor_mode div_.Tensor_mode div.out_mode")
        .check(check_rounding_division_real)
        .check(check_inplace_division_castable)
        .floats_in(),
    {L::elu, "elu elu_ elu.out"},
    {L::elu_backward, "elu_backward elu_backward.grad_input"},
    {L::eq, "eq.Tensor eq_.Tensor eq.Tensor_out eq.Scalar eq_.Scalar eq.Scalar_out"},
    {L::erf, "erf erf_ erf.out"},
    {L::erfc, "erfc erfc_ erfc.out"},
    {L::erfinv, "erfinv erfinv_ erfinv.out"},
    {L::exp, "exp exp_ exp.out"},
    {L::exp2, "exp2 exp2_ exp2.out"},
    {L::expm1, "expm1 expm1_ expm1.out"},
    // fill_ with a number writes one value; fill_.Tensor writes through copy_ (no expanded self), after ATen's
    // kernel cloned a value that aliases self.
    OpSpec(L::fill, "fill_.Scalar").overlap(WriteOverlap::OneValue).floats_in(),
    OpSpec(L::fill, "fill_.Tensor").overlap(WriteOverlap::InputsCopiedFirst).floats_in(),
    {L::floor, "floor floor_ floor.out"},
    OpSpec(L::floor_divide, "floor_divide floor_divide_.Tensor floor_divide.out").gap("div_floor", not_bool),
    OpSpec(L::fmax, "fmax fmax.out").check(check_real_operands),
    OpSpec(L::fmin, "fmin fmin.out").check(check_real_operands),
    OpSpec(L::fmod, "fmod.Tensor fmod_.Tensor fmod.Tensor_out").check(check_inplace_castable),
    {L::frac, "frac frac_ frac.out"},
    {L::frexp, "frexp.Tensor frexp.Tensor_out"},
    {L::gcd, "gcd gcd_ gcd.out"},
    OpSpec(L::ge, "ge.Tensor ge_.Tensor ge.Tensor_out ge.Scalar ge_.Scalar ge.Scalar_out").check(check_not_complex),
    {L::gelu, "gelu gelu_ gelu.out"},
    {L::gelu_backward, "gelu_backward gelu_backward.grad_input"},
    {L::glu, "glu glu.out"},
    {L::glu_backward, "glu_backward glu_backward.grad_input"},
    OpSpec(L::gt, "gt.Tensor gt_.Tensor gt.Tensor_out gt.Scalar gt_.Scalar gt.Scalar_out").check(check_not_complex),
    {L::hardshrink, "hardshrink hardshrink.out"},
    {L::hardshrink_backward, "hardshrink_backward hardshrink_backward.grad_input"},
    {L::hardsigmoid, "hardsigmoid hardsigmoid_ hardsigmoid.out"},
    {L::hardsigmoid_backward, "hardsigmoid_backward hardsigmoid_backward.grad_input"},
    {L::hardswish, "hardswish hardswish_ hardswish.out"},
    {L::hardswish_backward, "hardswish_backward hardswish_backward.out"},
    OpSpec(L::hardtanh, "hardtanh hardtanh_ hardtanh.out").check(check_real_clamp),
    {L::hardtanh_backward, "hardtanh_backward hardtanh_backward.grad_input"},
    {L::heaviside, "heaviside heaviside_ heaviside.out"},
    {L::hypot, "hypot hypot_ hypot.out"},
    {L::i0, "i0 i0_ i0.out"},
    {L::igamma, "igamma igamma_ igamma.out"},
    {L::igammac, "igammac igammac_ igammac.out"},
    {L::isinf, "isinf"},
    {L::isnan, "isnan"},
    {L::isneginf, "isneginf isneginf.out"},
    {L::isposinf, "isposinf isposinf.out"},
    {L::lcm, "lcm lcm_ lcm.out"},
    OpSpec(L::le, "le.Tensor le_.Tensor le.Tensor_out le.Scalar le_.Scalar le.Scalar_out").check(check_not_complex),
    {L::leaky_relu, "leaky_relu leaky_relu_ leaky_relu.out"},
    {L::leaky_relu_backward, "leaky_relu_backward leaky_relu_backward.grad_input"},
    OpSpec(L::lerp, "lerp.Scalar lerp_.Scalar lerp.Scalar_out lerp.Tensor lerp_.Tensor lerp.Tensor_out")
        .gap_after_checks("lerp", floating_or_complex)
        .check(check_lerp_dtypes)
        .check(check_inplace_castable)
        .floats_in(),
    {L::lgamma, "lgamma lgamma_ lgamma.out"},
    {L::log, "log log_ log.out"},
    {L::log10, "log10 log10_ log10.out"},
    {L::log1p, "log1p log1p_ log1p.out"},
    {L::log2, "log2 log2_ log2.out"},
    {L::log_sigmoid_backward, "log_sigmoid_backward log_sigmoid_backward.grad_input"},
    // CPU's kernel takes floating types only, and refuses bool before the
    // meta kernel's negation could (RuntimeError), as CUDA's does.
    OpSpec(L::log_sigmoid_forward, "log_sigmoid_forward log_sigmoid_forward.output").gap("log_sigmoid_cpu", floating),
    {L::logaddexp, "logaddexp logaddexp.out"},
    {L::logaddexp2, "logaddexp2 logaddexp2.out"},
    {L::logical_and, "logical_and logical_and_ logical_and.out"},
    {L::logical_not, "logical_not logical_not_ logical_not.out"},
    {L::logical_or, "logical_or logical_or_ logical_or.out"},
    {L::logical_xor, "logical_xor logical_xor_ logical_xor.out"},
    {L::logit, "logit logit_ logit.out"},
    {L::logit_backward, "logit_backward logit_backward.grad_input"},
    OpSpec(L::lt, "lt.Tensor lt_.Tensor lt.Tensor_out lt.Scalar lt_.Scalar lt.Scalar_out").check(check_not_complex),
    OpSpec(L::masked_fill, "masked_fill.Scalar masked_fill_.Scalar masked_fill.Tensor masked_fill_.Tensor")
        .normalize(normalize_masked_fill_value)
        .check(check_masked_fill_mask)
        .overlap(WriteOverlap::OneValue),
    OpSpec(L::maximum, "maximum maximum.out").check(check_real_operands),
    OpSpec(L::minimum, "minimum minimum.out").check(check_real_operands),
    {L::mish, "mish mish_ mish.out"},
    {L::mish_backward, "mish_backward"},
    OpSpec(L::mul, "mul.Tensor mul_.Tensor mul.out mul.Scalar mul_.Scalar").check(check_inplace_castable).floats_in(),
    {L::nan_to_num, "nan_to_num nan_to_num_ nan_to_num.out"},
    {L::ne, "ne.Tensor ne_.Tensor ne.Tensor_out ne.Scalar ne_.Scalar ne.Scalar_out"},
    {L::neg, "neg neg_ neg.out"},
    {L::nextafter, "nextafter nextafter_ nextafter.out"},
    {L::polar, "polar polar.out"},
    {L::polygamma, "polygamma polygamma.out"},
    OpSpec(L::pow,
           "pow.Tensor_Tensor pow_.Tensor pow.Tensor_Tensor_out pow.Tensor_Scalar pow_.Scalar pow.Tensor_Scalar_out "
           "pow.Scalar pow.Scalar_out")
        .check(check_inplace_castable),
    {L::prelu_kernel, "_prelu_kernel"},
    {L::prelu_kernel_backward, "_prelu_kernel_backward"},
    {L::reciprocal, "reciprocal reciprocal_ reciprocal.out"},
    OpSpec(L::relu, "relu relu_").check(check_real_clamp).check(check_relu_of_bool),
    OpSpec(L::remainder, "remainder.Tensor remainder_.Tensor remainder.Tensor_out remainder.Scalar_Tensor")
        .check(check_inplace_castable),
    {L::round, "round round_ round.out"},
    {L::round_decimals, "round.decimals round_.decimals round.decimals_out"},
    {L::rrelu_with_noise, "rrelu_with_noise rrelu_with_noise_ rrelu_with_noise.out"},
    {L::rrelu_with_noise_backward, "rrelu_with_noise_backward rrelu_with_noise_backward.out"},
    {L::rsqrt, "rsqrt rsqrt_ rsqrt.out"},
    OpSpec(L::rsub, "rsub.Tensor").check(check_subtraction_operands).floats_in(),
    {L::sigmoid, "sigmoid sigmoid_ sigmoid.out"},
    {L::sigmoid_backward, "sigmoid_backward sigmoid_backward.grad_input"},
    // sgn == sign for real dtypes; only sgn takes complex numbers.
    OpSpec(L::sign, "sign sign_ sign.out").check(check_sign_not_complex),
    {L::sign, "sgn sgn_ sgn.out"},
    {L::signbit, "signbit signbit.out"},
    {L::silu, "silu silu_ silu.out"},
    {L::silu_backward, "silu_backward silu_backward.grad_input"},
    {L::sin, "sin sin_ sin.out"},
    {L::sinc, "sinc sinc_ sinc.out"},
    {L::sinh, "sinh sinh_ sinh.out"},
    {L::softplus, "softplus softplus.out"},
    {L::softplus_backward, "softplus_backward softplus_backward.grad_input"},
    {L::softshrink, "softshrink softshrink.out"},
    {L::softshrink_backward, "softshrink_backward softshrink_backward.grad_input"},
    {L::special_airy_ai, "special_airy_ai special_airy_ai.out"},
    {L::special_bessel_j0, "special_bessel_j0 special_bessel_j0.out"},
    {L::special_bessel_j1, "special_bessel_j1 special_bessel_j1.out"},
    {L::special_bessel_y0, "special_bessel_y0 special_bessel_y0.out"},
    {L::special_bessel_y1, "special_bessel_y1 special_bessel_y1.out"},
    {L::special_chebyshev_polynomial_t,
     "special_chebyshev_polynomial_t special_chebyshev_polynomial_t.out special_chebyshev_polynomial_t.x_scalar "
     "special_chebyshev_polynomial_t.x_scalar_out special_chebyshev_polynomial_t.n_scalar "
     "special_chebyshev_polynomial_t.n_scalar_out"},
    {L::special_chebyshev_polynomial_u,
     "special_chebyshev_polynomial_u special_chebyshev_polynomial_u.out special_chebyshev_polynomial_u.x_scalar "
     "special_chebyshev_polynomial_u.x_scalar_out special_chebyshev_polynomial_u.n_scalar "
     "special_chebyshev_polynomial_u.n_scalar_out"},
    {L::special_chebyshev_polynomial_v,
     "special_chebyshev_polynomial_v special_chebyshev_polynomial_v.out special_chebyshev_polynomial_v.x_scalar "
     "special_chebyshev_polynomial_v.x_scalar_out special_chebyshev_polynomial_v.n_scalar "
     "special_chebyshev_polynomial_v.n_scalar_out"},
    {L::special_chebyshev_polynomial_w,
     "special_chebyshev_polynomial_w special_chebyshev_polynomial_w.out special_chebyshev_polynomial_w.x_scalar "
     "special_chebyshev_polynomial_w.x_scalar_out special_chebyshev_polynomial_w.n_scalar "
     "special_chebyshev_polynomial_w.n_scalar_out"},
    {L::special_entr, "special_entr special_entr.out"},
    {L::special_erfcx, "special_erfcx special_erfcx.out"},
    {L::special_hermite_polynomial_h,
     "special_hermite_polynomial_h special_hermite_polynomial_h.out special_hermite_polynomial_h.x_scalar "
     "special_hermite_polynomial_h.x_scalar_out special_hermite_polynomial_h.n_scalar "
     "special_hermite_polynomial_h.n_scalar_out"},
    {L::special_hermite_polynomial_he,
     "special_hermite_polynomial_he special_hermite_polynomial_he.out special_hermite_polynomial_he.x_scalar "
     "special_hermite_polynomial_he.x_scalar_out special_hermite_polynomial_he.n_scalar "
     "special_hermite_polynomial_he.n_scalar_out"},
    {L::special_i0e, "special_i0e special_i0e.out"},
    {L::special_i1, "special_i1 special_i1.out"},
    {L::special_i1e, "special_i1e special_i1e.out"},
    {L::special_laguerre_polynomial_l,
     "special_laguerre_polynomial_l special_laguerre_polynomial_l.out special_laguerre_polynomial_l.x_scalar "
     "special_laguerre_polynomial_l.x_scalar_out special_laguerre_polynomial_l.n_scalar "
     "special_laguerre_polynomial_l.n_scalar_out"},
    {L::special_legendre_polynomial_p,
     "special_legendre_polynomial_p special_legendre_polynomial_p.out special_legendre_polynomial_p.x_scalar "
     "special_legendre_polynomial_p.x_scalar_out special_legendre_polynomial_p.n_scalar "
     "special_legendre_polynomial_p.n_scalar_out"},
    {L::special_log_ndtr, "special_log_ndtr special_log_ndtr.out"},
    {L::special_modified_bessel_i0, "special_modified_bessel_i0 special_modified_bessel_i0.out"},
    {L::special_modified_bessel_i1, "special_modified_bessel_i1 special_modified_bessel_i1.out"},
    {L::special_modified_bessel_k0, "special_modified_bessel_k0 special_modified_bessel_k0.out"},
    {L::special_modified_bessel_k1, "special_modified_bessel_k1 special_modified_bessel_k1.out"},
    {L::special_ndtri, "special_ndtri special_ndtri.out"},
    {L::special_scaled_modified_bessel_k0, "special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k0.out"},
    {L::special_scaled_modified_bessel_k1, "special_scaled_modified_bessel_k1 special_scaled_modified_bessel_k1.out"},
    {L::special_shifted_chebyshev_polynomial_t,
     "special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_t.out "
     "special_shifted_chebyshev_polynomial_t.x_scalar special_shifted_chebyshev_polynomial_t.x_scalar_out "
     "special_shifted_chebyshev_polynomial_t.n_scalar special_shifted_chebyshev_polynomial_t.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_u,
     "special_shifted_chebyshev_polynomial_u special_shifted_chebyshev_polynomial_u.out "
     "special_shifted_chebyshev_polynomial_u.x_scalar special_shifted_chebyshev_polynomial_u.x_scalar_out "
     "special_shifted_chebyshev_polynomial_u.n_scalar special_shifted_chebyshev_polynomial_u.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_v,
     "special_shifted_chebyshev_polynomial_v special_shifted_chebyshev_polynomial_v.out "
     "special_shifted_chebyshev_polynomial_v.x_scalar special_shifted_chebyshev_polynomial_v.x_scalar_out "
     "special_shifted_chebyshev_polynomial_v.n_scalar special_shifted_chebyshev_polynomial_v.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_w,
     "special_shifted_chebyshev_polynomial_w special_shifted_chebyshev_polynomial_w.out "
     "special_shifted_chebyshev_polynomial_w.x_scalar special_shifted_chebyshev_polynomial_w.x_scalar_out "
     "special_shifted_chebyshev_polynomial_w.n_scalar special_shifted_chebyshev_polynomial_w.n_scalar_out"},
    {L::special_spherical_bessel_j0, "special_spherical_bessel_j0 special_spherical_bessel_j0.out"},
    {L::special_xlog1py,
     "special_xlog1py special_xlog1py.out special_xlog1py.other_scalar special_xlog1py.other_scalar_out "
     "special_xlog1py.self_scalar special_xlog1py.self_scalar_out"},
    {L::special_zeta,
     "special_zeta special_zeta.out special_zeta.other_scalar special_zeta.other_scalar_out special_zeta.self_scalar "
     "special_zeta.self_scalar_out"},
    {L::sqrt, "sqrt sqrt_ sqrt.out"},
    OpSpec(L::sub, "sub.Tensor sub_.Tensor sub.out")
        .check(check_subtraction_operands)
        .check(check_scaled_inplace_castable)
        .floats_in(),
    {L::tan, "tan tan_ tan.out"},
    {L::tanh, "tanh tanh_ tanh.out"},
    {L::tanh_backward, "tanh_backward tanh_backward.grad_input"},
    {L::threshold, "threshold threshold_ threshold.out"},
    {L::threshold_backward, "threshold_backward threshold_backward.grad_input"},
    {L::trunc, "trunc trunc_ trunc.out"},
    OpSpec(L::where, "where.self where.self_out").normalize(normalize_where_condition).check(check_where_condition),
    {L::xlogy,
     "xlogy.Tensor xlogy_.Tensor xlogy.OutTensor xlogy.Scalar_Other xlogy_.Scalar_Other xlogy.OutScalar_Other "
     "xlogy.Scalar_Self xlogy.OutScalar_Self"},
    OpSpec(L::zero, "zero_").overlap(WriteOverlap::OneValue),
};

}  // namespace

std::span<const OpSpec> pointwise_rows() { return kRows; }

}  // namespace torch_tpu::device
