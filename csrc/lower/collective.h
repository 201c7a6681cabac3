// What c10d's collectives mean, over StableHLO's (hlo/collectives.h): the
// reduce ops of c10d::ReduceOp on every dtype (bool, AVG, PREMUL_SUM), and
// broadcast from any root. Used by the in-program transport of `tpu_dist`
// (csrc/device/collective_kernels.cpp); the program is one text for every
// rank of the group, replica k being rank k. `channel` numbers the
// collective within its program (hlo/collectives.h).
#pragma once

#include <cstdint>

#include "hlo/collectives.h"
#include "lower/lowering.h"

namespace torch_tpu::lower {

// c10d::ReduceOp::RedOpType, by name.
enum class CollectiveReduce { Sum, Avg, Product, Min, Max, BitwiseAnd, BitwiseOr, BitwiseXor, PremulSum };

// Throws std::invalid_argument naming the op when `dtype` cannot be reduced
// with `op` (bitwise ops on floats), as c10d's backends refuse it.
void check_collective_reduce(CollectiveReduce op, ElementType dtype);

// Every rank's `x` reduced elementwise by `op` over a group of `ranks`
// ranks; AVG divides the sum (truncating integers, as NCCL does) and
// PREMUL_SUM multiplies each rank's value by `factor` before summing.
Value lower_all_reduce(Builder& b, const Value& x, CollectiveReduce op, double factor, int64_t ranks, int64_t channel);
// Rank k keeps block k (of `ranks` along dim 0) of the reduction.
Value lower_reduce_scatter(Builder& b, const Value& x, CollectiveReduce op, double factor, int64_t ranks,
                           int64_t channel);
// Every rank's `x` concatenated along dim 0 in rank order.
Value lower_all_gather(Builder& b, const Value& x, int64_t ranks, int64_t channel);
// `x`'s block j (of `ranks` along dim 0) to rank j, received blocks
// concatenated along dim 0 in rank order (all_to_all_single, equal splits).
Value lower_all_to_all(Builder& b, const Value& x, int64_t ranks, int64_t channel);
// Rank `root`'s `x` on every rank, bit for bit.
Value lower_broadcast(Builder& b, const Value& x, int64_t root, int64_t ranks, int64_t channel);

}  // namespace torch_tpu::lower
