// The random streams lowerings draw from (declared in
// lower/common/sampling.h). Bits come from stablehlo.rng_bit_generator
// (THREE_FRY) keyed by the device generator's (seed, counter) pair, so a seed
// replays a sequence; value transforms follow PyTorch's
// (ATen/core/TransformationHelper.h).
#include "lower/common/sampling.h"

#include <cmath>

namespace torch_tpu::lower {

Value u64_splat(Builder& b, uint64_t v, const Shape& shape) {
  return b.broadcast_to(b.constant_int(static_cast<int64_t>(v), ElementType::U64), shape);
}

namespace {

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

// (k + offset) 2^-m for the top m bits k of a random word of `acc`'s width:
// uniform on a grid of 2^m points in [0, 1).
Value scaled_top_bits(LowerContext& ctx, const Shape& shape, ElementType acc, int m, double offset) {
  Builder& b = ctx.b;
  const bool wide = acc == ElementType::F64;
  const ElementType bits_t = wide ? ElementType::U64 : ElementType::U32;
  Value bits = random_bits(ctx, shape, bits_t);
  Value top =
      b.binary("shift_right_logical", bits, b.broadcast_to(b.constant_int((wide ? 64 : 32) - m, bits_t), shape));
  Value f = b.convert(top, acc);
  if (offset != 0) f = b.binary("add", f, b.splat(offset, {acc, shape}));
  return b.binary("multiply", f, b.splat(std::ldexp(1.0, -m), {acc, shape}));
}

}  // namespace

// Uniform random bits (U32 or U64) of `shape`.
Value random_bits(LowerContext& ctx, const Shape& shape, ElementType bits) {
  Builder& b = ctx.b;
  TensorType type{bits, shape};
  const int64_t n = type.numel();
  if (n == 0) return b.splat(0, type);
  Value state = op_state(ctx);
  Value random = b.rng_bit_generator(state, {bits, {n}}, hlo::RngAlgorithm::ThreeFry).second;
  return b.reshape(random, shape);
}

// f64 for f64 results, f32 otherwise (bf16/f16 are drawn in f32 then rounded).
ElementType draw_type(ElementType t) { return t == ElementType::F64 ? ElementType::F64 : ElementType::F32; }

// Uniform in the open interval (0, 1): (k + 1/2) 2^-m for m random bits (23
// for f32, 52 for f64, so k + 1/2 is exact), never 0 or 1: logs stay finite.
Value uniform_open01(LowerContext& ctx, const Shape& shape, ElementType acc) {
  return scaled_top_bits(ctx, shape, acc, acc == ElementType::F64 ? 52 : 23, 0.5);
}

// Standard normal values of `shape` in `acc` by Box-Muller:
// sqrt(-2 ln u1) cos(2 pi u2) with u1 in (0, 1] so the log is finite.
Value standard_normal(LowerContext& ctx, const Shape& shape, ElementType acc) {
  Builder& b = ctx.b;
  const int64_t n = TensorType{acc, shape}.numel();
  if (n == 0) return b.splat(0, {acc, shape});
  const TensorType flat{acc, {n}};
  Value u = uniform01(ctx, {2 * n}, acc);
  Value u1 = b.binary("subtract", b.splat(1, flat), b.slice(u, {0}, {n}, {1}));
  Value u2 = b.slice(u, {n}, {2 * n}, {1});
  Value radius = b.unary("sqrt", b.binary("multiply", b.splat(-2, flat), b.unary("log", u1)));
  Value z = b.binary("multiply", radius, b.unary("cosine", b.binary("multiply", b.splat(2 * M_PI, flat), u2)));
  return b.reshape(z, shape);
}

// Uniform in [0, 1) as f32 (24 random bits, as PyTorch's uniform_real for
// float) or f64 (53 bits).
Value uniform01(LowerContext& ctx, const Shape& shape, ElementType acc) {
  return scaled_top_bits(ctx, shape, acc, acc == ElementType::F64 ? 53 : 24, 0.0);
}

}  // namespace torch_tpu::lower
