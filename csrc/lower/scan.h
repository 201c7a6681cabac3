// Scans along one dim: cumprod, cummax/cummin, logcumsumexp (cumsum lives in
// reduce.cpp). The generic inclusive scan is shared with other families
// (mode's run lengths, searchsorted-free prefix counts).
#pragma once

#include <functional>

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// Combines the running value of the elements before (`earlier`) with the
// current ones (`later`), one Value per scanned operand.
using ScanCombine =
    std::function<std::vector<Value>(Builder&, const std::vector<Value>& earlier, const std::vector<Value>& later)>;

// Inclusive scan of `xs` (same shapes) along `dim`; `identity` holds one 0-d
// value per operand that `combine` leaves its other argument unchanged with.
std::vector<Value> inclusive_scan(Builder& b, std::vector<Value> xs, int64_t dim, const std::vector<Value>& identity,
                                  const ScanCombine& combine);

TORCH_TPU_LOWERING(cummax)
TORCH_TPU_LOWERING(cummin)
TORCH_TPU_LOWERING(cumprod)
TORCH_TPU_LOWERING(logcumsumexp)

}  // namespace torch_tpu::lower
