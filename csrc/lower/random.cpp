// Random ops: uniform_, normal_, bernoulli, random_, native_dropout and its
// backward; cauchy_, exponential_, geometric_, log_normal_, normal with
// tensor mean/std, multinomial, randperm.
// Bits come from stablehlo.rng_bit_generator (THREE_FRY) keyed by
// the device generator's (seed, counter) pair, so a seed replays a sequence.
// Value transforms follow PyTorch's (ATen/core/TransformationHelper.h and
// DistributionTemplates.h); the bits themselves differ from CPU's mt19937.
#include "lower/random.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "lower/common/sampling.h"
#include "lower/common/scalars.h"
#include "lower/reduce.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

std::string number(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// The random kernels' dtype dispatch for float-only samplers.
void require_float_draw(ElementType t, const char* what) {
  if (!hlo::is_float(t)) throw std::invalid_argument(std::string("\"") + what + "\" not implemented for this dtype");
}

void require_probability(double p, const char* op) {
  if (!(p >= 0 && p <= 1))
    throw std::invalid_argument(std::string(op) + " expects p to be in [0, 1], but got p=" + number(p));
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
    case ElementType::F64:
      return 53;
    case ElementType::F32:
      return 24;
    case ElementType::F16:
      return 11;
    default:
      return 8;  // bf16
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
    int64_t to_inc = hlo::is_float(out.dtype)
                         ? (int64_t{1} << std::min(float_digits(out.dtype), 62))
                         : static_cast<int64_t>(std::min<uint64_t>(integer_max(out.dtype), INT64_MAX));
    if (from >= to_inc && hlo::is_float(out.dtype))
      throw std::invalid_argument(
          "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to dtype");
    check_in_range(from, to_inc, out.dtype);
    range = static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1;
  } else {
    return random_from_range(ctx, out, 0, 0, true);
  }
  return random_from_range(ctx, out, range, from, range >= (uint64_t{1} << 32));
}

// A complex tensor's draw: PyTorch's normal_ and uniform_ draw into
// view_as_real(self), so each part is a real draw of the part type, taken
// here as one draw of shape [..., 2] split into (real, imaginary).
Value complex_draw(LowerContext& ctx, const TensorType& out, const std::function<Value(const TensorType&)>& real_draw) {
  Builder& b = ctx.b;
  Shape pair_shape = out.shape;
  pair_shape.push_back(2);
  Value pairs = real_draw({hlo::complex_part_type(out.dtype), pair_shape});
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  auto part = [&](int64_t k) {
    Shape start(rank + 1, 0), limit = pair_shape, strides(rank + 1, 1);
    start[rank] = k;
    limit[rank] = k + 1;
    return b.reshape(b.slice(pairs, start, limit, strides), out.shape);
  };
  Value re = part(0);
  return b.complex(re, part(1));
}

Value uniform_draw(LowerContext& ctx, const TensorType& out, double from, double to) {
  Builder& b = ctx.b;
  const ElementType acc = draw_type(out.dtype);
  Value lo = host_number(ctx, from, acc, out.shape), hi = host_number(ctx, to, acc, out.shape);
  Value u = uniform01(ctx, out.shape, acc);
  Value v = b.convert(b.binary("add", b.binary("multiply", u, b.binary("subtract", hi, lo)), lo), out.dtype);
  Value lo_t = b.convert(lo, out.dtype);
  return b.select(b.compare(v, b.convert(hi, out.dtype), CompareDirection::GE), lo_t, v);
}

Value normal_draw(LowerContext& ctx, const TensorType& out, double mean, double stdev) {
  Builder& b = ctx.b;
  const ElementType acc = draw_type(out.dtype);
  if (out.numel() == 0) return b.splat(0, out);
  Value z = standard_normal(ctx, out.shape, acc);
  Value v = b.binary("add", b.binary("multiply", z, host_number(ctx, stdev, acc, out.shape)),
                     host_number(ctx, mean, acc, out.shape));
  return b.convert(v, out.dtype);
}

}  // namespace

// uniform_(self, from, to): from + u * (to - from) in f32 (f64 for double).
// A value that rounds up to `to` becomes `from`, as CUDA's uniform_ does, so
// the result stays in [from, to). A complex tensor's parts are each drawn so.
std::vector<Value> uniform(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  if (!hlo::is_complex(out.dtype)) require_float_draw(out.dtype, "check_uniform_bounds");
  const double from = ctx.double_arg(1, 0.0), to = ctx.double_arg(2, 1.0);
  if (from > to)
    throw std::invalid_argument("uniform_ expects to return a [from, to) range, but found from=" + number(from) +
                                " > to=" + number(to));
  if (hlo::is_complex(out.dtype))
    return {complex_draw(ctx, out, [&](const TensorType& part) { return uniform_draw(ctx, part, from, to); })};
  return {uniform_draw(ctx, out, from, to)};
}

// normal_(self, mean, std): mean + std * z, z standard normal (Box-Muller).
// A complex tensor's parts are each mean + std / sqrt(2) * z, as PyTorch
// draws them, so that E|x - mean|^2 = std^2.
std::vector<Value> normal(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  if (!hlo::is_complex(out.dtype)) require_float_draw(out.dtype, "normal_kernel_cpu");
  const double mean = ctx.double_arg(1, 0.0), stdev = ctx.double_arg(2, 1.0);
  if (!(stdev >= 0)) throw std::invalid_argument("normal expects std >= 0.0, but found std " + number(stdev));
  if (hlo::is_complex(out.dtype))
    return {complex_draw(ctx, out,
                         [&](const TensorType& part) { return normal_draw(ctx, part, mean, stdev / std::sqrt(2.0)); })};
  return {normal_draw(ctx, out, mean, stdev)};
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
    p = host_number(ctx, p_arg->d, acc, out.shape);
  } else {
    const Value& pt = (p_arg && p_arg->kind == Arg::Kind::Tensor) ? ctx.tensor(1) : ctx.tensor(0);
    acc = draw_type(pt.dtype());
    // CPU checks every probability (CUDA asserts in its kernel).
    Value q = b.convert(pt, acc);
    ctx.check_all(b.binary("and", b.compare(q, b.splat(0, q.type), CompareDirection::GE),
                           b.compare(q, b.splat(1, q.type), CompareDirection::LE)),
                  "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
    p = coerce(b, pt, {acc, out.shape});
  }
  Value u = uniform01(ctx, out.shape, acc);
  return {b.convert(b.compare(u, p, CompareDirection::LT), out.dtype)};
}

// random_(), random_(from, to?) and random_(to).
std::vector<Value> random(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  switch (ctx.args.size()) {
    case 2:
      return {random_default(ctx, out)};  // random_(self, *, generator)
    case 3:
      return {random_from_to(ctx, out, 0, ctx.int_arg(1))};  // random_.to(self, to, *, generator)
    default: {                                               // random_.from(self, from, to?, *, generator)
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
  Value mask = b.compare(uniform01(ctx, out.shape, draw_type(acc)), host_number(ctx, keep, draw_type(acc), out.shape),
                         CompareDirection::LT);
  // input * mask * scale: multiplying (not selecting) keeps inf * 0 = nan as PyTorch.
  Value kept = b.binary("multiply", coerce(b, input, acc_t), b.convert(mask, acc));
  Value v = b.binary("multiply", kept, host_number(ctx, scale, acc, out.shape));
  return {b.convert(v, out.dtype), mask};
}

// native_dropout_backward(grad, mask, scale) = grad * mask * scale.
std::vector<Value> native_dropout_backward(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const TensorType acc_t{accumulation_type(out.dtype), out.shape};
  Value g = b.binary("multiply", coerce(b, ctx.tensor(0), acc_t), coerce(b, ctx.tensor(1), acc_t));
  Value v = b.binary("multiply", g, host_number(ctx, ctx.double_arg(2), acc_t.dtype, out.shape));
  return {b.convert(v, out.dtype)};
}

// ---- more distributions --------------------------------------------------------
namespace {

// A float-only in-place sampler's result type and draw type.
struct Draw {
  TensorType out;
  ElementType acc;
};

Draw float_draw(LowerContext& ctx, const char* op) {
  const TensorType out = ctx.out_types.at(0);
  if (!hlo::is_float(out.dtype)) throw std::invalid_argument(std::string(op) + " only supports floating-point dtypes");
  return {out, draw_type(out.dtype)};
}

// Stable sort of (keys, payload) along the last dim.
std::vector<Value> sort_last(Builder& b, const Value& keys, const Value& payload, bool descending) {
  return b.sort({keys, payload}, keys.rank() - 1, /*is_stable=*/true, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.compare(a[0], a[1], descending ? CompareDirection::GT : CompareDirection::LT)};
  });
}

// The samplers' parameter checks, worded as PyTorch's
// ("cauchy_ expects sigma > 0.0, but found sigma=0").
void require_positive(double v, const char* op, const char* name) {
  if (!(v > 0)) {
    throw std::invalid_argument(std::string(op) + " expects " + name + " > 0.0, but found " + name + "=" + number(v));
  }
}

// In-place samplers (self, location, scale) of location + scale * sample,
// then `finish` (an hlo unary op) when given; the scale must be positive.
struct LocationScale {
  const char* op;
  const char* scale_name;
  double location, scale;  // the defaults
  Value (*sample)(LowerContext& ctx, const Draw& d);
  const char* finish;
};
std::vector<Value> location_scale(LowerContext& ctx, const LocationScale& s) {
  const Draw d = float_draw(ctx, s.op);
  const double location = ctx.double_arg(1, s.location), scale = ctx.double_arg(2, s.scale);
  require_positive(scale, s.op, s.scale_name);
  Builder& b = ctx.b;
  if (d.out.numel() == 0) return {b.splat(0, d.out)};
  Value x = s.sample(ctx, d);
  Value v = b.binary("add", host_number(ctx, location, d.acc, d.out.shape),
                     b.binary("multiply", host_number(ctx, scale, d.acc, d.out.shape), x));
  if (s.finish) v = b.unary(s.finish, v);
  return {b.convert(v, d.out.dtype)};
}

// tan(pi * (u - 1/2)), u in (0, 1).
Value standard_cauchy(LowerContext& ctx, const Draw& d) {
  Builder& b = ctx.b;
  const TensorType t{d.acc, d.out.shape};
  Value u = uniform_open01(ctx, d.out.shape, d.acc);
  return b.unary("tan", b.binary("multiply", b.splat(M_PI, t), b.binary("subtract", u, b.splat(0.5, t))));
}

Value standard_normal_draw(LowerContext& ctx, const Draw& d) { return standard_normal(ctx, d.out.shape, d.acc); }

}  // namespace

// cauchy_(self, median, sigma): median + sigma * tan(pi * (u - 1/2))
// (transformation::cauchy).
std::vector<Value> cauchy(LowerContext& ctx) {
  return location_scale(ctx, {"cauchy_", "sigma", 0.0, 1.0, standard_cauchy, nullptr});
}

// exponential_(self, lambd): -ln(u) / lambd with u in (0, 1), so never 0
// (the CUDA kernel's rule; exponential excludes 0).
std::vector<Value> exponential(LowerContext& ctx) {
  const Draw d = float_draw(ctx, "exponential_");
  const double lambd = ctx.double_arg(1, 1.0);
  require_positive(lambd, "exponential_", "lambda");
  Builder& b = ctx.b;
  if (d.out.numel() == 0) return {b.splat(0, d.out)};
  Value e = b.unary("negate", b.unary("log", uniform_open01(ctx, d.out.shape, d.acc)));
  return {b.convert(b.binary("divide", e, host_number(ctx, lambd, d.acc, d.out.shape)), d.out.dtype)};
}

// geometric_(self, p): ceil(ln(u) / ln(1 - p)) >= 1 (transformation::geometric);
// any dtype, integers included.
std::vector<Value> geometric(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  const double p = ctx.double_arg(1);
  if (!(p > 0 && p < 1)) throw std::invalid_argument("geometric_ expects p to be in (0, 1), but got p=" + number(p));
  Builder& b = ctx.b;
  if (out.numel() == 0) return {b.splat(0, out)};
  const ElementType acc = draw_type(out.dtype);
  Value ratio = b.binary("divide", b.unary("log", uniform_open01(ctx, out.shape, acc)),
                         host_number(ctx, std::log1p(-p), acc, out.shape));
  return {b.convert(b.unary("ceil", ratio), out.dtype)};
}

// log_normal_(self, mean, std): exp(mean + std * z).
std::vector<Value> log_normal(LowerContext& ctx) {
  return location_scale(ctx, {"log_normal_", "std", 1.0, 2.0, standard_normal_draw, "exponential"});
}

// normal.Tensor_Tensor / Tensor_float / float_Tensor (mean, std): mean + std * z,
// broadcast to PyTorch's result shape. A float std is checked here; a
// tensor's values are not (CPU checks them after the fact, on the host).
std::vector<Value> normal_tensor(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  require_float_draw(out.dtype, "normal_kernel_cpu");
  Builder& b = ctx.b;
  const ElementType acc = draw_type(out.dtype);
  const TensorType t{acc, out.shape};
  auto operand = [&](size_t i) {
    const Arg& a = ctx.args.at(i);
    if (a.kind == Arg::Kind::Tensor) return coerce(b, ctx.tensor(i), t);
    return host_number(ctx, ctx.double_arg(i), acc, out.shape);
  };
  if (ctx.args.at(1).kind != Arg::Kind::Tensor && !(ctx.double_arg(1) >= 0))
    throw std::invalid_argument("normal expects std >= 0.0, but found std " + number(ctx.double_arg(1)));
  if (ctx.args.at(1).kind == Arg::Kind::Tensor) {
    // CPU and CUDA read the smallest std back to check it; we check it in
    // the program, raised by the next synchronization.
    Value s = ctx.tensor(1);
    ctx.check_all(b.compare(s, b.splat(0, s.type), CompareDirection::GE), "normal expects all elements of std >= 0.0");
  }
  if (out.numel() == 0) return {b.splat(0, out)};
  Value v = b.binary("add", operand(0), b.binary("multiply", operand(1), standard_normal(ctx, out.shape, acc)));
  return {b.convert(v, out.dtype)};
}

// multinomial(self [K] or [R, K], n, replacement). Without replacement:
// the n largest p / q with q ~ Exp(1) (Distributions.cpp's Gumbel-top-k).
// With replacement: each draw is the number of CDF entries <= u * total.
std::vector<Value> multinomial(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const Value& self = ctx.tensor(0);
  if (!hlo::is_float(self.dtype()))
    throw std::invalid_argument("multinomial only supports floating-point dtypes for input");
  const int64_t n = ctx.int_arg(1);
  const bool replacement = ctx.bool_arg(2);
  // Distributions.cpp's checks that PyTorch's meta kernel leaves out.
  if (out.dtype != ElementType::S64) throw std::invalid_argument("multinomial expects Long tensor out");
  if (n <= 0) throw std::invalid_argument("cannot sample n_sample <= 0 samples");
  const int64_t k = self.rank() == 0 ? 1 : self.shape().back(), rows = self.rank() == 2 ? self.shape()[0] : 1;
  if (k > (int64_t{1} << 24)) throw std::invalid_argument("number of categories cannot exceed 2^24");
  if (!replacement && n > k)
    throw std::invalid_argument("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  if (out.numel() == 0) return {b.splat(0, out)};
  const ElementType acc = draw_type(self.dtype());
  Value p = b.reshape(b.convert(self, acc), {rows, k});
  if (!replacement) {
    Value q = b.unary("negate", b.unary("log", uniform_open01(ctx, {rows, k}, acc)));
    auto sorted = sort_last(b, b.binary("divide", p, q), b.iota({ElementType::S64, {rows, k}}, 1), true);
    return {b.reshape(b.convert(b.slice(sorted[1], {0, 0}, {rows, n}, {1, 1}), out.dtype), out.shape)};
  }
  // cdf via the cumsum lowering, with this op's arguments swapped out.
  std::vector<Arg> saved_args = std::move(ctx.args);
  std::vector<TensorType> saved_outs = std::move(ctx.out_types);
  Arg pa, dim;
  pa.kind = Arg::Kind::Tensor;
  pa.tensor = p;
  dim.kind = Arg::Kind::Int;
  dim.i = 1;
  ctx.args = {pa, dim};
  ctx.out_types = {p.type};
  Value cdf = cumsum(ctx).at(0);
  ctx.args = std::move(saved_args);
  ctx.out_types = std::move(saved_outs);
  Value total = b.slice(cdf, {0, k - 1}, {rows, k}, {1, 1});  // [rows, 1]
  Value x = b.binary("multiply", uniform01(ctx, {rows, n}, acc), b.broadcast_in_dim(total, {rows, n}, {0, 1}));
  Value below = b.compare(b.broadcast_in_dim(cdf, {rows, n, k}, {0, 2}), b.broadcast_in_dim(x, {rows, n, k}, {0, 1}),
                          CompareDirection::LE);
  Value count = b.reduce(b.convert(below, ElementType::S64), b.constant_int(0, ElementType::S64), {2}, "add");
  Value idx = b.binary("minimum", count, b.splat(static_cast<double>(k - 1), count.type));
  return {b.reshape(b.convert(idx, out.dtype), out.shape)};
}

// randperm.generator_out(n, generator, out) / randperm.out(n, out): 0..n-1
// ordered by 64 random bits each.
std::vector<Value> randperm(LowerContext& ctx) {
  const TensorType out = ctx.out_types.at(0);
  Builder& b = ctx.b;
  const int64_t n = ctx.int_arg(0);
  if (n == 0) return {b.splat(0, out)};
  auto sorted = sort_last(b, random_bits(ctx, {n}, ElementType::U64), b.iota({ElementType::S64, {n}}, 0), false);
  return {b.reshape(b.convert(sorted[1], out.dtype), out.shape)};
}

}  // namespace torch_tpu::lower
