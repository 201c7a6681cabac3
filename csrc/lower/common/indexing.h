// Index arithmetic shared by the indexing lowerings (index.cpp,
// index_reduce.cpp, and the ops that address single elements).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// An index tensor as int64, the type gather/scatter coordinates use.
Value as_index(Builder& b, const Value& index);

// PyTorch counts negative indices from the end of the dim (advanced
// indexing, index_put, take/put): index < 0 becomes index + size.
Value wrap_negative(Builder& b, const Value& index, int64_t size);

// A 0-d tensor acts as a 1-d one of one element (gather/scatter along a dim).
Value rank_at_least_1(Builder& b, const Value& v);

// Full coordinates [*shape, R] of every element of `shape` (rank R): its own
// position, with coordinate `dim` read from `along` (s64, of `shape`). This
// is gather/scatter(dim)'s addressing, where the index may be smaller than
// the operand in every dim.
Value point_coordinates(Builder& b, const Shape& shape, int64_t dim, const Value& along);

// Range check of `index` against dim `dim` (of size `size`), worded as
// PyTorch's kernels word it: "<op>: index out of bounds for dimension <dim>
// with size <size>". `runtime_error` as LowerContext::check_in_range.
void check_index_in_dim(LowerContext& ctx, const Value& index, int64_t dim, int64_t size, const std::string& op,
                        bool runtime_error = false);

// scatter(dim)'s addressing (scatter, scatter_add, scatter_reduce, whose
// arguments start self, dim, index): self in `t` as rank >= 1, the
// coordinates of the index's elements, and `src` in `t` cut to the index's
// extent (src may be larger in any dim; a 0-d src is broadcast). The index is
// range-checked as `op`. No value when there is nothing to write (the op
// returns self).
struct ScatterAlongDim {
  Value operand, coords, updates;
};
std::optional<ScatterAlongDim> scatter_along_dim(LowerContext& ctx, const Value& src, ElementType t,
                                                 const std::string& op, bool runtime_error);

}  // namespace torch_tpu::lower
