// LU with partial pivoting (LAPACK getrf) as a stablehlo.while loop over the
// columns, the LU lowerings (linalg_lu_factor_ex, lu_unpack, linalg_lu,
// linalg_lu_solve) and the determinants built from it (linalg_det,
// linalg_slogdet).
#include "lower/linalg.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "lower/linalg/common.h"
#include "lower/linalg/lu.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

namespace {

// One elimination step at column k: the pivot is the first row (>= k) of
// largest magnitude (isamax), rows k and p swap, multipliers are stored below
// the diagonal and the trailing block takes the rank-1 update. A zero pivot
// sets info (if unset) and leaves the column as it is, as getrf does.
std::vector<Value> lu_step(Builder& b, const Value& k, const Value& a, const Value& piv, const Value& info) {
  const Shape& s = a.shape();
  const int64_t bsz = s[0], m = s[1], n = s[2];
  Value ri = iota(b, s, 1), ci = iota(b, s, 2), kb = counter(b, k, s);
  Value col = masked_sum(b, a, cmp(b, ci, kb, CompareDirection::EQ), 2);  // [B, m]
  Value rows = iota(b, {bsz, m}, 1), km = counter(b, k, {bsz, m});
  Value below = cmp(b, rows, km, CompareDirection::GE);
  Value cand = b.select(below, pivot_magnitude(b, col), b.splat(-1, {real_type(col), col.shape()}));
  Value best = b.reduce(cand, reduce_init(b, "maximum", real_type(col)), {1}, "maximum");
  Value is_best = both(b, below, cmp(b, cand, bcast_lead(b, best, {bsz, m}), CompareDirection::EQ));
  Value p = b.reduce(b.select(is_best, rows, b.splat(static_cast<double>(m), rows.type)),
                     reduce_init(b, "minimum", ElementType::S64), {1}, "minimum");
  p = b.select(cmp(b, p, b.splat(static_cast<double>(m), p.type), CompareDirection::LT), p,
               bcast(b, k, {bsz}));  // NaN column
  Value pb = bcast_lead(b, p, s);
  Value is_k = cmp(b, ri, kb, CompareDirection::EQ), is_p = cmp(b, ri, pb, CompareDirection::EQ);
  Value row_k = masked_sum(b, a, is_k, 1), row_p = masked_sum(b, a, is_p, 1);  // [B, n]
  Value bc_row_k = b.broadcast_in_dim(row_k, s, {0, 2}), bc_row_p = b.broadcast_in_dim(row_p, s, {0, 2});
  Value swapped = b.select(is_k, bc_row_p, b.select(is_p, bc_row_k, a));
  Value pivot = masked_sum(b, row_p, cmp(b, iota(b, {bsz, n}, 1), counter(b, k, {bsz, n}), CompareDirection::EQ), 1);
  Value nonzero = cmp(b, pivot, zeros(b, pivot.type), CompareDirection::NE);      // [B]
  Value col_s = masked_sum(b, swapped, cmp(b, ci, kb, CompareDirection::EQ), 2);  // [B, m]
  Value safe_pivot = b.select(nonzero, pivot, b.splat(1, pivot.type));
  Value l = b.binary("divide", col_s, bcast_lead(b, safe_pivot, {bsz, m}));  // [B, m]
  Value update_ok = both(b, bcast_lead(b, nonzero, s), cmp(b, ri, kb, CompareDirection::GT));
  Value trailing = both(b, update_ok, cmp(b, ci, kb, CompareDirection::GT));
  Value lb = b.broadcast_in_dim(l, s, {0, 1});
  Value updated = b.binary("subtract", swapped, b.binary("multiply", lb, b.broadcast_in_dim(row_p, s, {0, 2})));
  Value out = b.select(trailing, updated, swapped);
  out = b.select(both(b, update_ok, cmp(b, ci, kb, CompareDirection::EQ)), lb, out);
  const int64_t kk = piv.shape()[1];
  Value p1 = b.convert(b.binary("add", p, b.splat(1, p.type)), ElementType::S32);
  Value at_k = cmp(b, iota(b, {bsz, kk}, 1), counter(b, k, {bsz, kk}), CompareDirection::EQ);
  Value new_piv = b.select(at_k, bcast_lead(b, p1, {bsz, kk}), piv);
  Value k1 = b.convert(next_counter(b, k), ElementType::S32);
  Value first_zero = both(b, b.unary("not", nonzero), cmp(b, info, zeros(b, info.type), CompareDirection::EQ));
  Value new_info = b.select(first_zero, bcast(b, k1, {bsz}), info);
  return {out, new_piv, new_info};
}

// The row order getrf's swaps produce: perm[i] is the row of A that is row i
// of L U, so P^T A = A[perm] = L U.
Value permutation_of(Builder& b, const Value& piv, int64_t m) {
  const int64_t bsz = piv.shape()[0], k = piv.shape()[1];
  Value perm = iota(b, {bsz, m}, 1);
  Value piv0 = b.binary("subtract", b.convert(piv, ElementType::S64), b.splat(1, {ElementType::S64, piv.shape()}));
  auto out = for_loop(b, 0, k, 1, {perm}, [&](Builder& rb, const Value& i, std::vector<Value> st) {
    const Value& pm = st[0];
    Value pi = masked_sum(rb, piv0, cmp(rb, iota(rb, {bsz, k}, 1), counter(rb, i, {bsz, k}), CompareDirection::EQ), 1);
    Value idx = iota(rb, {bsz, m}, 1);
    Value is_i = cmp(rb, idx, counter(rb, i, {bsz, m}), CompareDirection::EQ);
    Value is_p = cmp(rb, idx, bcast_lead(rb, pi, {bsz, m}), CompareDirection::EQ);
    Value vi = masked_sum(rb, pm, is_i, 1), vp = masked_sum(rb, pm, is_p, 1);
    return std::vector<Value>{
        rb.select(is_i, bcast_lead(rb, vp, {bsz, m}), rb.select(is_p, bcast_lead(rb, vi, {bsz, m}), pm))};
  });
  return out[0];
}

// Solves A X = B (or A^H X = B) for X given A's LU factors; all [B, ...].
Value lu_solve_left(Builder& b, const Value& lu, const Value& piv, const Value& rhs, bool adjoint) {
  Value onehot = perm_rows(b, permutation_of(b, piv, lu.shape()[1]), rhs.dtype());
  if (!adjoint) {
    Value y = tri_solve(b, lu, bmm(b, onehot, rhs), true, true, true, false);
    return tri_solve(b, lu, y, true, false, false, false);
  }
  // A^H = U^H L^H P^T: X = P L^-H U^-H B.
  Value y = tri_solve(b, lu, rhs, true, false, false, true);
  y = tri_solve(b, lu, y, true, true, true, true);
  return bmm(b, mT(b, onehot), y);
}

}  // namespace

LU linalg::lu_factor(Builder& b, const Value& a) {
  const int64_t bsz = a.shape()[0], k = std::min(a.shape()[1], a.shape()[2]);
  std::vector<Value> init{a, zeros(b, {ElementType::S32, {bsz, k}}), zeros(b, {ElementType::S32, {bsz}})};
  auto out = for_loop(b, 0, k, 1, init, [](Builder& rb, const Value& kv, std::vector<Value> st) {
    return lu_step(rb, kv, st[0], st[1], st[2]);
  });
  return {out[0], out[1], out[2]};
}

Value linalg::lu_solve(Builder& b, const Value& lu, const Value& piv, const Value& rhs, bool left, bool adjoint) {
  if (left) return lu_solve_left(b, lu, piv, rhs, adjoint);
  return mT(b, b.conjugate(lu_solve_left(b, lu, piv, b.conjugate(mT(b, rhs)), !adjoint)));
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info)
std::vector<Value> linalg_lu_factor_ex(LowerContext& ctx) {
  Builder& b = ctx.b;
  if (!ctx.bool_arg(1, true))
    throw std::invalid_argument("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  const auto& t = ctx.out_types;
  if (has_zero_size({t.at(0)})) return {zeros(b, t[0]), zeros(b, t[1]), zeros(b, t[2])};
  LU f = lu_factor(b, flatten_batch(b, ctx.tensor(0), Complex::Computes));
  return {reshape_as(b, f.lu, t[0]), reshape_as(b, f.piv, t[1]), reshape_as(b, f.info, t[2])};
}

namespace {

// P, L, U of lu_unpack from [B, m, n] factors and pivots, into `types`.
std::vector<Value> unpack(Builder& b, const Value& lu, const Value& piv, const std::vector<TensorType>& types,
                          bool unpack_data, bool unpack_pivots) {
  const int64_t bsz = lu.shape()[0], m = lu.shape()[1], n = lu.shape()[2], k = std::min(m, n);
  std::vector<Value> out;
  if (unpack_pivots && types[0].numel() > 0) {
    out.push_back(reshape_as(b, mT(b, perm_rows(b, permutation_of(b, piv, m), lu.dtype())), types[0]));
  } else {
    out.push_back(zeros(b, types[0]));
  }
  if (unpack_data && types[1].numel() > 0) {
    Value l = b.slice(lu, {0, 0, 0}, {bsz, m, k}, {1, 1, 1});
    l = b.binary("add", triangle(b, l, true, -1), eye(b, l.shape(), l.dtype()));
    Value u = triangle(b, b.slice(lu, {0, 0, 0}, {bsz, k, n}, {1, 1, 1}), false, 0);
    out.push_back(reshape_as(b, l, types[1]));
    out.push_back(reshape_as(b, u, types[2]));
  } else {
    out.push_back(zeros(b, types[1]));
    out.push_back(zeros(b, types[2]));
  }
  return out;
}

}  // namespace

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U)
std::vector<Value> lu_unpack(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& lu = ctx.tensor(0);
  if (lu.type.numel() == 0) {
    return {identity_of(b, ctx.out_types[0]), zeros(b, ctx.out_types[1]), zeros(b, ctx.out_types[2])};
  }
  Value piv = b.reshape(b.convert(ctx.tensor(1), ElementType::S32),
                        {product(batch_of(lu.shape())), ctx.tensor(1).shape().back()});
  return unpack(b, flatten_batch(b, lu, Complex::Computes), piv, ctx.out_types, ctx.bool_arg(2, true),
                ctx.bool_arg(3, true));
}

// linalg_lu(A, *, pivot) -> (P, L, U)
std::vector<Value> linalg_lu(LowerContext& ctx) {
  Builder& b = ctx.b;
  if (!ctx.bool_arg(1, true))
    throw std::invalid_argument("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  const Value& a = ctx.tensor(0);
  if (a.type.numel() == 0) {
    return {identity_of(b, ctx.out_types[0]), zeros(b, ctx.out_types[1]), zeros(b, ctx.out_types[2])};
  }
  LU f = lu_factor(b, flatten_batch(b, a, Complex::Computes));
  return unpack(b, f.lu, f.piv, ctx.out_types, true, true);
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint)
std::vector<Value> linalg_lu_solve(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const Shape batch = batch_of(out.shape);
  Value lu = batched_to(b, ctx.tensor(0), batch, Complex::Computes);
  const Value& p = ctx.tensor(1);
  Value piv = b.reshape(b.broadcast_to(b.convert(p, ElementType::S32), concat(batch, {p.shape().back()})),
                        {product(batch), p.shape().back()});
  Value rhs = batched_to(b, ctx.tensor(2), batch, Complex::Computes);
  return {reshape_as(b, lu_solve(b, lu, piv, rhs, ctx.bool_arg(3, true), ctx.bool_arg(4)), out)};
}

namespace {

// (-1)^(number of actual row swaps), [B] f32.
Value permutation_sign(Builder& b, const Value& piv) {
  Value one_based = b.binary("add", iota(b, piv.shape(), 1), b.splat(1, {ElementType::S64, piv.shape()}));
  Value swapped = cmp(b, b.convert(piv, ElementType::S64), one_based, CompareDirection::NE);
  Value flips = b.convert(swapped, ElementType::F32);  // exact: the product is +-1
  Value factors = b.binary("subtract", b.splat(1, flips.type), b.binary("multiply", b.splat(2, flips.type), flips));
  return b.reduce(factors, b.constant(1, ElementType::F32), {1}, "multiply");
}

// The LU factors _linalg_det and _linalg_slogdet return, which their
// backward formulas read: PyTorch factors A^T when A is contiguous and real
// (det(A^T) = det(A); linalg_det_backward checks A.is_contiguous() to know
// which) and A otherwise.
LU det_factors(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  return lu_factor(b, ctx.args[0].contiguous && !hlo::is_complex(a.dtype()) ? mT(b, a) : a);
}

}  // namespace

// _linalg_det(A) -> (det, LU, pivots)
std::vector<Value> linalg_det(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  if (t[1].numel() == 0) return {full(b, 1, t[0]), zeros(b, t[1]), zeros(b, t[2])};
  LU f = det_factors(ctx);
  const ElementType dtype = f.lu.dtype();
  Value d = b.reduce(diagonal(b, f.lu), b.constant(1, dtype), {1}, "multiply");
  Value det = b.binary("multiply", d, b.convert(permutation_sign(b, f.piv), dtype));
  return {reshape_as(b, det, t[0]), reshape_as(b, f.lu, t[1]), reshape_as(b, f.piv, t[2])};
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots)
std::vector<Value> linalg_slogdet(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  if (t[2].numel() == 0) return {full(b, 1, t[0]), zeros(b, t[1]), zeros(b, t[2]), zeros(b, t[3])};
  LU f = det_factors(ctx);
  Value d = diagonal(b, f.lu);
  // sign: a real number's sign, a complex number's d / |d| (stablehlo.sign's)
  Value sign = b.reduce(b.unary("sign", d), b.constant(1, d.dtype()), {1}, "multiply");
  sign = b.binary("multiply", sign, b.convert(permutation_sign(b, f.piv), d.dtype()));
  Value logabs = b.reduce(b.unary("log", b.unary("abs", d)), b.constant(0, real_type(d)), {1}, "add");
  return {reshape_as(b, sign, t[0]), reshape_as(b, logabs, t[1]), reshape_as(b, f.lu, t[2]),
          reshape_as(b, f.piv, t[3])};
}

}  // namespace torch_tpu::lower
