// Elementwise ops: arithmetic, comparisons, logic, unary math, activations
// and their backward formulas, where/masked_fill/clamp, fill.
// Operands are broadcast and converted to the result type PyTorch's meta
// kernel chose (ctx.out_types), which is PyTorch's type promotion.
#include <cmath>

#include "lower/ops.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Argument i (tensor or Scalar) as a value of `type` (broadcast, converted).
Value operand(LowerContext& ctx, size_t i, const TensorType& type) {
  const Arg& a = ctx.args.at(i);
  if (a.kind == Arg::Kind::Scalar) return ctx.b.broadcast_to(ctx.scalar(a.scalar, type.dtype), type.shape);
  if (a.kind == Arg::Kind::Double) return ctx.b.splat(a.d, type);
  if (a.kind == Arg::Kind::Int) return ctx.b.broadcast_to(ctx.b.constant_int(a.i, type.dtype), type.shape);
  return coerce(ctx.b, ctx.tensor(i), type);
}

// The type binary math runs in: the result type, except for ops whose result
// is bool (comparisons), which compare in the promoted input type.
TensorType out0(LowerContext& ctx) { return ctx.out_types.at(0); }

ElementType promoted_input_type(LowerContext& ctx, size_t a, size_t b) {
  // Mirrors PyTorch's promotion for comparisons: tensor dtypes dominate
  // scalars of the same category.
  auto category = [](ElementType t) { return hlo::is_float(t) ? 2 : (t == ElementType::Pred ? 0 : 1); };
  auto arg_type = [&](size_t i, bool& is_tensor) -> ElementType {
    const Arg& x = ctx.args.at(i);
    is_tensor = x.kind == Arg::Kind::Tensor;
    if (is_tensor) return ctx.tensor(i).dtype();
    if (x.kind == Arg::Kind::Scalar) {
      if (x.scalar.kind == ScalarArg::Kind::Float) return ElementType::F32;
      if (x.scalar.kind == ScalarArg::Kind::Bool) return ElementType::Pred;
    }
    return ElementType::S64;
  };
  bool ta, tb;
  ElementType ea = arg_type(a, ta), eb = arg_type(b, tb);
  if (ea == eb) return ea;
  if (ta && tb) {
    const bool za = ctx.tensor(a).rank() == 0, zb = ctx.tensor(b).rank() == 0;
    if (za == zb) {
      if (category(ea) != category(eb)) return category(ea) > category(eb) ? ea : eb;
      if (hlo::is_float(ea) && hlo::is_float(eb)) {
        if (ea == ElementType::F64 || eb == ElementType::F64) return ElementType::F64;
        if (ea == ElementType::F32 || eb == ElementType::F32) return ElementType::F32;
        return ElementType::F32;  // bf16 with f16
      }
      return hlo::byte_size(ea) >= hlo::byte_size(eb) ? ea : eb;
    }
    // A 0-dim tensor only wins with a higher category.
    ElementType dim_t = za ? eb : ea, zero_t = za ? ea : eb;
    return category(zero_t) > category(dim_t) ? zero_t : dim_t;
  }
  ElementType tensor_t = ta ? ea : eb, other = ta ? eb : ea;
  if (!ta && !tb) return ea;
  if (category(other) > category(tensor_t)) return other == ElementType::F32 ? ElementType::F32 : ElementType::S64;
  return tensor_t;
}

Value alpha_scaled(LowerContext& ctx, Value v, size_t alpha_index) {
  if (!ctx.has(alpha_index)) return v;
  const ScalarArg& s = ctx.args[alpha_index].scalar;
  if (s.as_double() == 1.0) return v;
  return ctx.b.binary("multiply", v, ctx.b.broadcast_to(ctx.scalar(s, v.dtype()), v.shape()));
}

std::vector<Value> binary_math(LowerContext& ctx, const char* op) {
  TensorType t = out0(ctx);
  return {ctx.b.binary(op, operand(ctx, 0, t), operand(ctx, 1, t))};
}

std::vector<Value> compare_op(LowerContext& ctx, CompareDirection dir) {
  TensorType out = out0(ctx);
  TensorType t{promoted_input_type(ctx, 0, 1), out.shape};
  Value r = ctx.b.compare(operand(ctx, 0, t), operand(ctx, 1, t), dir);
  return {r};
}

// Unary math in the result's (floating) type.
Value unary_in(LowerContext& ctx, const char* op) {
  TensorType t = out0(ctx);
  return ctx.b.unary(op, coerce(ctx.b, ctx.tensor(0), t));
}

Value scalar_like(LowerContext& ctx, double v, const Value& like) { return ctx.b.splat(v, like.type); }

Value logistic(Builder& b, const Value& x) { return b.unary("logistic", x); }

// 0.5 * x * (1 + erf(x / sqrt(2)))  or the tanh approximation.
Value gelu_value(Builder& b, const Value& x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x3 = b.binary("multiply", b.binary("multiply", x, x), x);
    Value inner = b.binary("multiply", b.splat(k, x.type), b.binary("add", x, b.binary("multiply", b.splat(0.044715, x.type), x3)));
    Value t = b.unary("tanh", inner);
    return b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("add", b.splat(1, x.type), t));
  }
  Value e = b.op("erf", {b.binary("multiply", x, b.splat(M_SQRT1_2, x.type))}, x.type);
  return b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("add", b.splat(1, x.type), e));
}

}  // namespace

// ---- arithmetic ------------------------------------------------------------
std::vector<Value> add(LowerContext& ctx) {
  TensorType t = out0(ctx);
  Value a = operand(ctx, 0, t);
  Value o = alpha_scaled(ctx, operand(ctx, 1, t), 2);
  if (t.dtype == ElementType::Pred) return {ctx.b.binary("or", a, o)};
  return {ctx.b.binary("add", a, o)};
}

std::vector<Value> sub(LowerContext& ctx) {
  TensorType t = out0(ctx);
  return {ctx.b.binary("subtract", operand(ctx, 0, t), alpha_scaled(ctx, operand(ctx, 1, t), 2))};
}

std::vector<Value> rsub(LowerContext& ctx) {
  TensorType t = out0(ctx);
  return {ctx.b.binary("subtract", operand(ctx, 1, t), alpha_scaled(ctx, operand(ctx, 0, t), 2))};
}

std::vector<Value> mul(LowerContext& ctx) {
  TensorType t = out0(ctx);
  if (t.dtype == ElementType::Pred) return binary_math(ctx, "and");
  return binary_math(ctx, "multiply");
}

std::vector<Value> div(LowerContext& ctx) {
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  std::string mode = ctx.has(2) && ctx.args[2].kind == Arg::Kind::String ? ctx.args[2].s : "";
  Value a = operand(ctx, 0, t), d = operand(ctx, 1, t);
  if (hlo::is_float(t.dtype)) {
    Value q = b.binary("divide", a, d);
    if (mode == "trunc") return {b.unary("round_nearest_afz", b.binary("subtract", q, b.binary("remainder", q, scalar_like(ctx, 1, q))))};
    if (mode == "floor") return {b.unary("floor", q)};
    return {q};
  }
  // Integer division (rounding_mode given; true division has a float result).
  Value q = b.binary("divide", a, d);  // truncates toward zero
  if (mode == "floor") {
    // floor: subtract one where the remainder is non-zero and signs differ.
    Value r = b.binary("remainder", a, d);
    Value zero = scalar_like(ctx, 0, r);
    Value rem_nz = b.compare(r, zero, CompareDirection::NE);
    Value signs_differ = b.compare(b.compare(r, zero, CompareDirection::LT), b.compare(d, zero, CompareDirection::LT), CompareDirection::NE);
    Value adjust = b.binary("and", rem_nz, signs_differ);
    q = b.select(adjust, b.binary("subtract", q, scalar_like(ctx, 1, q)), q);
  }
  return {q};
}

std::vector<Value> remainder(LowerContext& ctx) {
  // Python-style modulo: the result takes the divisor's sign.
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  Value a = operand(ctx, 0, t), d = operand(ctx, 1, t);
  Value r = b.binary("remainder", a, d);
  Value zero = scalar_like(ctx, 0, r);
  Value fix = b.binary("and", b.compare(r, zero, CompareDirection::NE),
                       b.compare(b.compare(r, zero, CompareDirection::LT), b.compare(d, zero, CompareDirection::LT), CompareDirection::NE));
  return {b.select(fix, b.binary("add", r, d), r)};
}

std::vector<Value> fmod(LowerContext& ctx) { return binary_math(ctx, "remainder"); }
std::vector<Value> maximum(LowerContext& ctx) { return binary_math(ctx, "maximum"); }
std::vector<Value> minimum(LowerContext& ctx) { return binary_math(ctx, "minimum"); }
std::vector<Value> atan2(LowerContext& ctx) { return binary_math(ctx, "atan2"); }
std::vector<Value> bitwise_and(LowerContext& ctx) { return binary_math(ctx, "and"); }
std::vector<Value> bitwise_or(LowerContext& ctx) { return binary_math(ctx, "or"); }
std::vector<Value> bitwise_xor(LowerContext& ctx) { return binary_math(ctx, "xor"); }

std::vector<Value> pow(LowerContext& ctx) {
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  // pow.Tensor_Scalar with small integer exponents: exact multiplies, as CPU.
  const Arg& e = ctx.args.at(1);
  if (e.kind == Arg::Kind::Scalar) {
    double p = e.scalar.as_double();
    Value x = operand(ctx, 0, t);
    if (p == 2.0) return {b.binary("multiply", x, x)};
    if (p == 1.0) return {x};
    if (p == 0.5 && hlo::is_float(t.dtype)) return {b.unary("sqrt", x)};
    if (p == -1.0 && hlo::is_float(t.dtype)) return {b.binary("divide", scalar_like(ctx, 1, x), x)};
  }
  return {b.binary("power", operand(ctx, 0, t), operand(ctx, 1, t))};
}

// ---- comparisons and logic ----------------------------------------------------
std::vector<Value> eq(LowerContext& ctx) { return compare_op(ctx, CompareDirection::EQ); }
std::vector<Value> ne(LowerContext& ctx) { return compare_op(ctx, CompareDirection::NE); }
std::vector<Value> lt(LowerContext& ctx) { return compare_op(ctx, CompareDirection::LT); }
std::vector<Value> le(LowerContext& ctx) { return compare_op(ctx, CompareDirection::LE); }
std::vector<Value> gt(LowerContext& ctx) { return compare_op(ctx, CompareDirection::GT); }
std::vector<Value> ge(LowerContext& ctx) { return compare_op(ctx, CompareDirection::GE); }

std::vector<Value> logical_not(LowerContext& ctx) {
  Value x = ctx.b.convert(ctx.tensor(0), ElementType::Pred);
  return {ctx.b.unary("not", x)};
}

static std::vector<Value> logical_binary(LowerContext& ctx, const char* op) {
  Value a = ctx.b.convert(ctx.tensor(0), ElementType::Pred);
  Value c = ctx.b.convert(ctx.tensor(1), ElementType::Pred);
  const Shape& shape = ctx.out_types.at(0).shape;
  return {ctx.b.binary(op, ctx.b.broadcast_to(a, shape), ctx.b.broadcast_to(c, shape))};
}
std::vector<Value> logical_and(LowerContext& ctx) { return logical_binary(ctx, "and"); }
std::vector<Value> logical_or(LowerContext& ctx) { return logical_binary(ctx, "or"); }
std::vector<Value> logical_xor(LowerContext& ctx) { return logical_binary(ctx, "xor"); }

std::vector<Value> bitwise_not(LowerContext& ctx) { return {ctx.b.unary("not", ctx.tensor(0))}; }

std::vector<Value> where(LowerContext& ctx) {  // where.self(condition, self, other)
  TensorType t = out0(ctx);
  Value c = ctx.b.broadcast_to(ctx.b.convert(ctx.tensor(0), ElementType::Pred), t.shape);
  return {ctx.b.select(c, operand(ctx, 1, t), operand(ctx, 2, t))};
}

std::vector<Value> masked_fill(LowerContext& ctx) {  // (self, mask, value Scalar|Tensor)
  TensorType t = out0(ctx);
  Value m = ctx.b.broadcast_to(ctx.b.convert(ctx.tensor(1), ElementType::Pred), t.shape);
  return {ctx.b.select(m, operand(ctx, 2, t), operand(ctx, 0, t))};
}

std::vector<Value> clamp(LowerContext& ctx) {  // clamp(self, min?, max?) Scalar or Tensor
  TensorType t = out0(ctx);
  Value x = operand(ctx, 0, t);
  Builder& b = ctx.b;
  if (ctx.has(1)) x = b.binary("maximum", x, operand(ctx, 1, t));
  if (ctx.has(2)) x = b.binary("minimum", x, operand(ctx, 2, t));
  return {x};
}

std::vector<Value> clamp_min(LowerContext& ctx) { return {ctx.b.binary("maximum", operand(ctx, 0, out0(ctx)), operand(ctx, 1, out0(ctx)))}; }
std::vector<Value> clamp_max(LowerContext& ctx) { return {ctx.b.binary("minimum", operand(ctx, 0, out0(ctx)), operand(ctx, 1, out0(ctx)))}; }

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
TORCH_TPU_UNARY(abs, "abs")
TORCH_TPU_UNARY(neg, "negate")
TORCH_TPU_UNARY(floor, "floor")
TORCH_TPU_UNARY(ceil, "ceil")
TORCH_TPU_UNARY(round, "round_nearest_even")
TORCH_TPU_UNARY(erf, "erf")
#undef TORCH_TPU_UNARY

std::vector<Value> sign(LowerContext& ctx) {
  TensorType t = out0(ctx);
  if (t.dtype == ElementType::Pred) return {ctx.tensor(0)};
  return {ctx.b.unary("sign", coerce(ctx.b, ctx.tensor(0), t))};
}

std::vector<Value> trunc(LowerContext& ctx) {
  Value x = unary_in(ctx, "abs");
  Value f = ctx.b.unary("floor", x);
  Value s = ctx.b.unary("sign", coerce(ctx.b, ctx.tensor(0), out0(ctx)));
  return {ctx.b.binary("multiply", s, f)};
}

std::vector<Value> reciprocal(LowerContext& ctx) {
  Value x = coerce(ctx.b, ctx.tensor(0), out0(ctx));
  return {ctx.b.binary("divide", scalar_like(ctx, 1, x), x)};
}

std::vector<Value> log2(LowerContext& ctx) {
  Value l = unary_in(ctx, "log");
  return {ctx.b.binary("multiply", l, scalar_like(ctx, 1.0 / std::log(2.0), l))};
}

std::vector<Value> isnan(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (!hlo::is_float(x.dtype())) return {ctx.b.splat(0, {ElementType::Pred, x.shape()})};
  return {ctx.b.compare(x, x, CompareDirection::NE)};
}

std::vector<Value> isinf(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  if (!hlo::is_float(x.dtype())) return {ctx.b.splat(0, {ElementType::Pred, x.shape()})};
  Value a = ctx.b.unary("abs", x);
  return {ctx.b.compare(a, ctx.b.splat(INFINITY, a.type), CompareDirection::EQ)};
}

// ---- activations and their backward ---------------------------------------------
std::vector<Value> relu(LowerContext& ctx) {
  Value x = coerce(ctx.b, ctx.tensor(0), out0(ctx));
  return {ctx.b.binary("maximum", x, scalar_like(ctx, 0, x))};
}

std::vector<Value> threshold_backward(LowerContext& ctx) {  // (grad_output, self, threshold)
  TensorType t = out0(ctx);
  Value g = coerce(ctx.b, ctx.tensor(0), t);
  Value x = coerce(ctx.b, ctx.tensor(1), t);
  Value th = ctx.b.broadcast_to(ctx.scalar_arg(2, t.dtype), t.shape);
  return {ctx.b.select(ctx.b.compare(x, th, CompareDirection::LE), scalar_like(ctx, 0, g), g)};
}

std::vector<Value> gelu(LowerContext& ctx) {  // (self, approximate)
  bool tanh_approx = ctx.has(1) && ctx.args[1].s == "tanh";
  ElementType acc = accumulation_type(out0(ctx).dtype);
  Value x = ctx.b.convert(ctx.tensor(0), acc);
  return {ctx.b.convert(gelu_value(ctx.b, x, tanh_approx), out0(ctx).dtype)};
}

std::vector<Value> gelu_backward(LowerContext& ctx) {  // (grad_output, self, approximate)
  Builder& b = ctx.b;
  ElementType acc = accumulation_type(out0(ctx).dtype);
  Value g = b.convert(ctx.tensor(0), acc), x = b.convert(ctx.tensor(1), acc);
  bool tanh_approx = ctx.has(2) && ctx.args[2].s == "tanh";
  Value d;
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    Value x2 = b.binary("multiply", x, x);
    Value inner = b.binary("multiply", b.splat(k, x.type), b.binary("add", x, b.binary("multiply", b.splat(0.044715, x.type), b.binary("multiply", x2, x))));
    Value t = b.unary("tanh", inner);
    Value dinner = b.binary("multiply", b.splat(k, x.type), b.binary("add", b.splat(1, x.type), b.binary("multiply", b.splat(3 * 0.044715, x.type), x2)));
    Value sech2 = b.binary("subtract", b.splat(1, x.type), b.binary("multiply", t, t));
    d = b.binary("add", b.binary("multiply", b.splat(0.5, x.type), b.binary("add", b.splat(1, x.type), t)),
                 b.binary("multiply", b.binary("multiply", b.splat(0.5, x.type), x), b.binary("multiply", sech2, dinner)));
  } else {
    Value cdf = b.binary("multiply", b.splat(0.5, x.type),
                         b.binary("add", b.splat(1, x.type), b.op("erf", {b.binary("multiply", x, b.splat(M_SQRT1_2, x.type))}, x.type)));
    Value pdf = b.binary("multiply", b.splat(0.5 * M_2_SQRTPI * M_SQRT1_2, x.type),
                         b.unary("exponential", b.binary("multiply", b.splat(-0.5, x.type), b.binary("multiply", x, x))));
    d = b.binary("add", cdf, b.binary("multiply", x, pdf));
  }
  return {b.convert(b.binary("multiply", g, d), out0(ctx).dtype)};
}

std::vector<Value> silu(LowerContext& ctx) {
  Value x = coerce(ctx.b, ctx.tensor(0), out0(ctx));
  return {ctx.b.binary("multiply", x, logistic(ctx.b, x))};
}

std::vector<Value> silu_backward(LowerContext& ctx) {  // (grad_output, self)
  Builder& b = ctx.b;
  TensorType t = out0(ctx);
  Value g = coerce(b, ctx.tensor(0), t), x = coerce(b, ctx.tensor(1), t);
  Value s = logistic(b, x);
  Value one = scalar_like(ctx, 1, x);
  Value d = b.binary("multiply", s, b.binary("add", one, b.binary("multiply", x, b.binary("subtract", one, s))));
  return {b.binary("multiply", g, d)};
}

std::vector<Value> sigmoid_backward(LowerContext& ctx) {  // (grad_output, output)
  Builder& b = ctx.b;
  TensorType t = out0(ctx);
  Value g = coerce(b, ctx.tensor(0), t), y = coerce(b, ctx.tensor(1), t);
  return {b.binary("multiply", g, b.binary("multiply", y, b.binary("subtract", scalar_like(ctx, 1, y), y)))};
}

std::vector<Value> tanh_backward(LowerContext& ctx) {  // (grad_output, output)
  Builder& b = ctx.b;
  TensorType t = out0(ctx);
  Value g = coerce(b, ctx.tensor(0), t), y = coerce(b, ctx.tensor(1), t);
  return {b.binary("multiply", g, b.binary("subtract", scalar_like(ctx, 1, y), b.binary("multiply", y, y)))};
}

// ---- ternary -------------------------------------------------------------------
std::vector<Value> addcmul(LowerContext& ctx) {  // (self, tensor1, tensor2, value)
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  Value prod = b.binary("multiply", operand(ctx, 1, t), operand(ctx, 2, t));
  return {b.binary("add", operand(ctx, 0, t), alpha_scaled(ctx, prod, 3))};
}

std::vector<Value> addcdiv(LowerContext& ctx) {  // (self, tensor1, tensor2, value)
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  Value q = b.binary("divide", operand(ctx, 1, t), operand(ctx, 2, t));
  return {b.binary("add", operand(ctx, 0, t), alpha_scaled(ctx, q, 3))};
}

std::vector<Value> lerp(LowerContext& ctx) {  // (self, end, weight Scalar|Tensor)
  TensorType t = out0(ctx);
  Builder& b = ctx.b;
  Value s = operand(ctx, 0, t), e = operand(ctx, 1, t), w = operand(ctx, 2, t);
  return {b.binary("add", s, b.binary("multiply", w, b.binary("subtract", e, s)))};
}

// ---- fill ------------------------------------------------------------------------
std::vector<Value> fill(LowerContext& ctx) {  // fill_.Scalar / fill_.Tensor (self, value)
  return {operand(ctx, 1, out0(ctx))};
}

std::vector<Value> zero(LowerContext& ctx) { return {zeros(ctx.b, out0(ctx))}; }

}  // namespace torch_tpu::lower
