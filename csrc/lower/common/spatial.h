// Static-index helpers the spatial lowerings share (resampling, padding,
// pooling, im2col): positions known when the program is built, applied as
// gathers and scatters.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

namespace spatial {

// x with dim d replaced by the listed positions of it (static indices; exact
// for every value, NaN and infinities included).
Value take_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx);
// A linear map along one dim given by its rows: output o is the sum of
// w * x[i] over rows[o]'s (i, w) (weights rounded to `weight_dtype` first
// when given, as kernels that store them so), one weighted gather per tap.
using Rows = std::vector<std::vector<std::pair<int64_t, double>>>;
Value apply_rows(Builder& b, const Value& x, int64_t d, const Rows& rows,
                 std::optional<ElementType> weight_dtype = std::nullopt);
// Its transpose: dim d of g (one per row) becomes `in` positions.
Value apply_rows_transposed(Builder& b, const Value& g, int64_t d, const Rows& rows, int64_t in);
// The transpose of take_along: sums slices of x (dim d, size idx.size()) into
// `size` positions (grad of a static gather).
Value scatter_add_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx, int64_t size);

}  // namespace spatial

}  // namespace torch_tpu::lower
