// Solvers and the inverse: triangular solves (stablehlo.triangular_solve),
// linalg_solve_ex and linalg_inv_ex from the LU factors (lu.h).
#include "lower/linalg.h"

#include <cstdint>
#include <vector>

#include "lower/linalg/common.h"
#include "lower/linalg/lu.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

// linalg_solve_triangular(self=A, B, *, upper, left, unitriangular)
std::vector<Value> linalg_solve_triangular(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const auto [a, rhs] = batched_arguments(ctx, Complex::Computes);
  Value x = tri_solve(b, a, rhs, ctx.bool_arg(3, true), !ctx.bool_arg(2), ctx.bool_arg(4), false);
  return {reshape_as(b, x, out)};
}

// triangular_solve(self=B, A, upper, transpose, unitriangular) -> (X, A broadcast)
std::vector<Value> triangular_solve(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const TensorType& coeff = ctx.out_types.at(1);
  Value a_out = coerce(b, ctx.tensor(1), coeff);
  if (out.numel() == 0) return {zeros(b, out), a_out};
  const auto [rhs, a] = batched_arguments(ctx, Complex::Computes);
  // `transpose` is A^T, also for complex A (LAPACK's 'T', not 'C'): the
  // adjoint solve of conj(A).
  const bool transpose = ctx.bool_arg(3);
  Value x = tri_solve(b, transpose ? b.conjugate(a) : a, rhs, true, !ctx.bool_arg(2, true), ctx.bool_arg(4), transpose);
  return {reshape_as(b, x, out), a_out};
}

// _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info).
// A vector right-hand side (result one dim short of A) is a column.
std::vector<Value> linalg_solve_ex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  const Value& a = ctx.tensor(0);
  const bool left = ctx.bool_arg(2, true);
  if (has_zero_size({t[0], t[1]})) return {zeros(b, t[0]), zeros(b, t[1]), zeros(b, t[2]), zeros(b, t[3])};
  LU f = lu_factor(b, flatten_batch(b, a, Complex::Computes));
  const bool vector = t[0].rank() == a.rank() - 1;
  Shape xshape = t[0].shape;
  if (vector) xshape.insert(xshape.end() - (left ? 0 : 1), 1);
  const Shape batch = batch_of(xshape);
  Value rhs = batched_to(b, b.reshape(b.broadcast_to(ctx.tensor(1), t[0].shape), xshape), batch, Complex::Computes);
  Value lu = batched_to(b, b.reshape(f.lu, a.shape()), batch, Complex::Computes);
  const int64_t k = f.piv.shape()[1];
  Value piv = b.reshape(b.broadcast_to(b.reshape(f.piv, concat(batch_of(a.shape()), {k})), concat(batch, {k})),
                        {product(batch), k});
  Value x = lu_solve(b, lu, piv, rhs, left, false);
  return {reshape_as(b, x, t[0]), reshape_as(b, f.lu, t[1]), reshape_as(b, f.piv, t[2]), reshape_as(b, f.info, t[3])};
}

// linalg_inv_ex(A, *, check_errors) -> (inverse, info)
std::vector<Value> linalg_inv_ex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  if (t[0].numel() == 0) return {zeros(b, t[0]), zeros(b, t[1])};
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  LU f = lu_factor(b, a);
  Value x = lu_solve(b, f.lu, f.piv, eye(b, a.shape(), a.dtype()), true, false);
  return {reshape_as(b, x, t[0]), reshape_as(b, f.info, t[1])};
}

}  // namespace torch_tpu::lower
