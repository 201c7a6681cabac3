// Static-index helpers the spatial lowerings share (resampling, padding,
// pooling, im2col): positions known when the program is built, applied as
// gathers, scatters or small dense matrices.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

namespace spatial {

// A 1-D constant of `values` in `dtype`.
Value constant_vector(Builder& b, const std::vector<double>& values, ElementType dtype);
// A 1-D int64 constant.
Value constant_indices(Builder& b, const std::vector<int64_t>& values);
// x with dim d replaced by the listed positions of it (static indices; exact
// for every value, NaN and infinities included).
Value take_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx);
// A dense [rows, cols] matrix applied along dim d of x: contracts x's dim d
// with the matrix's dim `contract` (0 or 1); dim d becomes the other one.
// Runs at HIGHEST precision: weights are exact PyTorch values (rounded to
// `weight_dtype` first when given, as kernels that store them so).
Value contract_along(Builder& b, const Value& x, const std::vector<double>& m, int64_t rows, int64_t cols, int64_t d,
                     int64_t contract, std::optional<ElementType> weight_dtype = std::nullopt);
// A linear map along one dim given by its rows: output o is the sum of
// w * x[i] over rows[o]'s (i, w). Applied densely while small, else as one
// weighted gather per tap.
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
