// Sorting and selection: sort, topk, kthvalue, median/nanmedian, mode. All
// rest on one stable stablehlo.sort whose comparator orders NaN above every
// number, as PyTorch does.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

struct Sorted {
  Value values;
  Value indices;  // s64 positions along the sorted dim
};

// Stable sort of `x` along `dim` (rank >= 1), NaN largest.
Sorted sort_along(Builder& b, const Value& x, int64_t dim, bool descending);

// x[..., pos[...], ...] along `dim`: `pos` (s64) has x's shape without `dim`.
Value take_along(Builder& b, const Value& x, int64_t dim, const Value& pos);

TORCH_TPU_LOWERING(kthvalue)
TORCH_TPU_LOWERING(median_all)
TORCH_TPU_LOWERING(median_dim)
TORCH_TPU_LOWERING(mode)
TORCH_TPU_LOWERING(nanmedian_all)
TORCH_TPU_LOWERING(nanmedian_dim)
TORCH_TPU_LOWERING(sort)
TORCH_TPU_LOWERING(topk)

}  // namespace torch_tpu::lower
