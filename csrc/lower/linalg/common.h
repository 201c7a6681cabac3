// Matrix helpers every linalg lowering shares (defined in common.cpp): batch
// dims flattened to one leading dim B, the dtype a matrix factors in, masks,
// products, triangles and loops over columns with static shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower::linalg {

using hlo::CompareDirection;

// PyTorch's CPU kernels compute in full float32.
inline constexpr const char* kPrecision = "HIGHEST";

// The batch dims of [..., m, n].
Shape batch_of(const Shape& s);

// The number of elements of a shape.
int64_t product(const Shape& s);

// a followed by b.
Shape concat(Shape a, const Shape& b);

// These lowerings compute in float32 or float64, and the LU family (getrf
// and what is built on it: solves, inverses, determinants), the Cholesky
// family (potrf, its solves and inverse), Householder QR (geqrf, orgqr,
// ormqr), the triangular solves, matrix_exp, the Hermitian eigenproblem, the
// SVD and LDL (csytrf/chetrf) also in complex64 or complex128. A lowering
// that factors real matrices only asks flatten_batch to raise for a complex
// one: converted to a real type it would lose its imaginary part and return
// silently wrong values.
//
// Whether a lowering computes on complex matrices.
enum class Complex { Raises, Computes };

// The type a matrix of `t` factors in: its own for float32, float64,
// complex64 and complex128 (as LAPACK's s, d, c and z routines, which
// PyTorch's CPU kernels call), float32 for half types.
ElementType factor_type(ElementType t);

// [..., m, n] as [B, m, n], in its factor_type.
Value flatten_batch(Builder& b, const Value& v, Complex complex = Complex::Raises);

// The real type of a matrix's magnitudes, norms and singular values.
ElementType real_type(const Value& v);

// float64's (and complex128's) tolerance where a loop stops on float32's.
bool is_double(const Value& v);

// Matrices `v` ([..., m, n]) broadcast to batch dims `batch`, as [B, m, n].
Value batched_to(Builder& b, const Value& v, const Shape& batch, Complex complex = Complex::Raises);

// Matrix arguments 0 and 1 broadcast to the batch dims of result 0, as
// [B, m, n] each (the solvers' coefficient and right-hand side).
std::pair<Value, Value> batched_arguments(LowerContext& ctx, Complex complex = Complex::Raises);

// int64 positions along `dim`.
Value iota(Builder& b, const Shape& shape, int64_t dim);

// A 0-d value broadcast to `shape`.
Value bcast(Builder& b, const Value& scalar, const Shape& shape);

// A [B] (or [B, x]) value broadcast along trailing dims to `shape`.
Value bcast_lead(Builder& b, const Value& v, const Shape& shape);

// x `dir` y, elementwise.
Value cmp(Builder& b, const Value& x, const Value& y, CompareDirection dir);

// x and y, elementwise (i1 values).
Value both(Builder& b, const Value& x, const Value& y);

// Sum over `dim` of v where mask holds: an exact pick when one element does.
Value masked_sum(Builder& b, const Value& v, const Value& mask, int64_t dim);

// Sum over dims of |v|^2, real.
Value squared_magnitude_sum(Builder& b, const Value& v, const std::vector<int64_t>& dims);

// v with its last two dims swapped (not conjugated).
Value mT(Builder& b, const Value& v);

// [B, m, k] @ [B, k, n]
Value bmm(Builder& b, const Value& x, const Value& y);

// Keep the triangle col - row <= diag (lower) or >= diag (upper), zero elsewhere.
Value triangle(Builder& b, const Value& v, bool lower, int64_t diag);

// Identity matrices of `shape` ([..., m, n]).
Value eye(Builder& b, const Shape& shape, ElementType dtype);

// The diagonal of [B, m, n] as [B, min(m, n)].
Value diagonal(Builder& b, const Value& v);

// stablehlo.triangular_solve (Builder::triangular_solve).
Value tri_solve(Builder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit, bool transpose);

// The scalar loop counter as a value of `shape` (for masks).
Value counter(Builder& b, const Value& k, const Shape& shape);

// k + step, for a loop counter.
Value next_counter(Builder& b, const Value& k, int64_t step = 1);

// for k in [from, to) (step ±1) over `state`; body gets k first.
std::vector<Value> for_loop(Builder& b, int64_t from, int64_t to, int64_t step, std::vector<Value> state,
                            const std::function<std::vector<Value>(Builder&, const Value&, std::vector<Value>)>& body);

// The magnitude getrf pivots by: |x|, and |re| + |im| for complex x (icamax's).
Value pivot_magnitude(Builder& b, const Value& x);

// onehot[b, i, j] = (perm[b, i] == j): onehot @ X = X[perm], onehot^T = P.
Value perm_rows(Builder& b, const Value& perm, ElementType dtype);

// v ([B, ...]) as the result type t (its batch dims back, its dtype).
Value reshape_as(Builder& b, const Value& v, const TensorType& t);

// An empty input's P (lu) or full U / Vh (svd) is the identity; results the
// op was asked not to compute are empty.
Value identity_of(Builder& b, const TensorType& t);

// Whether any of `types` has no elements.
bool has_zero_size(const std::vector<TensorType>& types);

}  // namespace torch_tpu::lower::linalg
