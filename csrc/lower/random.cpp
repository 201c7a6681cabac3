// Random ops: uniform_, normal_, bernoulli, random_, native_dropout and its
// backward. Bits come from stablehlo.rng_bit_generator (THREE_FRY) keyed by
// the device generator's (seed, counter) pair, so a seed replays a sequence.
// Value transforms follow PyTorch's (ATen/core/TransformationHelper.h and
// DistributionTemplates.h); the bits themselves differ from CPU's mt19937.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "lower/ops.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

Value u64_splat(Builder& b, uint64_t v, const Shape& shape) {
  return b.broadcast_to(b.constant_int(static_cast<int64_t>(v), ElementType::U64), shape);
}

// splitmix64 on a ui64 tensor: a bijective mixer.
Value splitmix64(Builder& b, Value x) {
  const Shape& s = x.shape();
  auto xor_shift = [&](const Value& z, uint64_t k) {
    return b.binary("xor", z, b.binary("shift_right_logical", z, u64_splat(b, k, s)));
  };
  Value z = b.binary("add", x, u64_splat(b, 0x9e3779b97f4a7c15ULL, s));
  z = b.binary("multiply", xor_shift(z, 30), u64_splat(b, 0xbf58476d1ce4e5b9ULL, s));
  z = b.binary("multiply", xor_shift(z, 27), u64_splat(b, 0x94d049bb133111ebULL, s));
  return xor_shift(z, 31);
}

// XLA's THREE_FRY uses state[0] as the key and state[1] as the first block
// counter, so states (seed, c) and (seed, c + 1) would give overlapping,
// shifted streams. Hashing the counter into the key gives each op its own
// key, i.e. an independent stream.
Value op_state(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value state = ctx.rng_state();
  Value seed = b.slice(state, {0}, {1}, {1});
  Value counter = b.slice(state, {1}, {2}, {1});
  Value key = splitmix64(b, b.binary("xor", seed, splitmix64(b, counter)));
  return b.concatenate({key, u64_splat(b, 0, {1})}, 0);
}

// Uniform random bits (U32 or U64) of `shape`.
Value random_bits(LowerContext& ctx, const Shape& shape, ElementType bits) {
  Builder& b = ctx.b;
  TensorType type{bits, shape};
  const int64_t n = type.numel();
  if (n == 0) return b.splat(0, type);
  Value state = op_state(ctx);
  auto r = b.op_multi("rng_bit_generator", {state}, {state.type, {bits, {n}}},
                      "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return b.reshape(r[1], shape);
}

// Uniform in [0, 1) as f32 (24 random bits, as PyTorch's uniform_real for
// float) or f64 (53 bits).
Value uniform01(LowerContext& ctx, const Shape& shape, ElementType acc) {
  Builder& b = ctx.b;
  const bool wide = acc == ElementType::F64;
  const ElementType bits_t = wide ? ElementType::U64 : ElementType::U32;
  const int keep = wide ? 53 : 24;
  Value bits = random_bits(ctx, shape, bits_t);
  Value top = b.binary("shift_right_logical", bits, b.broadcast_to(b.constant_int(wide ? 64 - keep : 32 - keep, bits_t), shape));
  Value f = b.convert(top, acc);
  return b.binary("multiply", f, b.splat(std::ldexp(1.0, -keep), {acc, shape}));
}

// f64 for f64 results, f32 otherwise (bf16/f16 are drawn in f32 then rounded).
ElementType draw_type(ElementType t) { return t == ElementType::F64 ? ElementType::F64 : ElementType::F32; }

Value scalar_value(LowerContext& ctx, double v, ElementType dtype, const Shape& shape) {
  ScalarArg s;
  s.kind = ScalarArg::Kind::Float;
  s.f = v;
  return ctx.b.broadcast_to(ctx.scalar(s, dtype), shape);
}

std::string number(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void require_float(ElementType t, const char* what) {
  if (!hlo::is_float(t)) throw std::invalid_argument(std::string("\"") + what + "\" not implemented for this dtype");
}

void require_probability(double p, const char* op) {
  if (!(p >= 0 && p <= 1)) throw std::invalid_argument(std::string(op) + " expects p to be in [0, 1], but got p=" + number(p));
}

// `range` values spread from `base`: PyTorch's uniform_int_from_to,
// (bits % range) + base with uint64 wrap-around; range 0 means 2^64. Draws 64
// bits when `wide` (PyTorch: random64() when range >= 2^32), else 32.
Value random_from_range(LowerContext& ctx, const TensorType& out, uint64_t range, int64_t base, bool wide) {
  Builder& b = ctx.b;
  Value bits = b.convert(random_bits(ctx, out.shape, wide ? ElementType::U64 : ElementType::U32), ElementType::U64);
  if (range != 0) bits = b.binary("remainder", bits, u64_splat(b, range, out.shape));
  Value v = b.bitcast_convert(bits, {ElementType::S64, out.shape});
  if (base != 0) v = b.binary("add", v, b.broadcast_to(b.constant_int(base, ElementType::S64), out.shape));
  return b.convert(v, out.dtype);
}

// Significand bits of a float type (std::numeric_limits<T>::digits).
int float_digits(ElementType t) {
  switch (t) {
    case ElementType::F64: return 53;
    case ElementType::F32: return 24;
    case ElementType::F16: return 11;
    default: return 8;  // bf16
  }
}

// Largest value of an integer type (bool: 1).
uint64_t integer_max(ElementType t) {
  if (t == ElementType::Pred) return 1;
  const int bits = static_cast<int>(hlo::byte_size(t)) * 8;
  if (hlo::is_unsigned(t)) return bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
  return (uint64_t{1} << (bits - 1)) - 1;
}

int64_t integer_min(ElementType t) {
  if (t == ElementType::Pred || hlo::is_unsigned(t)) return 0;
  return -static_cast<int64_t>(integer_max(t)) - 1;
}

// PyTorch's check_from_to_in_range for integral results.
void check_in_range(int64_t from, int64_t to_inc, ElementType t) {
  if (hlo::is_float(t)) return;
  const int64_t lo = integer_min(t);
  const uint64_t hi = integer_max(t);
  if (from < lo || (from >= 0 && static_cast<uint64_t>(from) > hi))
    throw std::invalid_argument("random_ expects 'from' to be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                "], but got from=" + std::to_string(from));
  if (to_inc < lo || (to_inc >= 0 && static_cast<uint64_t>(to_inc) > hi))
    throw std::invalid_argument("random_ expects 'to' to be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                "], but got to=" + std::to_string(to_inc));
}

// random_(): floats in [0, 2^digits], integers in [0, max], bool in {0, 1}
// (PyTorch's transformation::uniform_int); 64 bits for double and int64.
Value random_default(LowerContext& ctx, const TensorType& out) {
  const bool wide = out.dtype == ElementType::F64 || out.dtype == ElementType::S64 || out.dtype == ElementType::U64;
  uint64_t range;
  if (hlo::is_float(out.dtype)) {
    range = (uint64_t{1} << float_digits(out.dtype)) + 1;
  } else {
    const uint64_t max = integer_max(out.dtype);
    range = max == std::numeric_limits<uint64_t>::max() ? 0 : max + 1;
  }
  return random_from_range(ctx, out, range, 0, wide);
}

// random_(from, to): [from, to); to = None: [from, dtype max] (2^digits for
// floats); from = int64 min with to = None: the full 64-bit range.
Value random_from_to(LowerContext& ctx, const TensorType& out, int64_t from, std::optional<int64_t> to) {
  uint64_t range;
  if (to) {
    if (from >= *to)
      throw std::invalid_argument("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(from) +
                                  " >= to=" + std::to_string(*to));
    check_in_range(from, *to - 1, out.dtype);
    range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
  } else if (from != std::numeric_limits<int64_t>::lowest()) {
    int64_t to_inc = hlo::is_float(out.dtype) ? (int64_t{1} << std::min(float_digits(out.dtype), 62))
                                              : static_cast<int64_t>(std::min<uint64_t>(integer_max(out.dtype), INT64_MAX));
    if (from >= to_inc && hlo::is_float(out.dtype))
      throw std::invalid_argument("random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to dtype");
    check_in_range(from, to_inc, out.dtype);
    range = static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1;
  } else {
    return random_from_range(ctx, out, 0, 0, true);
  }
  return random_from_range(ctx, out, range, from, range >= (uint64_t{1} << 32));
}

}  // namespace

// uniform_(self, from, to): from + u * (to - from) in f32 (f64 for double).
// A value that rounds up to `to` becomes `from`, as CUDA's uniform_ does, so
// the result stays in [from, to).
std::vector<Value> uniform(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  require_float(out.dtype, "check_uniform_bounds");
  const double from = ctx.double_arg(1, 0.0), to = ctx.double_arg(2, 1.0);
  if (from > to)
    throw std::invalid_argument("uniform_ expects to return a [from, to) range, but found from=" + number(from) +
                                " > to=" + number(to));
  Builder& b = ctx.b;
  const ElementType acc = draw_type(out.dtype);
  Value lo = scalar_value(ctx, from, acc, out.shape), hi = scalar_value(ctx, to, acc, out.shape);
  Value u = uniform01(ctx, out.shape, acc);
  Value v = b.convert(b.binary("add", b.binary("multiply", u, b.binary("subtract", hi, lo)), lo), out.dtype);
  Value lo_t = b.convert(lo, out.dtype);
  return {b.select(b.compare(v, b.convert(hi, out.dtype), CompareDirection::GE), lo_t, v)};
}

// normal_(self, mean, std): Box-Muller, mean + std * sqrt(-2 ln u1) cos(2 pi u2)
// with u1 in (0, 1] so the log is finite.
std::vector<Value> normal(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  require_float(out.dtype, "normal_kernel_cpu");
  const double mean = ctx.double_arg(1, 0.0), stdev = ctx.double_arg(2, 1.0);
  if (!(stdev >= 0)) throw std::invalid_argument("normal expects std >= 0.0, but found std " + number(stdev));
  Builder& b = ctx.b;
  const ElementType acc = draw_type(out.dtype);
  const int64_t n = out.numel();
  if (n == 0) return {b.splat(0, out)};
  const TensorType flat{acc, {n}};
  Value u = uniform01(ctx, {2 * n}, acc);
  Value u1 = b.binary("subtract", b.splat(1, flat), b.slice(u, {0}, {n}, {1}));
  Value u2 = b.slice(u, {n}, {2 * n}, {1});
  Value radius = b.unary("sqrt", b.binary("multiply", b.splat(-2, flat), b.unary("log", u1)));
  Value z = b.binary("multiply", radius, b.unary("cosine", b.binary("multiply", b.splat(2 * M_PI, flat), u2)));
  Value v = b.binary("add", b.binary("multiply", z, scalar_value(ctx, stdev, acc, {n})), scalar_value(ctx, mean, acc, {n}));
  return {b.reshape(b.convert(v, out.dtype), out.shape)};
}

// bernoulli(p) / bernoulli_(self, p float) / bernoulli_(self, p Tensor):
// 1 where u < p, in self's dtype.
std::vector<Value> bernoulli(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const Arg* p_arg = ctx.args.size() > 1 ? &ctx.args[1] : nullptr;
  Value p;
  ElementType acc = ElementType::F32;
  if (p_arg && p_arg->kind == Arg::Kind::Double) {
    require_probability(p_arg->d, "bernoulli_");
    p = scalar_value(ctx, p_arg->d, acc, out.shape);
  } else {
    const Value& pt = (p_arg && p_arg->kind == Arg::Kind::Tensor) ? ctx.tensor(1) : ctx.tensor(0);
    acc = draw_type(pt.dtype());
    p = coerce(b, pt, {acc, out.shape});
  }
  Value u = uniform01(ctx, out.shape, acc);
  return {b.convert(b.compare(u, p, CompareDirection::LT), out.dtype)};
}

// random_(), random_(from, to?) and random_(to).
std::vector<Value> random(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  switch (ctx.args.size()) {
    case 2: return {random_default(ctx, out)};                      // random_(self, *, generator)
    case 3: return {random_from_to(ctx, out, 0, ctx.int_arg(1))};   // random_.to(self, to, *, generator)
    default: {                                                      // random_.from(self, from, to?, *, generator)
      std::optional<int64_t> to;
      if (ctx.has(2)) to = ctx.int_arg(2);
      return {random_from_to(ctx, out, ctx.int_arg(1), to)};
    }
  }
}

// native_dropout(input, p, train?): train (or None, as PyTorch) keeps each
// element with probability 1 - p and scales kept ones by 1 / (1 - p)
// (scale 0 when p == 1); eval returns input and an all-true mask.
std::vector<Value> native_dropout(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0), mask_t = ctx.out_types.at(1);
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(0);
  const double p = ctx.double_arg(1);
  const bool train = ctx.has(2) ? ctx.bool_arg(2) : true;
  if (out.numel() == 0) return {coerce(b, input, out), b.splat(0, mask_t)};
  if (!train) return {coerce(b, input, out), b.splat(1, mask_t)};
  require_probability(p, "bernoulli_");
  const double keep = 1.0 - p, scale = keep == 0 ? 0.0 : 1.0 / keep;
  const ElementType acc = accumulation_type(out.dtype);
  const TensorType acc_t{acc, out.shape};
  Value mask = b.compare(uniform01(ctx, out.shape, draw_type(acc)), scalar_value(ctx, keep, draw_type(acc), out.shape),
                         CompareDirection::LT);
  // input * mask * scale: multiplying (not selecting) keeps inf * 0 = nan as PyTorch.
  Value kept = b.binary("multiply", coerce(b, input, acc_t), b.convert(mask, acc));
  Value v = b.binary("multiply", kept, scalar_value(ctx, scale, acc, out.shape));
  return {b.convert(v, out.dtype), mask};
}

// native_dropout_backward(grad, mask, scale) = grad * mask * scale.
std::vector<Value> native_dropout_backward(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const TensorType acc_t{accumulation_type(out.dtype), out.shape};
  Value g = b.binary("multiply", coerce(b, ctx.tensor(0), acc_t), coerce(b, ctx.tensor(1), acc_t));
  Value v = b.binary("multiply", g, scalar_value(ctx, ctx.double_arg(2), acc_t.dtype, out.shape));
  return {b.convert(v, out.dtype)};
}

}  // namespace torch_tpu::lower
