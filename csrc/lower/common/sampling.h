// The random streams lowerings draw from: bits from the device generator,
// uniform and normal values built from them as PyTorch builds its own
// (random ops, dropout, rrelu's training slopes).
#pragma once

#include <cstdint>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// A ui64 constant of `shape`.
Value u64_splat(Builder& b, uint64_t v, const Shape& shape);

// Uniform random bits (U32 or U64) of `shape`, from the op's own stream: each
// op's key hashes the generator's counter, so streams do not overlap.
Value random_bits(LowerContext& ctx, const Shape& shape, ElementType bits);

// The type values of a `t` result are drawn in: f64 for f64, f32 otherwise
// (bf16/f16 are drawn in f32 then rounded).
ElementType draw_type(ElementType t);

// Uniform in [0, 1) as f32 (24 random bits, as PyTorch's uniform_real for
// float) or f64 (53 bits).
Value uniform01(LowerContext& ctx, const Shape& shape, ElementType acc);

// Uniform in the open interval (0, 1): never 0 or 1, so logs stay finite.
Value uniform_open01(LowerContext& ctx, const Shape& shape, ElementType acc);

// Standard normal values of `shape` in `acc` (Box-Muller).
Value standard_normal(LowerContext& ctx, const Shape& shape, ElementType acc);

}  // namespace torch_tpu::lower
