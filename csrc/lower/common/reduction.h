// Reduction helpers shared by the lowerings (defined in reduction.cpp):
// which dims a dim argument names, shapes around a reduction,
// NaN-propagating max/min, accumulating sums, whole-tensor sum and any.
#pragma once

#include <string>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// A tensor read along the dim argument `dim_arg` (cumsum, sort, median,
// mode, kthvalue ...): `x` as rank >= 1 (a 0-d tensor is one element along
// dim 0) and the argument's dim wrapped.
struct DimInput {
  Value x;
  int64_t dim = 0;
};
DimInput dim_input(const LowerContext& ctx, const Value& x, size_t dim_arg);

// A loss's `reduction` argument (at::Reduction::Reduction).
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// 0, 1, ..., rank - 1.
std::vector<int64_t> all_dims(int64_t rank);

// The dims argument `i` names: an int, an int list, or None. None, or an
// overload without a dim argument (`present` false) mean every dim. An empty
// list means every dim for sum/mean/amax/var ... (`empty_is_all`), but
// nothing for all.dims/any.dims (PyTorch 2.2+). A 0-d tensor accepts dim
// 0 / -1 and has nothing to reduce. Sorted, without repeats.
std::vector<int64_t> reduction_dims(const LowerContext& ctx, size_t i, int64_t rank, bool present = true,
                                    bool empty_is_all = true);

// How many elements of `x` each reduced element combines.
int64_t reduced_count(const Value& x, const std::vector<int64_t>& dims);

// Dims of a rank-`rank` value that survive a reduction over `dims`, and
// their sizes in `x`.
std::vector<int64_t> kept_dims(int64_t rank, const std::vector<int64_t>& dims);
Shape kept_shape(const Value& x, const std::vector<int64_t>& dims);

// stablehlo.reduce with `combiner`'s identity; no dims: `x` itself. A float
// sum adds in blocks where the trailing reduced dims hold many elements, so
// that its error does not grow with the count (see reduction.cpp). On
// XLA:CPU a reduce that its tree reduction would give long windows merges
// adjacent reduced dims and keeps that shape behind a barrier (see
// reduction.cpp).
Value reduce_with(Builder& b, const Value& x, const std::vector<int64_t>& dims, const std::string& combiner);

// The platform reduce_with lowers for: the loaded plugin's, set once by the
// executor (exec/lowered_kernel.cpp); a TPU's until then.
void set_reduction_platform(Platform platform);

// max/min that propagate NaN (PyTorch's amax, max, maximum): XLA's
// maximum/minimum is not guaranteed to on every backend.
Value nan_max_min(Builder& b, const Value& x, const std::vector<int64_t>& dims, bool is_max);

// Sum in the accumulation type of `out`, converted to `out` (a bf16 sum
// adds in f32; a bool or int sum arrives with an int64 `out`).
Value sum_to(Builder& b, const Value& x, const std::vector<int64_t>& dims, const TensorType& out);

// A reduced value (the reduce's own shape or the keepdim shape) broadcast
// back over `like`'s shape.
Value expand_back(Builder& b, const Value& reduced, const Value& like, const std::vector<int64_t>& dims);

// The vector p-norm of `x` (in the type it is computed in) over `dims`, as
// linalg_vector_norm computes it: max/min of |x| for inf/-inf (NaN
// propagating), the count of non-zeros for 0, the p-th root of the sum of
// |x|^p otherwise (|x| for 1, sqrt of x * x for 2).
Value vector_norm(Builder& b, const Value& x, const std::vector<int64_t>& dims, double ord);

// The sum of every element of `x`, in its own dtype (0-d).
Value sum_all(Builder& b, const Value& x);

// tensor<i1> (0-d): whether any element of `pred` (i1) is true; all_true
// (lowering.h) is its dual.
Value any_true(Builder& b, const Value& pred);

// |d|^2 elementwise: d * d, and re^2 + im^2 (real) for complex d, whose
// variance is real.
Value squared_magnitude(Builder& b, const Value& d);

}  // namespace torch_tpu::lower
