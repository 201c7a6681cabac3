// Inclusive scans along one dim, for the scan lowerings and for the ops
// that need prefix counts (mode's run lengths, nonzero_static, masked
// writes, segment offsets).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// Combines the running value of the elements before (`earlier`) with the
// current ones (`later`), one Value per scanned operand.
using ScanCombine =
    std::function<std::vector<Value>(Builder&, const std::vector<Value>& earlier, const std::vector<Value>& later)>;

// Inclusive scan of `xs` (same shapes) along `dim`; `identity` holds one 0-d
// value per operand that `combine` leaves its other argument unchanged with.
std::vector<Value> inclusive_scan(Builder& b, std::vector<Value> xs, int64_t dim, const std::vector<Value>& identity,
                                  const ScanCombine& combine);

// Inclusive prefix sum of `x` along `dim`, in x's dtype.
Value prefix_sum(Builder& b, const Value& x, int64_t dim);

}  // namespace torch_tpu::lower
