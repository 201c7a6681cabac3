// Elementwise ops: arithmetic, comparisons, logic, unary math, activations
// and their backward formulas, where/masked_fill/clamp, fill.
// Operands are broadcast and converted to the result type PyTorch's meta
// kernel chose (ctx.out_types), which is PyTorch's type promotion.
#include "lower/elementwise.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "lower/common/result_types.h"
#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Integer inputs of ops with float results (true division, exp ...) compute in
// the default float dtype, as TensorIterator's promote_integer_inputs_to_float.
ElementType float_compute_type(ElementType t) { return hlo::is_float(t) || hlo::is_complex(t) ? t : ElementType::F32; }

// Argument i (tensor or Scalar) as a value of `type` (broadcast, converted).
// A Scalar in a tensor operand's place is cast like the 0-d tensor CPU wraps
// it into (x + 1e300 is inf in float32).
Value operand(LowerContext& ctx, size_t i, const TensorType& type) {
  const Arg& a = ctx.args.at(i);
  if (a.kind == Arg::Kind::Scalar) return ctx.b.broadcast_to(ctx.cast_scalar(a.scalar, type.dtype), type.shape);
  if (a.kind == Arg::Kind::Double) return ctx.b.splat(a.d, type);
  if (a.kind == Arg::Kind::Int) return ctx.b.broadcast_to(ctx.b.constant_int(a.i, type.dtype), type.shape);
  return coerce(ctx.b, ctx.tensor(i), type);
}

// Argument i cast to the op's common dtype, then widened to `compute`: what
// TensorIterator does with a Python number or a 0-d tensor of another dtype
// (it casts every input to the common dtype; the kernel then computes in
// opmath). A float16 x + 0.1 adds 0.1 rounded to float16, as CPU and CUDA
// do. mul and true div read the number unrounded (their kernels take
// original_scalar_value), so they keep operand().
Value operand_in_common(LowerContext& ctx, size_t i, ElementType common, const TensorType& compute) {
  return ctx.b.convert(operand(ctx, i, {common, compute.shape}), compute.dtype);
}

// Argument i as a value of `type`, a Scalar converted as CPU's kernel
// converts it (`scalar.to<scalar_t>()`), so it must fit: clamp's bounds,
// masked_fill's value, lerp's weight.
Value converted_operand(LowerContext& ctx, size_t i, const TensorType& type) {
  const Arg& a = ctx.args.at(i);
  if (a.kind == Arg::Kind::Scalar) return ctx.b.broadcast_to(ctx.scalar(a.scalar, type.dtype), type.shape);
  return operand(ctx, i, type);
}

// The value `v` (compute dtype) as the op's result type.
std::vector<Value> result(LowerContext& ctx, const Value& v) { return {ctx.b.convert(v, out_type(ctx).dtype)}; }

// Ops whose TensorIterator checks all dtypes equal (abs, neg, sign, floor ...):
// an out= tensor of another dtype raises.
void check_out_dtype(LowerContext& ctx, const Value& x) {
  const ElementType out = out_type(ctx).dtype;
  if (out != x.dtype()) {
    throw std::invalid_argument(std::string("Found dtype ") + torch_dtype_name(out) + " but expected " +
                                torch_dtype_name(x.dtype()));
  }
}

bool is_nan_capable(ElementType t) { return hlo::is_float(t); }

// PyTorch's maximum/minimum/clamp propagate NaN; XLA's max/min need not.
Value nan_propagating(Builder& b, const char* op, const Value& x, const Value& y) {
  Value m = b.binary(op, x, y);
  if (!is_nan_capable(x.dtype())) return m;
  return b.select(is_nan(b, x), x, b.select(is_nan(b, y), y, m));
}

// trunc for floats: StableHLO has floor and ceil, no trunc.
Value trunc_value(Builder& b, const Value& x) {
  Value neg = b.compare(x, b.splat(0, x.type), CompareDirection::LT);
  return b.select(neg, b.unary("ceil", x), b.unary("floor", x));
}

// `v` times the Scalar argument alpha_index, which CPU converts to
// `alpha_dtype`: add's and sub's alpha to the result type (a float16 alpha
// rounds to float16, and must fit it), addcmul's and addcdiv's value to
// their opmath type.
Value alpha_scaled(LowerContext& ctx, Value v, size_t alpha_index, ElementType alpha_dtype) {
  if (!ctx.has(alpha_index)) return v;
  const ScalarArg& s = ctx.args[alpha_index].scalar;
  if (s.as_double() == 1.0) return v;
  Builder& b = ctx.b;
  Value alpha = b.broadcast_to(b.convert(ctx.scalar(s, alpha_dtype), v.dtype()), v.shape());
  return b.binary(v.dtype() == ElementType::Pred ? "and" : "multiply", v, alpha);
}

// Binary math in the inputs' common dtype, cast to the result type.
std::vector<Value> binary_math(LowerContext& ctx, const char* op) {
  TensorType t = out_shape_in(ctx, accumulation_type(result_type(ctx, {0, 1})));
  return result(ctx, ctx.b.binary(op, operand(ctx, 0, t), operand(ctx, 1, t)));
}

std::vector<Value> compare_op(LowerContext& ctx, CompareDirection dir) {
  TensorType t = out_shape_in(ctx, result_type(ctx, {0, 1}));
  return result(ctx, ctx.b.compare(operand(ctx, 0, t), operand(ctx, 1, t), dir));
}

// Unary float math: integer inputs compute in float32.
Value unary_in(LowerContext& ctx, const char* op) {
  TensorType t = out_shape_in(ctx, accumulation_type(float_compute_type(ctx.tensor(0).dtype())));
  return ctx.b.convert(ctx.b.unary(op, coerce(ctx.b, ctx.tensor(0), t)), out_type(ctx).dtype);
}

// A float-only activation's input in its compute dtype (ints raise, as CPU).
Value float_input(LowerContext& ctx, size_t i, const char* op) {
  const Value& x = ctx.tensor(i);
  if (!hlo::is_float(x.dtype())) not_implemented_for(op, x.dtype());
  return x;
}

Value logistic(Builder& b, const Value& x) { return b.unary("logistic", x); }

Value erf_value(Builder& b, const Value& x) { return b.chlo("erf", {x}, x.type); }

// 0.5 * x * (1 + erf(x / sqrt(2)))  or the tanh approximation.
Value gelu_value(Builder& b, const Value& x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x3 = b.binary("multiply", b.binary("multiply", x, x), x);
    Value inner = b.binary("multiply", b.splat(k, x.type),
                           b.binary("add", x, b.binary("multiply", b.splat(0.044715, x.type), x3)));
    Value t = b.unary("tanh", inner);
    return b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("add", b.splat(1, x.type), t));
  }
  Value e = erf_value(b, b.binary("multiply", x, b.splat(M_SQRT1_2, x.type)));
  return b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("add", b.splat(1, x.type), e));
}

// a - b * floor(a / b) with PyTorch's sign rule: the result takes the divisor's sign.
Value python_remainder(Builder& b, const Value& a, const Value& d) {
  Value r = b.binary("remainder", a, d);
  Value zero = b.splat(0, r.type);
  Value fix = b.binary("and", b.compare(r, zero, CompareDirection::NE),
                       b.compare(b.compare(r, zero, CompareDirection::LT), b.compare(d, zero, CompareDirection::LT),
                                 CompareDirection::NE));
  return b.select(fix, b.binary("add", r, d), r);
}

// c10::div_floor_floating: floor division through fmod so that 1 // 0.1 is 9
// (as Python), not floor(1 / 0.1) = 10; division by zero gives IEEE a / b.
Value div_floor_float(Builder& b, const Value& a, const Value& d) {
  Value zero = b.splat(0, a.type), one = b.splat(1, a.type);
  Value mod = b.binary("remainder", a, d);
  Value div = b.binary("divide", b.binary("subtract", a, mod), d);
  Value adjust = b.binary("and", b.compare(mod, zero, CompareDirection::NE),
                          b.compare(b.compare(d, zero, CompareDirection::LT),
                                    b.compare(mod, zero, CompareDirection::LT), CompareDirection::NE));
  div = b.select(adjust, b.binary("subtract", div, one), div);
  Value floordiv = b.unary("floor", div);
  Value up = b.compare(b.binary("subtract", div, floordiv), b.splat(0.5, a.type), CompareDirection::GT);
  floordiv = b.select(up, b.binary("add", floordiv, one), floordiv);
  // A zero quotient keeps the sign of a / b.
  Value q = b.binary("divide", a, d);
  Value signed_zero = b.select(b.compare(q, zero, CompareDirection::LT), b.splat(-0.0, a.type), zero);
  signed_zero = b.select(is_nan(b, q), q, signed_zero);
  Value r = b.select(b.compare(div, zero, CompareDirection::NE), floordiv, signed_zero);
  return b.select(b.compare(d, zero, CompareDirection::EQ), q, r);
}

}  // namespace

// ---- arithmetic ------------------------------------------------------------
std::vector<Value> add(LowerContext& ctx) {
  const ElementType common = result_type(ctx, {0, 1});
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  Value a = operand_in_common(ctx, 0, common, t);
  Value o = alpha_scaled(ctx, operand_in_common(ctx, 1, common, t), 2, out_type(ctx).dtype);
  return result(ctx, ctx.b.binary(t.dtype == ElementType::Pred ? "or" : "add", a, o));
}

// Bool operands never reach sub and rsub: the rows' check raises what the
// installed torch's sub_check raises (csrc/device/argument_checks.cpp).
std::vector<Value> sub(LowerContext& ctx) {
  const ElementType common = result_type(ctx, {0, 1});
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  Value scaled = alpha_scaled(ctx, operand_in_common(ctx, 1, common, t), 2, out_type(ctx).dtype);
  return result(ctx, ctx.b.binary("subtract", operand_in_common(ctx, 0, common, t), scaled));
}

std::vector<Value> rsub(LowerContext& ctx) {
  const ElementType common = result_type(ctx, {0, 1});
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  Value scaled = alpha_scaled(ctx, operand_in_common(ctx, 0, common, t), 2, out_type(ctx).dtype);
  return result(ctx, ctx.b.binary("subtract", operand_in_common(ctx, 1, common, t), scaled));
}

std::vector<Value> mul(LowerContext& ctx) {
  TensorType t = out_shape_in(ctx, accumulation_type(result_type(ctx, {0, 1})));
  return result(
      ctx, ctx.b.binary(t.dtype == ElementType::Pred ? "and" : "multiply", operand(ctx, 0, t), operand(ctx, 1, t)));
}

std::vector<Value> div(LowerContext& ctx) {
  Builder& b = ctx.b;
  std::string mode = ctx.has(2) && ctx.args[2].kind == Arg::Kind::String ? ctx.args[2].s : "";
  ElementType common = result_type(ctx, {0, 1});
  if (mode.empty()) common = float_compute_type(common);  // true division
  if (common == ElementType::Pred) not_implemented_for(mode == "floor" ? "div_floor" : "div_trunc", common);
  // CPU's div_trunc kernel rounds a bf16 quotient to bf16 before truncating,
  // except with a one-element divisor (a Python number), which it keeps in
  // opmath; the other modes compute in opmath.
  const Arg& divisor = ctx.args.at(1);
  const bool scalar_divisor = divisor.kind != Arg::Kind::Tensor || !divisor.tensor || divisor.tensor->type.numel() == 1;
  TensorType t = out_shape_in(ctx, mode == "trunc" && !scalar_divisor ? common : accumulation_type(common));
  // CPU and CUDA round no complex quotient (XLA's remainder of complex
  // numbers crashes its compiler).
  if (!mode.empty() && hlo::is_complex(t.dtype))
    not_implemented_for(mode == "floor" ? "div_floor_cpu" : "div_trunc_cpu", t.dtype);
  Value a = operand(ctx, 0, t), d = operand(ctx, 1, t);
  if (hlo::is_float(t.dtype)) {
    if (mode == "floor") return result(ctx, div_floor_float(b, a, d));
    Value q = b.binary("divide", a, d);
    return result(ctx, mode == "trunc" ? trunc_value(b, q) : q);
  }
  // Integer division truncates toward zero; floor steps down where the
  // remainder is non-zero and its sign differs from the divisor's.
  Value q = b.binary("divide", a, d);
  if (mode == "floor") {
    Value r = b.binary("remainder", a, d);
    Value zero = ctx.b.splat(0, r.type);
    Value rem_nz = b.compare(r, zero, CompareDirection::NE);
    Value signs_differ = b.compare(b.compare(r, zero, CompareDirection::LT), b.compare(d, zero, CompareDirection::LT),
                                   CompareDirection::NE);
    q = b.select(b.binary("and", rem_nz, signs_differ), b.binary("subtract", q, ctx.b.splat(1, q.type)), q);
  }
  return result(ctx, q);
}

std::vector<Value> remainder(LowerContext& ctx) {
  const ElementType common = result_type(ctx, {0, 1});
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  // No kernel for bool or complex on CPU and CUDA (XLA's remainder of
  // complex numbers crashes its compiler).
  if (t.dtype == ElementType::Pred || hlo::is_complex(t.dtype)) not_implemented_for("remainder_cpu", t.dtype);
  return result(ctx,
                python_remainder(ctx.b, operand_in_common(ctx, 0, common, t), operand_in_common(ctx, 1, common, t)));
}

std::vector<Value> fmod(LowerContext& ctx) {
  const ElementType common = result_type(ctx, {0, 1});
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  if (t.dtype == ElementType::Pred || hlo::is_complex(t.dtype)) not_implemented_for("fmod_cpu", t.dtype);
  return result(ctx,
                ctx.b.binary("remainder", operand_in_common(ctx, 0, common, t), operand_in_common(ctx, 1, common, t)));
}

// maximum/minimum, and clamp_min/clamp_max (`bound`: argument 1 converted
// as clamp converts its bounds): NaN propagates, in the common dtype.
static std::vector<Value> extremum(LowerContext& ctx, const char* op, bool bound) {
  TensorType t = out_shape_in(ctx, result_type(ctx, {0, 1}));
  Value other = bound ? converted_operand(ctx, 1, t) : operand(ctx, 1, t);
  return result(ctx, nan_propagating(ctx.b, op, operand(ctx, 0, t), other));
}

std::vector<Value> maximum(LowerContext& ctx) { return extremum(ctx, "maximum", false); }
std::vector<Value> minimum(LowerContext& ctx) { return extremum(ctx, "minimum", false); }

std::vector<Value> atan2(LowerContext& ctx) {
  const ElementType common = float_compute_type(result_type(ctx, {0, 1}));
  TensorType t = out_shape_in(ctx, accumulation_type(common));
  return result(ctx, ctx.b.binary("atan2", operand_in_common(ctx, 0, common, t), operand_in_common(ctx, 1, common, t)));
}

static std::vector<Value> bitwise_binary(LowerContext& ctx, const char* op, const char* name) {
  ElementType common = result_type(ctx, {0, 1});
  if (hlo::is_float(common)) not_implemented_for(name, common);
  return binary_math(ctx, op);
}
std::vector<Value> bitwise_and(LowerContext& ctx) { return bitwise_binary(ctx, "and", "bitwise_and"); }
std::vector<Value> bitwise_or(LowerContext& ctx) { return bitwise_binary(ctx, "or", "bitwise_or"); }
std::vector<Value> bitwise_xor(LowerContext& ctx) { return bitwise_binary(ctx, "xor", "bitwise_xor"); }

std::vector<Value> pow(LowerContext& ctx) {
  TensorType t = out_shape_in(ctx, accumulation_type(result_type(ctx, {0, 1})));
  Builder& b = ctx.b;
  const Arg& e = ctx.args.at(1);
  if (e.kind == Arg::Kind::Scalar) {
    double p = e.scalar.as_double();
    // at::native::pow_out: exponent 0 fills ones, 1 copies, for every dtype.
    if (p == 0.0) return result(ctx, b.splat(1, t));
    Value x = operand(ctx, 0, t);
    if (p == 1.0) return result(ctx, x);
    if (t.dtype == ElementType::Pred) not_implemented_for("pow", t.dtype);
    if (!hlo::is_float(t.dtype) && e.scalar.kind != ScalarArg::Kind::Float && p < 0) {
      throw std::invalid_argument("Integers to negative integer powers are not allowed.");
    }
    // CPU's pow kernel converts the exponent to the tensor's type, double
    // for float32 (pow_tensor_scalar_kernel), so it must fit that.
    const ElementType out = out_type(ctx).dtype;
    check_scalar_fits(e.scalar, out == ElementType::F32 ? ElementType::F64 : out);
    // Small exponents as exact multiplies / sqrt, as PyTorch's pow kernel does.
    if (p == 2.0) return result(ctx, b.binary("multiply", x, x));
    if (p == 3.0) return result(ctx, b.binary("multiply", b.binary("multiply", x, x), x));
    if (p == 0.5 && hlo::is_float(t.dtype)) return result(ctx, b.unary("sqrt", x));
    if (p == -0.5 && hlo::is_float(t.dtype)) return result(ctx, b.unary("rsqrt", x));
    if (p == -1.0 && hlo::is_float(t.dtype)) return result(ctx, b.binary("divide", ctx.b.splat(1, x.type), x));
    if (p == -2.0 && hlo::is_float(t.dtype))
      return result(ctx, b.binary("divide", ctx.b.splat(1, x.type), b.binary("multiply", x, x)));
  }
  if (t.dtype == ElementType::Pred) not_implemented_for("pow", t.dtype);
  const ElementType common = result_type(ctx, {0, 1});
  return result(ctx, b.binary("power", operand_in_common(ctx, 0, common, t), operand_in_common(ctx, 1, common, t)));
}

// ---- comparisons and logic ----------------------------------------------------
std::vector<Value> eq(LowerContext& ctx) { return compare_op(ctx, CompareDirection::EQ); }
std::vector<Value> ne(LowerContext& ctx) { return compare_op(ctx, CompareDirection::NE); }
std::vector<Value> lt(LowerContext& ctx) { return compare_op(ctx, CompareDirection::LT); }
std::vector<Value> le(LowerContext& ctx) { return compare_op(ctx, CompareDirection::LE); }
std::vector<Value> gt(LowerContext& ctx) { return compare_op(ctx, CompareDirection::GT); }
std::vector<Value> ge(LowerContext& ctx) { return compare_op(ctx, CompareDirection::GE); }

// Truth of any dtype: x != 0 (NaN is true), as a cast to bool.
static Value truth(Builder& b, const Value& x) { return b.convert(x, ElementType::Pred); }

std::vector<Value> logical_not(LowerContext& ctx) {
  return result(ctx, ctx.b.unary("not", truth(ctx.b, ctx.tensor(0))));
}

static std::vector<Value> logical_binary(LowerContext& ctx, const char* op) {
  const Shape& shape = out_type(ctx).shape;
  Value a = ctx.b.broadcast_to(truth(ctx.b, ctx.tensor(0)), shape);
  Value c = ctx.b.broadcast_to(truth(ctx.b, ctx.tensor(1)), shape);
  return result(ctx, ctx.b.binary(op, a, c));
}
std::vector<Value> logical_and(LowerContext& ctx) { return logical_binary(ctx, "and"); }
std::vector<Value> logical_or(LowerContext& ctx) { return logical_binary(ctx, "or"); }
std::vector<Value> logical_xor(LowerContext& ctx) { return logical_binary(ctx, "xor"); }

std::vector<Value> bitwise_not(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (hlo::is_float(x.dtype())) not_implemented_for("bitwise_not", x.dtype());
  check_out_dtype(ctx, x);
  return result(ctx, ctx.b.unary("not", x));
}

std::vector<Value> where(LowerContext& ctx) {  // where.self(condition, self, other)
  TensorType t = out_shape_in(ctx, result_type(ctx, {1, 2}));
  Value c = ctx.b.broadcast_to(ctx.b.convert(ctx.tensor(0), ElementType::Pred), t.shape);
  return result(ctx, ctx.b.select(c, operand(ctx, 1, t), operand(ctx, 2, t)));
}

std::vector<Value> masked_fill(LowerContext& ctx) {  // (self, mask, value Scalar|Tensor): value cast to self's dtype
  TensorType t = out_type(ctx);
  Value m = ctx.b.broadcast_to(ctx.b.convert(ctx.tensor(1), ElementType::Pred), t.shape);
  return {ctx.b.select(m, converted_operand(ctx, 2, t), operand(ctx, 0, t))};
}

// clamp(self, min?, max?): min(max(x, lo), hi), so min > max gives max; NaN in
// any operand propagates.
std::vector<Value> clamp(LowerContext& ctx) {
  TensorType t = out_shape_in(ctx, result_type(ctx, {0, 1, 2}));
  Value x = operand(ctx, 0, t);
  if (ctx.has(1)) x = nan_propagating(ctx.b, "maximum", x, converted_operand(ctx, 1, t));
  if (ctx.has(2)) x = nan_propagating(ctx.b, "minimum", x, converted_operand(ctx, 2, t));
  return result(ctx, x);
}

std::vector<Value> clamp_min(LowerContext& ctx) { return extremum(ctx, "maximum", true); }
std::vector<Value> clamp_max(LowerContext& ctx) { return extremum(ctx, "minimum", true); }

// ---- unary math -----------------------------------------------------------------
#define TORCH_TPU_UNARY(fn, hlo_name) \
  std::vector<Value> fn(LowerContext& ctx) { return {unary_in(ctx, hlo_name)}; }
TORCH_TPU_UNARY(exp, "exponential")
TORCH_TPU_UNARY(expm1, "exponential_minus_one")
TORCH_TPU_UNARY(log, "log")
TORCH_TPU_UNARY(log1p, "log_plus_one")
TORCH_TPU_UNARY(sqrt, "sqrt")
TORCH_TPU_UNARY(rsqrt, "rsqrt")
TORCH_TPU_UNARY(sin, "sine")
TORCH_TPU_UNARY(cos, "cosine")
TORCH_TPU_UNARY(tan, "tan")
TORCH_TPU_UNARY(tanh, "tanh")
TORCH_TPU_UNARY(sigmoid, "logistic")
#undef TORCH_TPU_UNARY

std::vector<Value> erf(LowerContext& ctx) {
  TensorType t = out_shape_in(ctx, accumulation_type(float_compute_type(ctx.tensor(0).dtype())));
  return result(ctx, erf_value(ctx.b, coerce(ctx.b, ctx.tensor(0), t)));
}

// Ops on the input's own dtype: bool has no kernel (CPU raises).
static Value same_dtype_input(LowerContext& ctx, const char* op) {
  const Value& x = ctx.tensor(0);
  if (x.dtype() == ElementType::Pred) not_implemented_for(op, x.dtype());
  check_out_dtype(ctx, x);
  return x;
}

std::vector<Value> abs(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (hlo::is_complex(x.dtype())) {  // |a + bi| is real: complex64 -> float32, complex128 -> float64
    return {coerce(ctx.b, ctx.b.unary("abs", x), out_type(ctx))};
  }
  // XLA's abs takes signed types only; an unsigned value is its own magnitude.
  if (hlo::is_unsigned(x.dtype())) return result(ctx, same_dtype_input(ctx, "abs"));
  return result(ctx, ctx.b.unary("abs", same_dtype_input(ctx, "abs")));
}
std::vector<Value> neg(LowerContext& ctx) { return result(ctx, ctx.b.unary("negate", same_dtype_input(ctx, "neg"))); }

// Rounding: integers are already integral (PyTorch returns a copy).
static std::vector<Value> rounding(LowerContext& ctx, const char* op, Value (*fn)(Builder&, const Value&)) {
  Value x = same_dtype_input(ctx, op);
  return result(ctx, hlo::is_float(x.dtype()) ? fn(ctx.b, x) : x);
}
std::vector<Value> floor(LowerContext& ctx) {
  return rounding(ctx, "floor", [](Builder& b, const Value& x) { return b.unary("floor", x); });
}
std::vector<Value> ceil(LowerContext& ctx) {
  return rounding(ctx, "ceil", [](Builder& b, const Value& x) { return b.unary("ceil", x); });
}
std::vector<Value> round(LowerContext& ctx) {  // half to even, as std::nearbyint
  return rounding(ctx, "round", [](Builder& b, const Value& x) { return b.unary("round_nearest_even", x); });
}
std::vector<Value> trunc(LowerContext& ctx) { return rounding(ctx, "trunc", trunc_value); }

std::vector<Value> sign(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  check_out_dtype(ctx, x);
  if (x.dtype() == ElementType::Pred) return result(ctx, x);
  if (hlo::is_unsigned(x.dtype())) {  // XLA's sign takes signed types only
    return result(ctx, ctx.b.convert(ctx.b.compare(x, ctx.b.splat(0, x.type), CompareDirection::NE), x.dtype()));
  }
  Value s = ctx.b.unary("sign", x);
  // PyTorch's sign is (0 < x) - (x < 0): 0 for NaN.
  if (hlo::is_float(x.dtype())) s = ctx.b.select(is_nan(ctx.b, x), ctx.b.splat(0, x.type), s);
  return result(ctx, s);
}

std::vector<Value> reciprocal(LowerContext& ctx) {
  Value x =
      coerce(ctx.b, ctx.tensor(0), out_shape_in(ctx, accumulation_type(float_compute_type(ctx.tensor(0).dtype()))));
  return result(ctx, ctx.b.binary("divide", ctx.b.splat(1, x.type), x));
}

std::vector<Value> log2(LowerContext& ctx) {
  Value x =
      coerce(ctx.b, ctx.tensor(0), out_shape_in(ctx, accumulation_type(float_compute_type(ctx.tensor(0).dtype()))));
  Value l = ctx.b.unary("log", x);
  if (hlo::is_complex(l.dtype())) {  // c10::complex / T divides each part: log2(0) is -inf + 0j
    auto by_ln2 = [&](const Value& v) { return ctx.b.binary("divide", v, ctx.b.splat(std::log(2.0), v.type)); };
    Value re = by_ln2(ctx.b.real(l));
    return result(ctx, ctx.b.complex(re, by_ln2(ctx.b.imag(l))));
  }
  return result(ctx, ctx.b.binary("divide", l, ctx.b.splat(std::log(2.0), l.type)));
}

std::vector<Value> isnan(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (!hlo::is_float(x.dtype())) return {ctx.b.splat(0, {ElementType::Pred, x.shape()})};
  return {is_nan(ctx.b, x)};
}

std::vector<Value> isinf(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (!hlo::is_float(x.dtype())) return {ctx.b.splat(0, {ElementType::Pred, x.shape()})};
  Value a = ctx.b.unary("abs", x);
  return {ctx.b.compare(a, ctx.b.splat(INFINITY, a.type), CompareDirection::EQ)};
}

static std::vector<Value> is_signed_inf(LowerContext& ctx, double inf) {
  const Value& x = ctx.tensor(0);
  if (!hlo::is_float(x.dtype())) return {ctx.b.splat(0, {ElementType::Pred, x.shape()})};
  return {ctx.b.compare(x, ctx.b.splat(inf, x.type), CompareDirection::EQ)};
}
std::vector<Value> isneginf(LowerContext& ctx) { return is_signed_inf(ctx, -INFINITY); }
std::vector<Value> isposinf(LowerContext& ctx) { return is_signed_inf(ctx, INFINITY); }

// floor_divide(self, other) is div(self, other, rounding_mode="floor").
std::vector<Value> floor_divide(LowerContext& ctx) {
  Arg mode;
  mode.kind = Arg::Kind::String;
  mode.s = "floor";
  ctx.args.resize(2);  // drops an out= argument, which lowerings never read
  ctx.args.push_back(mode);
  return div(ctx);
}

// ---- activations and their backward ---------------------------------------------
// clamp_min(x, 0): NaN stays NaN. Bool never reaches it: its row's check
// raises what the installed torch's CPU relu raises.
std::vector<Value> relu(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  return result(ctx, nan_propagating(ctx.b, "maximum", x, ctx.b.splat(0, x.type)));
}

std::vector<Value> threshold_backward(LowerContext& ctx) {  // (grad_output, self, threshold)
  TensorType t = out_type(ctx);
  Value g = coerce(ctx.b, ctx.tensor(0), t);
  Value x = coerce(ctx.b, ctx.tensor(1), t);
  Value th = ctx.b.broadcast_to(ctx.cast_scalar(ctx.args.at(2).scalar, t.dtype), t.shape);
  return {ctx.b.select(ctx.b.compare(x, th, CompareDirection::LE), ctx.b.splat(0, g.type), g)};
}

std::vector<Value> gelu(LowerContext& ctx) {  // (self, approximate)
  bool tanh_approx = ctx.has(1) && ctx.args[1].s == "tanh";
  ElementType acc = accumulation_type(out_type(ctx).dtype);
  Value x = ctx.b.convert(float_input(ctx, 0, "GeluKernelImpl"), acc);
  return {ctx.b.convert(gelu_value(ctx.b, x, tanh_approx), out_type(ctx).dtype)};
}

std::vector<Value> gelu_backward(LowerContext& ctx) {  // (grad_output, self, approximate)
  Builder& b = ctx.b;
  ElementType acc = accumulation_type(out_type(ctx).dtype);
  Value g = b.convert(ctx.tensor(0), acc), x = b.convert(ctx.tensor(1), acc);
  bool tanh_approx = ctx.has(2) && ctx.args[2].s == "tanh";
  Value d;
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x2 = b.binary("multiply", x, x);
    Value inner =
        b.binary("multiply", b.splat(k, x.type),
                 b.binary("add", x, b.binary("multiply", b.splat(0.044715, x.type), b.binary("multiply", x2, x))));
    Value t = b.unary("tanh", inner);
    Value dinner =
        b.binary("multiply", b.splat(k, x.type),
                 b.binary("add", b.splat(1, x.type), b.binary("multiply", b.splat(3 * 0.044715, x.type), x2)));
    Value sech2 = b.binary("subtract", b.splat(1, x.type), b.binary("multiply", t, t));
    d = b.binary(
        "add", b.binary("multiply", b.splat(0.5, x.type), b.binary("add", b.splat(1, x.type), t)),
        b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("multiply", sech2, dinner)));
  } else {
    Value cdf = b.binary(
        "multiply", b.splat(0.5, x.type),
        b.binary("add", b.splat(1, x.type), erf_value(b, b.binary("multiply", x, b.splat(M_SQRT1_2, x.type)))));
    Value pdf =
        b.binary("multiply", b.splat(0.5 * M_2_SQRTPI * M_SQRT1_2, x.type),
                 b.unary("exponential", b.binary("multiply", b.splat(-0.5, x.type), b.binary("multiply", x, x))));
    d = b.binary("add", cdf, b.binary("multiply", x, pdf));
  }
  return {b.convert(b.binary("multiply", g, d), out_type(ctx).dtype)};
}

// x * sigmoid(x); complex x as CPU's complex kernel computes it,
// x / (1 + exp(-x)).
std::vector<Value> silu(LowerContext& ctx) {
  Builder& b = ctx.b;
  if (hlo::is_complex(ctx.tensor(0).dtype())) {
    Value x = coerce(b, ctx.tensor(0), out_type(ctx));
    return {
        b.binary("divide", x, b.binary("add", ctx.b.splat(1, x.type), b.unary("exponential", b.unary("negate", x))))};
  }
  Value x = coerce(ctx.b, float_input(ctx, 0, "silu"), out_type(ctx));
  return {ctx.b.binary("multiply", x, logistic(ctx.b, x))};
}

std::vector<Value> silu_backward(LowerContext& ctx) {  // (grad_output, self)
  Builder& b = ctx.b;
  TensorType t = out_type(ctx);
  Value g = coerce(b, ctx.tensor(0), t), x = coerce(b, ctx.tensor(1), t);
  Value s = logistic(b, x);
  Value one = ctx.b.splat(1, x.type);
  Value d = b.binary("multiply", s, b.binary("add", one, b.binary("multiply", x, b.binary("subtract", one, s))));
  return {b.binary("multiply", g, d)};
}

std::vector<Value> sigmoid_backward(LowerContext& ctx) {  // (grad_output, output)
  Builder& b = ctx.b;
  TensorType t = out_type(ctx);
  Value g = coerce(b, ctx.tensor(0), t), y = coerce(b, ctx.tensor(1), t);
  return {b.binary("multiply", g, b.binary("multiply", y, b.binary("subtract", ctx.b.splat(1, y.type), y)))};
}

std::vector<Value> tanh_backward(LowerContext& ctx) {  // (grad_output, output)
  Builder& b = ctx.b;
  TensorType t = out_type(ctx);
  Value g = coerce(b, ctx.tensor(0), t), y = coerce(b, ctx.tensor(1), t);
  return {b.binary("multiply", g, b.binary("subtract", ctx.b.splat(1, y.type), b.binary("multiply", y, y)))};
}

// ---- ternary -------------------------------------------------------------------
// self + value * tensor1 (* or /) tensor2, evaluated left to right as CPU's
// and CUDA's kernels do: value * tensor1 first. Another order rounds
// differently (a float32 result one ulp off in 7-40% of elements).
std::vector<Value> addcmul(LowerContext& ctx) {  // (self, tensor1, tensor2, value)
  TensorType t = out_shape_in(ctx, accumulation_type(result_type(ctx, {0, 1, 2})));
  Builder& b = ctx.b;
  Value prod = b.binary("multiply", alpha_scaled(ctx, operand(ctx, 1, t), 3, t.dtype), operand(ctx, 2, t));
  return result(ctx, b.binary("add", operand(ctx, 0, t), prod));
}

std::vector<Value> addcdiv(LowerContext& ctx) {  // (self, tensor1, tensor2, value)
  TensorType t = out_shape_in(ctx, accumulation_type(result_type(ctx, {0, 1, 2})));
  Builder& b = ctx.b;
  Value q = b.binary("divide", alpha_scaled(ctx, operand(ctx, 1, t), 3, t.dtype), operand(ctx, 2, t));
  return result(ctx, b.binary("add", operand(ctx, 0, t), q));
}

// at::native::lerp: |weight| < 0.5 ? self + weight * (end - self)
//                                  : end - (end - self) * (1 - weight),
// exact at both ends; bf16 computes in float32 (opmath).
std::vector<Value> lerp(LowerContext& ctx) {  // (self, end, weight Scalar|Tensor)
  TensorType t = accumulation_out_type(ctx);
  Builder& b = ctx.b;
  Value s = operand(ctx, 0, t), e = operand(ctx, 1, t), w = converted_operand(ctx, 2, t);
  Value diff = b.binary("subtract", e, s);
  Value magnitude = b.unary("abs", w);  // real for complex w
  Value small = b.compare(magnitude, ctx.b.splat(0.5, magnitude.type), CompareDirection::LT);
  Value from_start = b.binary("add", s, b.binary("multiply", w, diff));
  Value from_end = b.binary("subtract", e, b.binary("multiply", diff, b.binary("subtract", ctx.b.splat(1, w.type), w)));
  return result(ctx, b.select(small, from_start, from_end));
}

// ---- fill ------------------------------------------------------------------------
std::vector<Value> fill(LowerContext& ctx) {  // fill_.Scalar / fill_.Tensor (self, value)
  const TensorType t = out_type(ctx);
  const Arg& v = ctx.args.at(1);
  if (v.kind == Arg::Kind::Scalar) return {ctx.b.broadcast_to(ctx.fill_scalar(v.scalar, t), t.shape)};
  return {operand(ctx, 1, t)};
}

std::vector<Value> zero(LowerContext& ctx) { return {zeros(ctx.b, out_type(ctx))}; }

}  // namespace torch_tpu::lower
