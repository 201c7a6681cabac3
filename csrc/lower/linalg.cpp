// Linear algebra in the input's precision: float32 or float64, and complex64
// or complex128; half types compute in float32. LAPACK's conventions (what
// PyTorch's CPU kernels return): Cholesky and triangular solves map to
// stablehlo.cholesky and stablehlo.triangular_solve; LU with partial pivoting
// (getrf), Householder QR (geqrf/orgqr) and Bunch-Kaufman LDL^T (sytrf/sytrs,
// and hetrf/hetrs for Hermitian complex matrices) are stablehlo.while
// loops over the columns; solvers, inverses and determinants are built from
// those. Batch dims are flattened to one leading dim B. Loop bodies select
// with row/column masks instead of slicing at a loop-variable index, so every
// step has static shapes. Singular or non-positive-definite inputs report
// through the `info` results (PyTorch's *_ex ops); the non-_ex ops check info
// on the host.
#include "lower/linalg.h"

#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// PyTorch's CPU kernels compute in full float32.
constexpr const char* kPrecision = "HIGHEST";

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

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
ElementType compute_type(ElementType t) {
  switch (t) {
    case ElementType::F64:
    case ElementType::C64:
    case ElementType::C128:
      return t;
    default:
      return ElementType::F32;
  }
}

// [..., m, n] as [B, m, n], in its compute_type.
Value flatten_batch(Builder& b, const Value& v, Complex complex = Complex::Raises) {
  const bool is_complex = hlo::is_complex(v.dtype());
  if (is_complex && complex == Complex::Raises)  // never drop an imaginary part
    throw NotImplementedForDtype("linalg on tpu: complex matrices are not supported");
  const int64_t m = v.shape()[v.rank() - 2], n = v.shape()[v.rank() - 1];
  return b.reshape(b.convert(v, compute_type(v.dtype())), {product(batch_of(v.shape())), m, n});
}

// The real type of a matrix's magnitudes, norms and singular values.
ElementType real_type(const Value& v) { return hlo::complex_part_type(v.dtype()); }

// float64's (and complex128's) tolerance where a loop stops on float32's.
bool is_double(const Value& v) { return real_type(v) == ElementType::F64; }

// Matrices `v` ([..., m, n]) broadcast to batch dims `batch`, as [B, m, n].
Value batched_to(Builder& b, const Value& v, const Shape& batch, Complex complex = Complex::Raises) {
  const int64_t m = v.shape()[v.rank() - 2], n = v.shape()[v.rank() - 1];
  return flatten_batch(b, b.broadcast_to(v, concat(batch, {m, n})), complex);
}

// Matrix arguments 0 and 1 broadcast to the batch dims of result 0, as
// [B, m, n] each (the solvers' coefficient and right-hand side).
std::pair<Value, Value> batched_arguments(LowerContext& ctx, Complex complex = Complex::Raises) {
  const Shape batch = batch_of(ctx.out_types.at(0).shape);
  return {batched_to(ctx.b, ctx.tensor(0), batch, complex), batched_to(ctx.b, ctx.tensor(1), batch, complex)};
}

Value iota(Builder& b, const Shape& shape, int64_t dim) { return b.iota({ElementType::S64, shape}, dim); }

Value bcast(Builder& b, const Value& scalar, const Shape& shape) { return b.broadcast_in_dim(scalar, shape, {}); }

// A [B] (or [B, x]) value broadcast along trailing dims to `shape`.
Value bcast_lead(Builder& b, const Value& v, const Shape& shape) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.rank(); ++i) dims.push_back(i);
  return b.broadcast_in_dim(v, shape, dims);
}

Value cmp(Builder& b, const Value& x, const Value& y, CompareDirection dir) { return b.compare(x, y, dir); }

Value both(Builder& b, const Value& x, const Value& y) { return b.binary("and", x, y); }

// Sum over `dim` of v where mask holds: an exact pick when one element does.
Value masked_sum(Builder& b, const Value& v, const Value& mask, int64_t dim) {
  return b.reduce(b.select(mask, v, zeros(b, v.type)), b.constant(0, v.dtype()), {dim}, "add");
}

// Sum over dims of |v|^2, real.
Value squared_magnitude_sum(Builder& b, const Value& v, const std::vector<int64_t>& dims) {
  Value sq = squared_magnitude(b, v);
  return b.reduce(sq, b.constant(0, sq.dtype()), dims, "add");
}

Value mT(Builder& b, const Value& v) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < v.rank(); ++i) perm.push_back(i);
  std::swap(perm[v.rank() - 1], perm[v.rank() - 2]);
  return b.transpose(v, perm);
}

// [B, m, k] @ [B, k, n]
Value bmm(Builder& b, const Value& x, const Value& y) {
  return b.dot_general(x, y, {0}, {0}, {2}, {1}, {x.dtype(), {x.shape()[0], x.shape()[1], y.shape()[2]}}, kPrecision);
}

// Keep the triangle col - row <= diag (lower) or >= diag (upper), zero elsewhere.
Value triangle(Builder& b, const Value& v, bool lower, int64_t diag) {
  const Shape& s = v.shape();
  Value offset = b.binary("subtract", iota(b, s, v.rank() - 1), iota(b, s, v.rank() - 2));
  Value d = b.splat(static_cast<double>(diag), offset.type);
  return b.select(cmp(b, offset, d, lower ? CompareDirection::LE : CompareDirection::GE), v, zeros(b, v.type));
}

Value eye(Builder& b, const Shape& shape, ElementType dtype) {
  const int64_t r = static_cast<int64_t>(shape.size());
  Value on = cmp(b, iota(b, shape, r - 2), iota(b, shape, r - 1), CompareDirection::EQ);
  return b.convert(on, dtype);
}

// The diagonal of [B, m, n] as [B, min(m, n)].
Value diagonal(Builder& b, const Value& v) {
  const int64_t k = std::min(v.shape()[1], v.shape()[2]);
  Value sq = b.slice(v, {0, 0, 0}, {v.shape()[0], k, k}, {1, 1, 1});
  Value on = cmp(b, iota(b, sq.shape(), 1), iota(b, sq.shape(), 2), CompareDirection::EQ);
  return masked_sum(b, sq, on, 2);
}

Value tri_solve(Builder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit, bool transpose) {
  return b.triangular_solve(a, rhs, left, lower, unit, transpose);
}

// The scalar loop counter as a value of `shape` (for masks).
Value counter(Builder& b, const Value& k, const Shape& shape) { return bcast(b, k, shape); }

Value next_counter(Builder& b, const Value& k, int64_t step = 1) {
  return b.binary("add", k, b.constant_int(step, ElementType::S64));
}

// for k in [from, to) (step ±1) over `state`; body gets k first.
std::vector<Value> for_loop(Builder& b, int64_t from, int64_t to, int64_t step, std::vector<Value> state,
                            const std::function<std::vector<Value>(Builder&, const Value&, std::vector<Value>)>& body) {
  if ((step > 0 && from >= to) || (step < 0 && from <= to)) return state;
  state.insert(state.begin(), b.constant_int(from, ElementType::S64));
  std::vector<Value> out = b.while_loop(
      state,
      [&](Builder& rb, const std::vector<Value>& s) {
        return std::vector<Value>{rb.compare(s[0], rb.constant_int(to, ElementType::S64),
                                             step > 0 ? CompareDirection::LT : CompareDirection::GT)};
      },
      [&](Builder& rb, const std::vector<Value>& s) {
        std::vector<Value> next = body(rb, s[0], std::vector<Value>(s.begin() + 1, s.end()));
        next.insert(next.begin(), next_counter(rb, s[0], step));
        return next;
      });
  return std::vector<Value>(out.begin() + 1, out.end());
}

// ---- LU with partial pivoting (LAPACK getrf) -------------------------------
struct LU {
  Value lu;    // [B, m, n]: unit-lower L below the diagonal, U on and above
  Value piv;   // [B, min(m, n)] s32, 1-based rows swapped with, as LAPACK
  Value info;  // [B] s32: 1-based index of the first zero pivot, or 0
};

// The magnitude getrf pivots by: |x|, and |re| + |im| for complex x (icamax's).
Value pivot_magnitude(Builder& b, const Value& x) {
  if (!hlo::is_complex(x.dtype())) return b.unary("abs", x);
  return b.binary("add", b.unary("abs", b.real(x)), b.unary("abs", b.imag(x)));
}

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

LU lu_factor(Builder& b, const Value& a) {
  const int64_t bsz = a.shape()[0], k = std::min(a.shape()[1], a.shape()[2]);
  std::vector<Value> init{a, zeros(b, {ElementType::S32, {bsz, k}}), zeros(b, {ElementType::S32, {bsz}})};
  auto out = for_loop(b, 0, k, 1, init, [](Builder& rb, const Value& kv, std::vector<Value> st) {
    return lu_step(rb, kv, st[0], st[1], st[2]);
  });
  return {out[0], out[1], out[2]};
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

// onehot[b, i, j] = (perm[b, i] == j): onehot @ X = X[perm], onehot^T = P.
Value perm_rows(Builder& b, const Value& perm, ElementType dtype) {
  const int64_t bsz = perm.shape()[0], m = perm.shape()[1];
  Shape s{bsz, m, m};
  return b.convert(cmp(b, b.broadcast_in_dim(perm, s, {0, 1}), iota(b, s, 2), CompareDirection::EQ), dtype);
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

// X A = B is A^T X^T = B^T, and A^T Y = C is A^H conj(Y) = conj(C);
// X A^H = B is A conj(X^T) = conj(B^T). (conj is the identity for real A.)
Value lu_solve(Builder& b, const Value& lu, const Value& piv, const Value& rhs, bool left, bool adjoint) {
  if (left) return lu_solve_left(b, lu, piv, rhs, adjoint);
  return mT(b, b.conjugate(lu_solve_left(b, lu, piv, b.conjugate(mT(b, rhs)), !adjoint)));
}

Value reshape_as(Builder& b, const Value& v, const TensorType& t) { return b.convert(b.reshape(v, t.shape), t.dtype); }

// An empty input's P (lu) or full U / Vh (svd) is the identity; results the
// op was asked not to compute are empty.
Value identity_of(Builder& b, const TensorType& t) {
  if (t.numel() == 0 || t.rank() < 2) return zeros(b, t);
  return coerce(b, eye(b, t.shape, ElementType::F32), t);
}

bool has_zero_size(const std::vector<TensorType>& types) {
  for (const auto& t : types) {
    if (t.numel() == 0) return true;
  }
  return false;
}

}  // namespace

// ---- Matrix exponential ----------------------------------------------------------
namespace {

// PyTorch's matrix_exp (aten/src/ATen/native/LinearAlgebra.cpp, after Bader,
// Blanes and Casas 2019): per matrix, the optimized Taylor polynomial T_d of
// the least degree d in {1, 2, 4, 8, 12} whose bound on the 1-norm holds,
// else T_18 of A / 2^s squared s times. Every polynomial is computed for
// every matrix and the norm selects one, so the choice needs no host.
// The bounds are float32's, or float64's for float64 and complex128 (as
// PyTorch's thetas_float and thetas_double).
constexpr double kExpThetasFloat[6] = {1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
                                       5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00};
constexpr double kExpThetasDouble[6] = {2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
                                        4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00};

// The constant c broadcast to v's shape and type.
Value scalar_like(Builder& b, double c, const Value& v) { return b.splat(c, v.type); }

// sum_j coeffs[j] * powers[j] (PyTorch's _compute_linear_combination), with
// the coefficients rounded to float32 as ATen's float kernels round them.
Value linear_combination(Builder& b, const std::vector<Value>& powers, const std::vector<double>& coeffs) {
  Value acc = zeros(b, powers[0].type);
  for (size_t j = 0; j < coeffs.size(); ++j) {
    acc = b.binary("add", acc, b.binary("multiply", scalar_like(b, coeffs[j], powers[j]), powers[j]));
  }
  return acc;
}

Value add(Builder& b, const Value& x, const Value& y) { return b.binary("add", x, y); }

Value taylor_t1(Builder& b, const Value& i, const Value& a) { return add(b, i, a); }

Value taylor_t2(Builder& b, const Value& i, const Value& a, const Value& a2) {
  return add(b, add(b, i, a), b.binary("divide", a2, scalar_like(b, 2, a2)));
}

// I + A + A^2 (I / 2 + A / 6 + A^2 / 24)
Value taylor_t4(Builder& b, const Value& i, const Value& a, const Value& a2) {
  Value inner = linear_combination(b, {i, a, a2}, {1 / 2.0, 1 / 6.0, 1 / 24.0});
  return linear_combination(b, {i, a, a2, bmm(b, a2, inner)}, {1.0, 1.0, 0.0, 1.0});
}

Value taylor_t8(Builder& b, const Value& i, const Value& a, const Value& a2) {
  const float sqrt_177 = 0.1330413469565007072504e+2f;
  const float x3 = 2. / 3.;
  const float x1 = x3 * ((1. + sqrt_177) / 88.);
  const float x2 = x3 * ((1. + sqrt_177) / 352.);
  const float x4 = (-271. + 29. * sqrt_177) / (315. * x3);
  const float x5 = (-11. + 11. * sqrt_177) / (1260. * x3);
  const float x6 = (-99. + 11. * sqrt_177) / (5040. * x3);
  const float x7 = (89. - sqrt_177) / (5040. * x3);
  const float y2 = (857. - 58. * sqrt_177) / 630.;
  Value a4 = bmm(b, a2, linear_combination(b, {a, a2}, {x1, x2}));
  Value a8 =
      bmm(b, linear_combination(b, {a2, a4}, {x3, 1.0}), linear_combination(b, {i, a, a2, a4}, {x4, x5, x6, x7}));
  return linear_combination(b, {i, a, a2, a4, a8}, {1.0, 1.0, y2, 0.0, 1.0});
}

Value taylor_t12(Builder& b, const Value& i, const Value& a, const Value& a2, const Value& a3) {
  static const std::vector<std::vector<double>> c = {
      {9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740},
      {5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989},
      {0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230},
      {-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359}};
  std::vector<Value> bs;
  for (const auto& row : c) bs.push_back(linear_combination(b, {i, a, a2, a3}, row));
  Value a6 = add(b, bs[2], bmm(b, bs[3], bs[3]));
  return add(b, bs[0], bmm(b, add(b, bs[1], a6), a6));
}

Value taylor_t18(Builder& b, const Value& i, const Value& a) {
  static const std::vector<std::vector<double>> c = {
      {0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.},
      {0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
       -6.37898194594723280150e-04},
      {-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02, -6.98210122488052056106e-03,
       3.34975017086070470649e-05},
      {-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02, 2.95552570429315521194e-02,
       -1.39180257516060693404e-05},
      {0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05}};
  Value a2 = bmm(b, a, a), a3 = bmm(b, a2, a), a6 = bmm(b, a3, a3);
  std::vector<Value> bs;
  for (const auto& row : c) bs.push_back(linear_combination(b, {i, a, a2, a3, a6}, row));
  Value a9 = add(b, bs[3], bmm(b, bs[0], bs[4]));
  return add(b, bs[1], bmm(b, add(b, bs[2], a9), a9));
}

// T_18 of a / 2^s squared s times, s = max(0, ceil(log2(norm / theta_18)))
// per matrix; the loop runs the largest s and squares each matrix only while
// its own s lasts.
Value scaled_and_squared_t18(Builder& b, const Value& i, const Value& a, const Value& norm, const double* thetas) {
  const Shape& s3 = a.shape();
  const Shape bs{s3[0]};
  Value ratio = b.binary("divide", norm, scalar_like(b, thetas[5], norm));
  Value s = b.unary("ceil", b.binary("divide", b.unary("log", ratio), scalar_like(b, std::log(2.0), ratio)));
  // log / log 2 may round across an integer: s is the least integer with ratio <= 2^s.
  Value two = scalar_like(b, 2, s);
  Value one = scalar_like(b, 1, s);
  s = b.select(cmp(b, ratio, b.binary("power", two, b.binary("subtract", s, one)), CompareDirection::LE),
               b.binary("subtract", s, one), s);
  s = b.select(cmp(b, ratio, b.binary("power", two, s), CompareDirection::GT), b.binary("add", s, one), s);
  s = b.binary("maximum", zeros(b, s.type), s);
  Value scaled = b.binary("divide", a, b.broadcast_in_dim(b.convert(b.binary("power", two, s), a.dtype()), s3, {0}));
  Value steps = b.convert(s, ElementType::S64);
  Value most = b.reduce(steps, reduce_init(b, "maximum", ElementType::S64), {0}, "maximum");
  std::vector<Value> init{b.constant_int(0, ElementType::S64), taylor_t18(b, i, scaled)};
  auto out = b.while_loop(
      init,
      [&](Builder& rb, const std::vector<Value>& st) {
        return std::vector<Value>{rb.compare(st[0], most, CompareDirection::LT)};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        Value more = cmp(rb, counter(rb, st[0], bs), steps, CompareDirection::LT);
        Value squared = rb.select(bcast_lead(rb, more, s3), bmm(rb, st[1], st[1]), st[1]);
        return std::vector<Value>{next_counter(rb, st[0]), squared};
      });
  return out[1];
}

}  // namespace

// linalg_matrix_exp(A)
std::vector<Value> linalg_matrix_exp(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& t = ctx.out_types.at(0);
  if (t.numel() == 0) return {zeros(b, t)};
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  if (t.shape.back() == 1) return {reshape_as(b, b.unary("exponential", a), t)};
  const Shape& s3 = a.shape();
  const double* thetas = is_double(a) ? kExpThetasDouble : kExpThetasFloat;
  Value i = eye(b, s3, a.dtype());
  Value norm = b.reduce(b.reduce(b.unary("abs", a), b.constant(0, real_type(a)), {1}, "add"),
                        reduce_init(b, "maximum", real_type(a)), {1}, "maximum");
  Value a2 = bmm(b, a, a), a3 = bmm(b, a2, a);
  const std::vector<Value> candidates{taylor_t1(b, i, a), taylor_t2(b, i, a, a2), taylor_t4(b, i, a, a2),
                                      taylor_t8(b, i, a, a2), taylor_t12(b, i, a, a2, a3)};
  // As CPU: norm in (theta_{k-1}, theta_k] takes T_k; norm >= theta_12 T_18.
  Value result = scaled_and_squared_t18(b, i, a, norm, thetas);
  Value large = cmp(b, norm, scalar_like(b, thetas[4], norm), CompareDirection::GE);
  for (int k = 4; k >= 0; --k) {
    Value upper = cmp(b, norm, scalar_like(b, thetas[k], norm), CompareDirection::LE);
    Value in = k == 0 ? upper : both(b, upper, cmp(b, norm, scalar_like(b, thetas[k - 1], norm), CompareDirection::GT));
    in = both(b, in, b.unary("not", large));
    result = b.select(bcast_lead(b, in, s3), candidates[k], result);
  }
  return {reshape_as(b, result, t)};
}

// ---- Cholesky ------------------------------------------------------------------
namespace {

// potrf's info: the order of the first leading minor that is not positive
// definite. XLA's cholesky marks a failure only by NaNs everywhere, so where
// some matrix failed, an unblocked Cholesky of the lower triangle finds the
// step (the loop runs no iteration when all succeeded).
Value cholesky_info(Builder& b, const Value& a, const Value& failed) {
  const Shape& s = a.shape();
  const int64_t bsz = s[0], n = s[1];
  // The Hermitian (for real a, symmetric) matrix the lower triangle stands for.
  Value sym = b.binary("add", triangle(b, a, true, 0), b.conjugate(mT(b, triangle(b, a, true, -1))));
  std::vector<Value> init{b.constant_int(0, ElementType::S64), sym, zeros(b, {ElementType::S32, {bsz}})};
  auto out = b.while_loop(
      init,
      [&](Builder& rb, const std::vector<Value>& st) {
        Value more = rb.compare(st[0], rb.constant_int(n, ElementType::S64), CompareDirection::LT);
        return std::vector<Value>{
            rb.binary("and", more, rb.reduce(failed, rb.constant(0, ElementType::Pred), {0}, "or"))};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        const Value& k = st[0];
        Value ri = iota(rb, s, 1), ci = iota(rb, s, 2), kb = counter(rb, k, s);
        Value col = masked_sum(rb, st[1], cmp(rb, ci, kb, CompareDirection::EQ), 2);  // [B, n]
        Value d =
            masked_sum(rb, col, cmp(rb, iota(rb, {bsz, n}, 1), counter(rb, k, {bsz, n}), CompareDirection::EQ), 1);
        Value d_real = rb.real(d);  // a Hermitian matrix's diagonal is real
        Value ok = cmp(rb, d_real, zeros(rb, d_real.type), CompareDirection::GT);
        Value first = both(rb, rb.unary("not", ok), cmp(rb, st[2], zeros(rb, st[2].type), CompareDirection::EQ));
        Value k1 = rb.convert(next_counter(rb, k), ElementType::S32);
        Value info = rb.select(first, bcast(rb, k1, {bsz}), st[2]);
        Value l =
            rb.binary("divide", col, bcast_lead(rb, rb.unary("sqrt", rb.select(ok, d, rb.splat(1, d.type))), {bsz, n}));
        Value trailing = both(rb, cmp(rb, ri, kb, CompareDirection::GT), cmp(rb, ci, kb, CompareDirection::GT));
        Value outer =
            rb.binary("multiply", rb.broadcast_in_dim(l, s, {0, 1}), rb.broadcast_in_dim(rb.conjugate(l), s, {0, 2}));
        Value next = rb.select(trailing, rb.binary("subtract", st[1], outer), st[1]);
        return std::vector<Value>{next_counter(rb, k), next, info};
      });
  return out[2];
}

}  // namespace

// linalg_cholesky_ex(self, *, upper, check_errors) -> (L, info)
std::vector<Value> linalg_cholesky_ex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& lt = ctx.out_types.at(0);
  const TensorType& it = ctx.out_types.at(1);
  if (lt.numel() == 0) return {zeros(b, lt), zeros(b, it)};
  // A = L L^H: stablehlo.cholesky reads the lower triangle as Hermitian.
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  Value l = triangle(b, b.op("cholesky", {a}, a.type, "lower = true"), true, 0);
  Value d = b.real(diagonal(b, l));
  Value bad = b.unary("not", cmp(b, d, zeros(b, d.type), CompareDirection::GT));  // NaN or <= 0
  Value failed = b.reduce(bad, b.constant(0, ElementType::Pred), {1}, "or");
  // LAPACK leaves a failed factor partial, XLA fills it with NaN: only a
  // successful factor is specified.
  if (ctx.bool_arg(1)) l = b.conjugate(mT(b, l));  // U = L^H
  return {reshape_as(b, l, lt), reshape_as(b, cholesky_info(b, a, failed), it)};
}

// X with A A^H X = B for a lower factor A, A^H A X = B for an upper one
// (A^H is A^T for real A): two triangular solves.
static Value cholesky_solve_with(Builder& b, const Value& factor, const Value& rhs, bool upper) {
  Value y = tri_solve(b, factor, rhs, true, !upper, false, upper);
  return tri_solve(b, factor, y, true, !upper, false, !upper);
}

// _cholesky_solve_helper(self=B, A=factor, upper); cholesky_solve broadcast
// the batch dims already.
std::vector<Value> cholesky_solve_helper(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const auto [rhs, f] = batched_arguments(ctx, Complex::Computes);
  return {reshape_as(b, cholesky_solve_with(b, f, rhs, ctx.bool_arg(2)), out)};
}

// cholesky_inverse(self=factor, upper): (L L^H)^-1.
std::vector<Value> cholesky_inverse(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  Value f = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  return {reshape_as(b, cholesky_solve_with(b, f, eye(b, f.shape(), f.dtype()), ctx.bool_arg(1)), out)};
}

// ---- triangular solves -------------------------------------------------------
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

// ---- LU --------------------------------------------------------------------------
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

// ---- Householder QR (LAPACK geqr2 / org2r) -----------------------------------
namespace {

Value column(Builder& b, const Value& a, const Value& k) {
  return masked_sum(b, a, cmp(b, iota(b, a.shape(), 2), counter(b, k, a.shape()), CompareDirection::EQ), 2);
}

Value entry(Builder& b, const Value& v, const Value& k) {  // v[:, k] of [B, m]
  return masked_sum(b, v, cmp(b, iota(b, v.shape(), 1), counter(b, k, v.shape()), CompareDirection::EQ), 1);
}

// The reflector of column k stored below the diagonal: v[k] = 1, v[i<k] = 0.
Value reflector(Builder& b, const Value& a, const Value& k) {
  Value col = column(b, a, k);
  Value rows = iota(b, col.shape(), 1), kb = counter(b, k, col.shape());
  Value v = b.select(cmp(b, rows, kb, CompareDirection::GT), col, zeros(b, col.type));
  return b.select(cmp(b, rows, kb, CompareDirection::EQ), b.splat(1, col.type), v);
}

// A - tau v (v^H A) on the columns where `cols` holds: H = I - tau v v^H
// from the left (v^H is v^T for real v).
Value apply_reflector(Builder& b, const Value& a, const Value& v, const Value& tau, const Value& cols) {
  const Shape& s = a.shape();
  Value w = b.reduce(b.binary("multiply", b.broadcast_in_dim(b.conjugate(v), s, {0, 1}), a), b.constant(0, a.dtype()),
                     {1}, "add");  // [B, n]
  Value tw = b.binary("multiply", w, bcast_lead(b, tau, w.shape()));
  Value upd = b.binary("subtract", a,
                       b.binary("multiply", b.broadcast_in_dim(v, s, {0, 1}), b.broadcast_in_dim(tw, s, {0, 2})));
  return b.select(cols, upd, a);
}

// slarfg (clarfg for complex) on column k: beta = -sign(re alpha) *
// ||(alpha, x)||, real; tau = (beta - alpha) / beta; x scaled by 1 / (alpha -
// beta); tau = 0 when x is zero (and, complex, alpha real). geqr2 applies
// H^H = I - conj(tau) v v^H to the trailing columns.
std::vector<Value> geqr2_step(Builder& b, const Value& k, const Value& a, const Value& taus) {
  const Shape& s = a.shape();
  const int64_t bsz = s[0], m = s[1];
  Value col = column(b, a, k);
  Value rows = iota(b, {bsz, m}, 1), km = counter(b, k, {bsz, m});
  Value below = cmp(b, rows, km, CompareDirection::GT), at_k = cmp(b, rows, km, CompareDirection::EQ);
  Value alpha = entry(b, col, k);
  Value x = b.select(below, col, zeros(b, col.type));
  Value xnorm2 = squared_magnitude_sum(b, x, {1});
  Value alpha_re = b.real(alpha), alpha_im = b.imag(alpha);
  const TensorType part = alpha_re.type;
  Value trivial = both(b, cmp(b, xnorm2, zeros(b, part), CompareDirection::EQ),
                       cmp(b, alpha_im, zeros(b, part), CompareDirection::EQ));
  Value norm = b.unary("sqrt", b.binary("add",
                                        b.binary("add", b.binary("multiply", alpha_re, alpha_re),
                                                 b.binary("multiply", alpha_im, alpha_im)),
                                        xnorm2));
  Value nonneg = cmp(b, alpha_re, zeros(b, part), CompareDirection::GE);
  Value beta = b.convert(b.select(nonneg, b.unary("negate", norm), norm), alpha.dtype());
  Value safe_beta = b.select(trivial, b.splat(1, beta.type), beta);
  Value tau = b.select(trivial, zeros(b, beta.type), b.binary("divide", b.binary("subtract", beta, alpha), safe_beta));
  Value denom = b.select(trivial, b.splat(1, beta.type), b.binary("subtract", alpha, beta));
  Value scale = b.select(trivial, b.splat(1, beta.type), b.binary("divide", b.splat(1, denom.type), denom));
  Value v = b.select(below, b.binary("multiply", x, bcast_lead(b, scale, x.shape())), zeros(b, x.type));
  v = b.select(at_k, b.splat(1, v.type), v);
  Value ci = iota(b, s, 2), kb = counter(b, k, s);
  Value out = apply_reflector(b, a, v, b.conjugate(tau), cmp(b, ci, kb, CompareDirection::GT));
  // Column k: beta on the diagonal (alpha when trivial), v below it.
  Value new_col = b.select(at_k, bcast_lead(b, b.select(trivial, alpha, beta), col.shape()), b.select(below, v, col));
  out = b.select(cmp(b, ci, kb, CompareDirection::EQ), b.broadcast_in_dim(new_col, s, {0, 1}), out);
  const int64_t kk = taus.shape()[1];
  Value tk = cmp(b, iota(b, {bsz, kk}, 1), counter(b, k, {bsz, kk}), CompareDirection::EQ);
  return {out, b.select(tk, bcast_lead(b, tau, taus.shape()), taus)};
}

// geqrf of [B, m, n]: (reflectors and R, tau [B, min(m, n)]).
std::pair<Value, Value> geqrf_of(Builder& b, const Value& a) {
  const int64_t k = std::min(a.shape()[1], a.shape()[2]);
  auto out =
      for_loop(b, 0, k, 1, {a, zeros(b, {a.dtype(), {a.shape()[0], k}})},
               [](Builder& rb, const Value& kv, std::vector<Value> st) { return geqr2_step(rb, kv, st[0], st[1]); });
  return {out[0], out[1]};
}

// Q = H_0 H_1 ... H_{k-1} I[m, cols] (orgqr), k = tau's length.
Value orgqr(Builder& b, const Value& reflectors, const Value& tau, int64_t cols) {
  const int64_t bsz = reflectors.shape()[0], m = reflectors.shape()[1], k = tau.shape()[1];
  Value q = eye(b, {bsz, m, cols}, reflectors.dtype());
  Value all = b.splat(1, {ElementType::Pred, q.shape()});
  auto out = for_loop(b, k - 1, -1, -1, {q}, [&](Builder& rb, const Value& i, std::vector<Value> st) {
    return std::vector<Value>{apply_reflector(rb, st[0], reflector(rb, reflectors, i), entry(rb, tau, i), all)};
  });
  return out[0];
}

}  // namespace

// geqrf(self) -> (a, tau)
std::vector<Value> geqrf(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  if (t[0].numel() == 0) return {zeros(b, t[0]), zeros(b, t[1])};
  auto [a, tau] = geqrf_of(b, flatten_batch(b, ctx.tensor(0), Complex::Computes));
  return {reshape_as(b, a, t[0]), reshape_as(b, tau, t[1])};
}

// linalg_householder_product(input, tau) -> Q [..., m, n]
std::vector<Value> linalg_householder_product(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  Value refl = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  const Value& tau = ctx.tensor(1);
  Value taus = b.reshape(b.convert(tau, refl.dtype()), {refl.shape()[0], tau.shape().back()});
  return {reshape_as(b, orgqr(b, refl, taus, out.shape.back()), out)};
}

// linalg_qr(A, mode) -> (Q, R): "reduced" Q [m, k], R [k, n]; "complete"
// Q [m, m], R [m, n]; "r" no Q.
std::vector<Value> linalg_qr(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  const Value& a = ctx.tensor(0);
  if (a.type.numel() == 0) {
    return {identity_of(b, t[0]), zeros(b, t[1])};
  }
  Value fa = flatten_batch(b, a, Complex::Computes);
  auto [refl, tau] = geqrf_of(b, fa);
  const int64_t bsz = fa.shape()[0], n = fa.shape()[2];
  const int64_t r_rows = t[1].shape[t[1].rank() - 2];
  Value r = triangle(b, b.slice(refl, {0, 0, 0}, {bsz, r_rows, n}, {1, 1, 1}), false, 0);
  Value q = t[0].numel() == 0 ? zeros(b, t[0]) : reshape_as(b, orgqr(b, refl, tau, t[0].shape.back()), t[0]);
  return {q, reshape_as(b, r, t[1])};
}

// ---- symmetric eigenproblem and SVD: cyclic Jacobi ----------------------------
// Jacobi rotations converge to full float32 accuracy (at least LAPACK's);
// sweeps over all pairs (p, q) repeat until the off-diagonal part (eigh) or
// the column inner products (SVD, one-sided) are negligible. Results are
// sorted as LAPACK returns them (eigenvalues ascending, singular values
// descending); eigenvector and singular vector signs are unspecified, as in
// PyTorch.
namespace {

constexpr int64_t kMaxSweeps = 20;

Value index_constant(Builder& b, const std::vector<int64_t>& values) {
  std::string lit = "[";
  for (size_t i = 0; i < values.size(); ++i) lit += (i ? ", " : "") + std::to_string(values[i]);
  lit += "]";
  TensorType t{ElementType::S64, {static_cast<int64_t>(values.size())}};
  return b.op("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

// v[t] of a 1-D constant, as a scalar.
Value element(Builder& b, const Value& v, const Value& t) {
  return masked_sum(b, v, cmp(b, iota(b, v.shape(), 0), counter(b, t, v.shape()), CompareDirection::EQ), 0);
}

// A plane rotation of columns p and q: x_p' = c x_p - s w x_q and x_q' =
// s x_p + c w x_q, c and s real [B]. w [B] is 1 for real matrices; for
// complex ones it is the phase that makes the pair's coupling real first
// (see complex_coupling), so one rotation is W = diag(1, w) [[c, s], [-s, c]],
// unitary.
struct Rotation {
  Value c, s;
  std::optional<Value> phase;
};

Value rotate_columns(Builder& b, const Value& a, const Value& p, const Value& q, const Rotation& r) {
  const Shape& sh = a.shape();
  Value ci = iota(b, sh, 2);
  Value is_p = cmp(b, ci, counter(b, p, sh), CompareDirection::EQ),
        is_q = cmp(b, ci, counter(b, q, sh), CompareDirection::EQ);
  Value xp = b.broadcast_in_dim(masked_sum(b, a, is_p, 2), sh, {0, 1});
  Value xq = b.broadcast_in_dim(masked_sum(b, a, is_q, 2), sh, {0, 1});
  if (r.phase) xq = b.binary("multiply", xq, bcast_lead(b, *r.phase, sh));
  Value cb = bcast_lead(b, b.convert(r.c, a.dtype()), sh), sb = bcast_lead(b, b.convert(r.s, a.dtype()), sh);
  Value np = b.binary("subtract", b.binary("multiply", cb, xp), b.binary("multiply", sb, xq));
  Value nq = b.binary("add", b.binary("multiply", sb, xp), b.binary("multiply", cb, xq));
  return b.select(is_p, np, b.select(is_q, nq, a));
}

// The rotation (c, s) that diagonalizes [[app, apq], [apq, aqq]] (Golub &
// Van Loan's sym.schur2), per batch element; identity where apq == 0.
std::pair<Value, Value> jacobi_rotation(Builder& b, const Value& app, const Value& aqq, const Value& apq) {
  Value zero = cmp(b, apq, zeros(b, apq.type), CompareDirection::EQ);
  Value safe = b.select(zero, b.splat(1, apq.type), apq);
  Value tau = b.binary("divide", b.binary("subtract", aqq, app), b.binary("multiply", b.splat(2, apq.type), safe));
  Value sgn =
      b.select(cmp(b, tau, zeros(b, tau.type), CompareDirection::GE), b.splat(1, tau.type), b.splat(-1, tau.type));
  Value root = b.unary("sqrt", b.binary("add", b.splat(1, tau.type), b.binary("multiply", tau, tau)));
  Value t = b.binary("divide", sgn, b.binary("add", b.unary("abs", tau), root));
  t = b.select(zero, zeros(b, t.type), t);
  Value c = b.unary("rsqrt", b.binary("add", b.splat(1, t.type), b.binary("multiply", t, t)));
  return {c, b.binary("multiply", t, c)};
}

// A pair's coupling g (a_pq of a Hermitian matrix, x_p^H x_q of two
// columns) as (|g|, w): w = conj(g) / |g| (1 where g is 0) turns x_q into w
// x_q, after which the coupling is |g|, real, and the real rotation of
// (app, aqq, |g|) applies. Real couplings need no phase.
std::pair<Value, std::optional<Value>> complex_coupling(Builder& b, const Value& g) {
  if (!hlo::is_complex(g.dtype())) return {g, std::nullopt};
  Value magnitude = b.unary("abs", g);
  Value zero = cmp(b, magnitude, zeros(b, magnitude.type), CompareDirection::EQ);
  Value safe = b.convert(b.select(zero, b.splat(1, magnitude.type), magnitude), g.dtype());
  Value phase = b.select(zero, b.splat(1, g.type), b.binary("divide", b.conjugate(g), safe));
  return {magnitude, phase};
}

// The conjugate transpose of [B, r, c] (the transpose for real matrices).
Value adjoint(Builder& b, const Value& v) { return b.conjugate(mT(b, v)); }

struct Pairs {
  Value p, q;
  int64_t count;
};

Pairs all_pairs(Builder& b, int64_t n) {
  std::vector<int64_t> ps, qs;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t q = p + 1; q < n; ++q) {
      ps.push_back(p);
      qs.push_back(q);
    }
  }
  if (ps.empty()) return {Value{}, Value{}, 0};
  return {index_constant(b, ps), index_constant(b, qs), static_cast<int64_t>(ps.size())};
}

Value entry2(Builder& b, const Value& a, const Value& i, const Value& j) {
  const Shape& sh = a.shape();
  Value m = both(b, cmp(b, iota(b, sh, 1), counter(b, i, sh), CompareDirection::EQ),
                 cmp(b, iota(b, sh, 2), counter(b, j, sh), CompareDirection::EQ));
  return b.reduce(b.select(m, a, zeros(b, a.type)), b.constant(0, a.dtype()), {1, 2}, "add");
}

// Sweeps of `rotate(k_pair_state...)` while `unconverged(state)` holds.
using SweepFn = std::function<std::vector<Value>(Builder&, const Value& p, const Value& q, std::vector<Value>)>;
using TestFn = std::function<Value(Builder&, const std::vector<Value>&)>;

std::vector<Value> jacobi_sweeps(Builder& b, const Pairs& pairs, std::vector<Value> state, const TestFn& unconverged,
                                 const SweepFn& rotate) {
  if (pairs.count == 0) return state;
  state.insert(state.begin(), b.constant_int(0, ElementType::S64));
  auto out = b.while_loop(
      state,
      [&](Builder& rb, const std::vector<Value>& st) {
        Value more = rb.compare(st[0], rb.constant_int(kMaxSweeps, ElementType::S64), CompareDirection::LT);
        return std::vector<Value>{
            rb.binary("and", more, unconverged(rb, std::vector<Value>(st.begin() + 1, st.end())))};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        std::vector<Value> inner(st.begin() + 1, st.end());
        inner = for_loop(rb, 0, pairs.count, 1, inner, [&](Builder& ib, const Value& t, std::vector<Value> s2) {
          return rotate(ib, element(ib, pairs.p, t), element(ib, pairs.q, t), std::move(s2));
        });
        inner.insert(inner.begin(), next_counter(rb, st[0]));
        return inner;
      });
  return std::vector<Value>(out.begin() + 1, out.end());
}

// Sorts [B, n] keys (ascending or descending) and returns (sorted, permutation).
std::pair<Value, Value> sort_with_index(Builder& b, const Value& keys, bool descending) {
  Value idx = iota(b, keys.shape(), 1);
  auto out = b.sort({keys, idx}, 1, /*is_stable=*/true, [&](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{rb.compare(a[0], a[1], descending ? CompareDirection::GT : CompareDirection::LT)};
  });
  return {out[0], out[1]};
}

// Columns of [B, r, n] reordered: result[:, :, j] = v[:, :, perm[j]].
Value permute_columns(Builder& b, const Value& v, const Value& perm) {
  return bmm(b, v, mT(b, perm_rows(b, perm, v.dtype())));
}

// Eigen-decomposition of symmetric (complex: Hermitian) [B, n, n]: (ascending
// real values [B, n], vectors [B, n, n]). Each rotation W makes A's (p, q)
// entry zero in W^H A W.
std::pair<Value, Value> jacobi_eigh(Builder& b, const Value& sym) {
  const int64_t n = sym.shape()[1];
  Value fro2 = squared_magnitude_sum(b, sym, {1, 2});
  // Off-diagonal mass below eps^2 of the whole (1e-15 for float32, whose eps^2
  // is 1.4e-14; 1e-30 for float64's 4.9e-32).
  const double tolerance = is_double(sym) ? 1e-30 : 1e-15;
  Value off_mask = cmp(b, iota(b, sym.shape(), 1), iota(b, sym.shape(), 2), CompareDirection::NE);
  Pairs pairs = all_pairs(b, n);
  auto out = jacobi_sweeps(
      b, pairs, {sym, eye(b, sym.shape(), sym.dtype())},
      [&](Builder& rb, const std::vector<Value>& st) {
        Value off2 = squared_magnitude_sum(rb, rb.select(off_mask, st[0], zeros(rb, st[0].type)), {1, 2});
        Value tol = rb.binary("multiply", fro2, rb.splat(tolerance, fro2.type));
        return any_true(rb, rb.compare(off2, tol, CompareDirection::GT));
      },
      [&](Builder& rb, const Value& p, const Value& q, std::vector<Value> st) {
        auto [coupling, phase] = complex_coupling(rb, entry2(rb, st[0], p, q));
        auto [c, s] = jacobi_rotation(rb, rb.real(entry2(rb, st[0], p, p)), rb.real(entry2(rb, st[0], q, q)), coupling);
        Rotation r{c, s, phase};
        Value a = adjoint(rb, rotate_columns(rb, adjoint(rb, rotate_columns(rb, st[0], p, q, r)), p, q, r));
        return std::vector<Value>{a, rotate_columns(rb, st[1], p, q, r)};
      });
  auto [values, perm] = sort_with_index(b, b.real(diagonal(b, out[0])), false);
  return {values, permute_columns(b, out[1], perm)};
}

// Columns of [B, r, c] that complete the orthonormal columns of u [B, r, k]
// to r columns (via a complete QR of u).
Value complete_basis(Builder& b, const Value& u) {
  const int64_t bsz = u.shape()[0], r = u.shape()[1], k = u.shape()[2];
  if (k >= r) return u;
  auto [refl, tau] = geqrf_of(b, u);
  Value q = orgqr(b, refl, tau, r);
  return b.concatenate({u, b.slice(q, {0, 0, k}, {bsz, r, r}, {1, 1, 1})}, 2);
}

// One-sided Jacobi (Hestenes) SVD of [B, m, n], m >= n: (U [B, m, n], S [B, n]
// descending, real, V [B, n, n]); A = U diag(S) V^H. Each rotation makes
// columns p and q orthogonal.
std::vector<Value> jacobi_svd_tall(Builder& b, const Value& a) {
  const int64_t n = a.shape()[2];
  Pairs pairs = all_pairs(b, n);
  const Shape bs{a.shape()[0]};
  // Columns orthogonal to within float32's eps (float64's: 1e-15).
  const double tolerance = is_double(a) ? 1e-15 : 1e-7;
  auto out = jacobi_sweeps(
      b, pairs, {a, eye(b, {a.shape()[0], n, n}, a.dtype()), b.splat(1, {real_type(a), bs})},
      [&](Builder& rb, const std::vector<Value>& st) {
        return any_true(rb, rb.compare(st[2], rb.splat(tolerance, st[2].type), CompareDirection::GT));
      },
      [&](Builder& rb, const Value& p, const Value& q, std::vector<Value> st) {
        const Shape& sh = st[0].shape();
        Value ci = iota(rb, sh, 2);
        Value up = masked_sum(rb, st[0], cmp(rb, ci, counter(rb, p, sh), CompareDirection::EQ), 2);
        Value uq = masked_sum(rb, st[0], cmp(rb, ci, counter(rb, q, sh), CompareDirection::EQ), 2);
        Value alpha = squared_magnitude_sum(rb, up, {1}), beta = squared_magnitude_sum(rb, uq, {1});
        Value inner = rb.reduce(rb.binary("multiply", rb.conjugate(up), uq), rb.constant(0, up.dtype()), {1}, "add");
        auto [gamma, phase] = complex_coupling(rb, inner);
        auto [c, s] = jacobi_rotation(rb, alpha, beta, gamma);
        // Convergence measure of this sweep: the largest |gamma| / sqrt(alpha beta).
        Value scale = rb.unary("sqrt", rb.binary("multiply", alpha, beta));
        Value rel = rb.select(cmp(rb, scale, zeros(rb, scale.type), CompareDirection::GT),
                              rb.binary("divide", rb.unary("abs", gamma), scale), zeros(rb, scale.type));
        Value first = cmp(rb, p, rb.constant_int(0, ElementType::S64), CompareDirection::EQ);
        Value q1 = cmp(rb, q, rb.constant_int(1, ElementType::S64), CompareDirection::EQ);
        Value reset = bcast(rb, rb.binary("and", first, q1), bs);
        Value conv = rb.select(reset, rel, rb.binary("maximum", st[2], rel));
        Rotation r{c, s, phase};
        return std::vector<Value>{rotate_columns(rb, st[0], p, q, r), rotate_columns(rb, st[1], p, q, r), conv};
      });
  const Shape& sh = out[0].shape();
  Value norms = b.unary("sqrt", squared_magnitude_sum(b, out[0], {1}));
  auto [sv, perm] = sort_with_index(b, norms, true);
  Value safe = b.select(cmp(b, norms, zeros(b, norms.type), CompareDirection::GT), norms, b.splat(1, norms.type));
  Value u = b.binary("divide", out[0], b.broadcast_in_dim(b.convert(safe, out[0].dtype()), sh, {0, 2}));
  return {permute_columns(b, u, perm), sv, permute_columns(b, out[1], perm)};
}

}  // namespace

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors); only the
// UPLO triangle of A is read (and of its diagonal, for complex A, only the
// real part, as LAPACK's heevd).
std::vector<Value> linalg_eigh(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  const Value& a = ctx.tensor(0);
  if (a.type.numel() == 0) return {zeros(b, t[0]), zeros(b, t[1])};
  const bool lower = ctx.has(1) ? ctx.args[1].s != "U" : true;
  Value fa = flatten_batch(b, a, Complex::Computes);
  Value strict = triangle(b, fa, lower, lower ? -1 : 1);
  Value diag = b.convert(b.real(triangle(b, triangle(b, fa, true, 0), false, 0)), fa.dtype());
  Value sym = b.binary("add", b.binary("add", strict, diag), adjoint(b, strict));
  auto [values, vectors] = jacobi_eigh(b, sym);
  Value v = t[1].numel() == 0 ? zeros(b, t[1]) : reshape_as(b, vectors, t[1]);
  return {reshape_as(b, values, t[0]), v};
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh). A wide A
// is factored as its adjoint: A^H = U' S V'^H gives U = V', V = U'.
std::vector<Value> linalg_svd(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  const Value& a = ctx.tensor(0);
  if (a.type.numel() == 0) {
    return {identity_of(b, t[0]), zeros(b, t[1]), identity_of(b, t[2])};
  }
  Value fa = flatten_batch(b, a, Complex::Computes);
  const bool wide = fa.shape()[1] < fa.shape()[2];
  auto usv = jacobi_svd_tall(b, wide ? adjoint(b, fa) : fa);
  Value u = wide ? usv[2] : usv[0], v = wide ? usv[0] : usv[2];
  const bool full = ctx.bool_arg(1);
  if (full) {
    u = complete_basis(b, u);
    v = complete_basis(b, v);
  }
  Value uo = t[0].numel() == 0 ? zeros(b, t[0]) : reshape_as(b, u, t[0]);
  Value vo = t[2].numel() == 0 ? zeros(b, t[2]) : reshape_as(b, adjoint(b, v), t[2]);
  return {uo, reshape_as(b, usv[1], t[1]), vo};
}

// ---- LDL^T with Bunch-Kaufman pivoting (LAPACK sytrf) ------------------------
namespace {

// v[b, index[b]] of v [B, n] and index [B].
Value pick(Builder& b, const Value& v, const Value& index) {
  return masked_sum(b, v, cmp(b, iota(b, v.shape(), 1), bcast_lead(b, index, v.shape()), CompareDirection::EQ), 1);
}

// Column index[b] of each matrix of m [B, n, c], as [B, n].
Value column_at(Builder& b, const Value& m, const Value& index) {
  return masked_sum(b, m, cmp(b, iota(b, m.shape(), 2), bcast_lead(b, index, m.shape()), CompareDirection::EQ), 2);
}

// Row index[b] of each matrix of m [B, n, c], as [B, c].
Value row_at(Builder& b, const Value& m, const Value& index) {
  return masked_sum(b, m, cmp(b, iota(b, m.shape(), 1), bcast_lead(b, index, m.shape()), CompareDirection::EQ), 1);
}

// Rows i and j ([B] each) of m [B, n, c] exchanged.
Value swap_rows(Builder& b, const Value& m, const Value& i, const Value& j) {
  const Shape& s = m.shape();
  Value rows = iota(b, s, 1);
  Value is_i = cmp(b, rows, bcast_lead(b, i, s), CompareDirection::EQ);
  Value is_j = cmp(b, rows, bcast_lead(b, j, s), CompareDirection::EQ);
  Value row_i = b.broadcast_in_dim(row_at(b, m, i), s, {0, 2}), row_j = b.broadcast_in_dim(row_at(b, m, j), s, {0, 2});
  return b.select(is_i, row_j, b.select(is_j, row_i, m));
}

Value scalar_s64(Builder& b, int64_t v, const Shape& shape) {
  return b.broadcast_in_dim(b.constant_int(v, ElementType::S64), shape, {});
}

// x [B, n] along dim `dim` of [B, n, n] (1: x_i, 2: x_j).
Value spread(Builder& b, const Value& x, int64_t dim) {
  const int64_t n = x.shape()[1];
  return b.broadcast_in_dim(x, {x.shape()[0], n, n}, {0, dim});
}

// A Hermitian matrix (chetf2, chetrs) keeps its diagonal real: LAPACK reads
// only the real part of a diagonal entry and writes it back with zero
// imaginary part.
Value real_diagonal(Builder& b, const Value& m) {
  Value on = cmp(b, iota(b, m.shape(), 1), iota(b, m.shape(), 2), CompareDirection::EQ);
  return b.select(on, b.convert(b.real(m), m.dtype()), m);
}

// The full matrix from its lower triangle: the transpose above it (the
// conjugate transpose for a Hermitian one, whose diagonal is real).
Value from_lower(Builder& b, const Value& m, bool hermitian) {
  Value lower = cmp(b, iota(b, m.shape(), 1), iota(b, m.shape(), 2), CompareDirection::GE);
  Value full = b.select(lower, m, hermitian ? b.conjugate(mT(b, m)) : mT(b, m));
  return hermitian ? real_diagonal(b, full) : full;
}

// One step of LAPACK's unblocked ssytf2 (lower) at each matrix's own column
// k[b]: 1x1 and 2x2 pivots make matrices advance by different steps. `a` is
// kept symmetric (the lower triangle mirrored after each step), so the
// pivot search reads rows and columns alike; LAPACK reads only the lower
// triangle, which holds the same numbers. Complex matrices take csytf2's
// steps, or chetf2's when `hermitian` (A = L D L^H): `a` is then kept
// Hermitian, so the symmetric interchange of its rows and columns conjugates
// what chetf2's swaps conjugate, and every update takes the conjugate of the
// row factor.
std::vector<Value> ldl_step(Builder& b, const Value& k, const Value& a, const Value& piv, const Value& info,
                            bool hermitian) {
  const Shape& s = a.shape();
  const int64_t bsz = s[0], n = s[1];
  const Shape vs{bsz, n}, bs{bsz};
  const ElementType t = a.dtype(), r = real_type(a);
  Value ri = iota(b, s, 1), ci = iota(b, s, 2), kb = bcast_lead(b, k, s);
  Value rows = iota(b, vs, 1), kv = bcast_lead(b, k, vs);
  Value active = cmp(b, k, scalar_s64(b, n, bs), CompareDirection::LT);
  Value k1 = b.binary("add", k, scalar_s64(b, 1, bs));
  auto zero = [&](const Shape& shape) { return b.splat(0, {t, shape}); };
  auto as_t = [&](const Value& real) { return b.convert(real, t); };
  auto conj_if_hermitian = [&](const Value& v) { return hermitian ? b.conjugate(v) : v; };
  // A diagonal entry's magnitude: |re| of a Hermitian matrix's (chetf2), else
  // as the column search measures (|re| + |im| for complex, icamax's).
  auto diagonal_magnitude = [&](const Value& x) {
    return hermitian ? b.unary("abs", b.real(x)) : pivot_magnitude(b, x);
  };

  // Pivot choice (Bunch-Kaufman, alpha = (1 + sqrt(17)) / 8 in float).
  Value col = column_at(b, a, k);
  Value absakk = diagonal_magnitude(pick(b, col, k));
  Value below = cmp(b, rows, kv, CompareDirection::GT);
  Value cand = b.select(below, pivot_magnitude(b, col), b.splat(-1, {r, vs}));
  Value colmax = b.binary("maximum", b.reduce(cand, reduce_init(b, "maximum", r), {1}, "maximum"), b.splat(0, {r, bs}));
  // isamax: the first row of largest magnitude.
  Value is_max = both(b, below, cmp(b, cand, bcast_lead(b, colmax, vs), CompareDirection::EQ));
  Value imax = b.reduce(b.select(is_max, rows, scalar_s64(b, n, vs)), reduce_init(b, "minimum", ElementType::S64), {1},
                        "minimum");
  imax = b.select(cmp(b, imax, scalar_s64(b, n, bs), CompareDirection::LT), imax, k);
  Value row = column_at(b, a, imax);  // row imax, by symmetry
  Value off =
      both(b, cmp(b, rows, kv, CompareDirection::GE), cmp(b, rows, bcast_lead(b, imax, vs), CompareDirection::NE));
  Value rowmax = b.binary("maximum",
                          b.reduce(b.select(off, pivot_magnitude(b, row), b.splat(-1, {r, vs})),
                                   reduce_init(b, "maximum", r), {1}, "maximum"),
                          b.splat(0, {r, bs}));
  Value absimax = diagonal_magnitude(pick(b, row, imax));
  const float alpha = (1.0f + std::sqrt(17.0f)) / 8.0f;
  Value alpha_colmax = b.binary("multiply", b.splat(alpha, {r, bs}), colmax);
  Value keep = cmp(b, absakk, alpha_colmax, CompareDirection::GE);
  keep = b.binary(
      "or", keep,
      cmp(b, absakk, b.binary("multiply", alpha_colmax, b.binary("divide", colmax, rowmax)), CompareDirection::GE));
  Value imax_one = cmp(b, absimax, b.binary("multiply", b.splat(alpha, {r, bs}), rowmax), CompareDirection::GE);
  Value zero_column =
      b.binary("or", cmp(b, b.binary("maximum", absakk, colmax), b.splat(0, {r, bs}), CompareDirection::EQ),
               cmp(b, absakk, absakk, CompareDirection::NE));
  Value at_k = b.binary("or", zero_column, keep);
  Value two = both(b, active, both(b, b.unary("not", at_k), b.unary("not", imax_one)));
  Value kp = b.select(at_k, k, imax);
  Value kk = b.select(two, k1, k);

  // Interchange rows and columns kk and kp of the trailing block.
  Value p = b.select(cmp(b, rows, bcast_lead(b, kk, vs), CompareDirection::EQ), bcast_lead(b, kp, vs),
                     b.select(cmp(b, rows, bcast_lead(b, kp, vs), CompareDirection::EQ), bcast_lead(b, kk, vs), rows));
  const Shape cs{bsz, n, n, 1};
  Value coords = b.concatenate({b.reshape(iota(b, s, 0), cs), b.reshape(b.broadcast_in_dim(p, s, {0, 1}), cs),
                                b.reshape(b.broadcast_in_dim(p, s, {0, 2}), cs)},
                               3);
  Value trailing = both(b, cmp(b, ri, kb, CompareDirection::GE), cmp(b, ci, kb, CompareDirection::GE));
  Value a1 = b.select(both(b, trailing, bcast_lead(b, active, s)), b.gather_points(a, coords), a);

  // 1x1 pivot: the rank-1 update of the trailing block (ssyr with -1/d, or
  // cher with x^H), then the column scaled by 1/d.
  Value col_k = column_at(b, a1, k);
  Value d11 = b.binary("divide", b.splat(1, {t, bs}), pick(b, col_k, k));  // d real for a Hermitian matrix
  Value x = b.select(below, col_k, zero(vs));
  Value neg_d11 = b.binary("subtract", zero(bs), d11);
  Value rank1 = b.binary("multiply", spread(b, x, 1),
                         b.binary("multiply", bcast_lead(b, neg_d11, s), spread(b, conj_if_hermitian(x), 2)));
  Value strictly_trailing = both(b, cmp(b, ri, kb, CompareDirection::GT), cmp(b, ci, kb, CompareDirection::GT));
  Value is_col_k = both(b, cmp(b, ci, kb, CompareDirection::EQ), cmp(b, ri, kb, CompareDirection::GT));
  Value one_step = b.select(strictly_trailing, b.binary("add", a1, rank1), a1);
  one_step = b.select(is_col_k, spread(b, b.binary("multiply", x, bcast_lead(b, d11, vs)), 1), one_step);

  // 2x2 pivot (rows k, k + 1): ssytf2's update with wk, wkp1.
  Value col_k1 = column_at(b, a1, b.binary("minimum", k1, scalar_s64(b, n - 1, bs)));
  Value below2 = cmp(b, rows, bcast_lead(b, k1, vs), CompareDirection::GT);
  Value av = b.select(below2, col_k, zero(vs)), cv = b.select(below2, col_k1, zero(vs));
  Value d21 = pick(b, col_k, k1);
  auto per_row = [&](const Value& v) { return bcast_lead(b, v, vs); };
  Value wk, wkp1;
  if (!hermitian) {
    Value d11_2 = b.binary("divide", pick(b, col_k1, k1), d21);
    Value d22 = b.binary("divide", pick(b, col_k, k), d21);
    Value tt = b.binary("divide", b.splat(1, {t, bs}),
                        b.binary("subtract", b.binary("multiply", d11_2, d22), b.splat(1, {t, bs})));
    Value d21_2 = b.binary("divide", tt, d21);
    wk = b.binary("multiply", per_row(d21_2), b.binary("subtract", b.binary("multiply", per_row(d11_2), av), cv));
    wkp1 = b.binary("multiply", per_row(d21_2), b.binary("subtract", b.binary("multiply", per_row(d22), cv), av));
  } else {
    // chetf2: the block's real diagonal over |d21|, and d21 / |d21| of unit modulus.
    Value d = b.unary("abs", d21);
    Value d11_2 = b.binary("divide", b.real(pick(b, col_k1, k1)), d);
    Value d22 = b.binary("divide", b.real(pick(b, col_k, k)), d);
    Value tt = b.binary("divide", b.splat(1, {r, bs}),
                        b.binary("subtract", b.binary("multiply", d11_2, d22), b.splat(1, {r, bs})));
    Value unit = b.binary("divide", d21, as_t(d));
    Value scale = per_row(as_t(b.binary("divide", tt, d)));
    wk = b.binary(
        "multiply", scale,
        b.binary("subtract", b.binary("multiply", per_row(as_t(d11_2)), av), b.binary("multiply", per_row(unit), cv)));
    wkp1 = b.binary("multiply", scale,
                    b.binary("subtract", b.binary("multiply", per_row(as_t(d22)), cv),
                             b.binary("multiply", per_row(b.conjugate(unit)), av)));
  }
  Value two_update = b.binary(
      "subtract", b.binary("subtract", a1, b.binary("multiply", spread(b, av, 1), spread(b, conj_if_hermitian(wk), 2))),
      b.binary("multiply", spread(b, cv, 1), spread(b, conj_if_hermitian(wkp1), 2)));
  Value k1b = bcast_lead(b, k1, s);
  Value trailing2 = both(b, cmp(b, ri, k1b, CompareDirection::GT), cmp(b, ci, k1b, CompareDirection::GT));
  Value two_step = b.select(trailing2, two_update, a1);
  Value below2_m = cmp(b, ri, k1b, CompareDirection::GT);
  two_step = b.select(both(b, below2_m, cmp(b, ci, kb, CompareDirection::EQ)), spread(b, wk, 1), two_step);
  two_step = b.select(both(b, below2_m, cmp(b, ci, k1b, CompareDirection::EQ)), spread(b, wkp1, 1), two_step);

  Value one = both(b, active, both(b, b.unary("not", two), b.unary("not", zero_column)));
  Value next = b.select(bcast_lead(b, one, s), one_step, b.select(bcast_lead(b, two, s), two_step, a1));
  next = from_lower(b, next, hermitian);

  // ipiv: kp + 1 for a 1x1 pivot, -(kp + 1) twice for a 2x2 one; info: the
  // first zero column, 1-based.
  Value kp1 = b.convert(b.binary("add", kp, scalar_s64(b, 1, bs)), ElementType::S32);
  Value neg_kp1 = b.binary("subtract", b.splat(0, kp1.type), kp1);
  Value at_k_pos = both(b, bcast_lead(b, active, vs), cmp(b, rows, kv, CompareDirection::EQ));
  Value at_k1_pos = both(b, bcast_lead(b, two, vs), cmp(b, rows, bcast_lead(b, k1, vs), CompareDirection::EQ));
  Value new_piv = b.select(at_k_pos, bcast_lead(b, b.select(two, neg_kp1, kp1), vs), piv);
  new_piv = b.select(at_k1_pos, bcast_lead(b, neg_kp1, vs), new_piv);
  Value first_zero = both(b, both(b, active, zero_column), cmp(b, info, b.splat(0, info.type), CompareDirection::EQ));
  Value new_info = b.select(first_zero, b.convert(k1, ElementType::S32), info);
  Value step = b.select(two, scalar_s64(b, 2, bs), scalar_s64(b, 1, bs));
  Value new_k = b.select(active, b.binary("add", k, step), k);
  return {new_k, next, new_piv, new_info};
}

// Every matrix's k [B] below n.
Value any_below(Builder& b, const Value& k, int64_t n) {
  return b.reduce(cmp(b, k, scalar_s64(b, n, k.shape()), CompareDirection::LT), b.constant(0, ElementType::Pred), {0},
                  "or");
}

}  // namespace

// linalg_ldl_factor_ex(A, *, hermitian, check_errors) -> (LD, pivots, info):
// LAPACK's sytrf for the lower triangle, as CPU computes it: its unblocked
// ssytf2 (sytrf's own path up to its block size, 64 columns), so LD and the
// pivots are LAPACK's, the strict upper triangle zero. Complex matrices take
// csytrf's steps (A = L D L^T), or chetrf's with hermitian (A = L D L^H, D's
// diagonal real); for real ones hermitian changes nothing.
std::vector<Value> linalg_ldl_factor_ex(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& t = ctx.out_types;
  if (has_zero_size({t.at(0)})) return {zeros(b, t[0]), zeros(b, t[1]), zeros(b, t[2])};
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  const bool hermitian = ctx.bool_arg(1) && hlo::is_complex(a.dtype());
  const int64_t bsz = a.shape()[0], n = a.shape()[1];
  a = from_lower(b, a, hermitian);  // LAPACK reads the lower triangle only
  std::vector<Value> init{zeros(b, {ElementType::S64, {bsz}}), a, zeros(b, {ElementType::S32, {bsz, n}}),
                          zeros(b, {ElementType::S32, {bsz}})};
  auto out = b.while_loop(
      init, [&](Builder& rb, const std::vector<Value>& st) { return std::vector<Value>{any_below(rb, st[0], n)}; },
      [&](Builder& rb, const std::vector<Value>& st) { return ldl_step(rb, st[0], st[1], st[2], st[3], hermitian); });
  return {reshape_as(b, triangle(b, out[1], true, 0), t[0]), reshape_as(b, out[2], t[1]), reshape_as(b, out[3], t[2])};
}

namespace {

// One step of LAPACK's ssytrs (lower), first half: L D X = B, row k[b] on.
// A Hermitian factorization (chetrs) divides by D's real diagonal, and its
// 2x2 blocks hold d21 below the diagonal and conj(d21) above.
std::vector<Value> ldl_forward_step(Builder& b, const Value& k, const Value& x, const Value& ld, const Value& piv,
                                    bool hermitian) {
  const Shape& s = x.shape();
  const int64_t bsz = s[0], n = s[1];
  const Shape vs{bsz, n}, bs{bsz};
  const ElementType t = x.dtype();
  Value active = cmp(b, k, scalar_s64(b, n, bs), CompareDirection::LT);
  Value k1 = b.binary("add", k, scalar_s64(b, 1, bs));
  Value k1c = b.binary("minimum", k1, scalar_s64(b, n - 1, bs));
  Value pk = b.convert(pick(b, b.convert(piv, ElementType::S64), k), ElementType::S64);
  Value one = cmp(b, pk, scalar_s64(b, 0, bs), CompareDirection::GT);
  Value kp =
      b.select(one, b.binary("subtract", pk, scalar_s64(b, 1, bs)), b.binary("subtract", scalar_s64(b, -1, bs), pk));
  Value swapped = swap_rows(b, x, b.select(one, k, k1c), kp);
  Value rows = iota(b, s, 1), kb = bcast_lead(b, k, s), k1b = bcast_lead(b, k1, s);
  Value col_k = column_at(b, ld, k), col_k1 = column_at(b, ld, k1c);
  Value row_k = b.broadcast_in_dim(row_at(b, swapped, k), s, {0, 2});
  Value row_k1 = b.broadcast_in_dim(row_at(b, swapped, k1c), s, {0, 2});
  Value lk = b.broadcast_in_dim(col_k, s, {0, 1}), lk1 = b.broadcast_in_dim(col_k1, s, {0, 1});
  auto minus = [&](const Value& m, const Value& l, const Value& r) {
    return b.binary("add", m, b.binary("multiply", l, b.binary("subtract", zeros(b, r.type), r)));
  };
  // 1x1: eliminate below k, then row k times 1/d.
  Value one_step = b.select(cmp(b, rows, kb, CompareDirection::GT), minus(swapped, lk, row_k), swapped);
  Value dk = pick(b, col_k, k);
  if (hermitian) dk = b.convert(b.real(dk), t);
  Value inv = bcast_lead(b, b.binary("divide", b.splat(1, {t, bs}), dk), s);
  one_step = b.select(cmp(b, rows, kb, CompareDirection::EQ), b.binary("multiply", row_k, inv), one_step);
  // 2x2: eliminate below k + 1 with both columns, then solve the block.
  Value below2 = cmp(b, rows, k1b, CompareDirection::GT);
  Value two_step = b.select(below2, minus(minus(swapped, lk, row_k), lk1, row_k1), swapped);
  Value akm1k = bcast_lead(b, pick(b, col_k, k1c), s);
  Value akm1k_above = hermitian ? b.conjugate(akm1k) : akm1k;
  Value akm1 = b.binary("divide", bcast_lead(b, dk, s), akm1k_above);
  Value ak = b.binary("divide", bcast_lead(b, pick(b, col_k1, k1c), s), akm1k);
  Value denom = b.binary("subtract", b.binary("multiply", akm1, ak), b.splat(1, {t, s}));
  Value bkm1 = b.binary("divide", row_k, akm1k_above), bk = b.binary("divide", row_k1, akm1k);
  Value new_k_row = b.binary("divide", b.binary("subtract", b.binary("multiply", ak, bkm1), bk), denom);
  Value new_k1_row = b.binary("divide", b.binary("subtract", b.binary("multiply", akm1, bk), bkm1), denom);
  two_step = b.select(cmp(b, rows, kb, CompareDirection::EQ), new_k_row, two_step);
  two_step = b.select(cmp(b, rows, k1b, CompareDirection::EQ), new_k1_row, two_step);
  Value next = b.select(bcast_lead(b, active, s), b.select(bcast_lead(b, one, s), one_step, two_step), x);
  Value step = b.select(one, scalar_s64(b, 1, bs), scalar_s64(b, 2, bs));
  return {b.select(active, b.binary("add", k, step), k), next};
}

// Second half: L^T X = B (L^H X = B when hermitian), row k[b] down (k < 0: done).
std::vector<Value> ldl_backward_step(Builder& b, const Value& k, const Value& x, const Value& ld, const Value& piv,
                                     bool hermitian) {
  const Shape& s = x.shape();
  const int64_t bsz = s[0];
  const Shape bs{bsz};
  Value active = cmp(b, k, scalar_s64(b, 0, bs), CompareDirection::GE);
  Value kc = b.binary("maximum", k, scalar_s64(b, 0, bs));
  Value km1 = b.binary("maximum", b.binary("subtract", kc, scalar_s64(b, 1, bs)), scalar_s64(b, 0, bs));
  Value pk = pick(b, b.convert(piv, ElementType::S64), kc);
  Value one = cmp(b, pk, scalar_s64(b, 0, bs), CompareDirection::GT);
  Value kp =
      b.select(one, b.binary("subtract", pk, scalar_s64(b, 1, bs)), b.binary("subtract", scalar_s64(b, -1, bs), pk));
  Value rows = iota(b, s, 1), kb = bcast_lead(b, kc, s);
  Value below = cmp(b, rows, kb, CompareDirection::GT);
  Value trailing = b.select(below, x, zeros(b, x.type));
  // row k -= L[k+1:, k]^T X[k+1:], as sgemv: the products summed, then subtracted.
  auto reduced = [&](const Value& column) {
    Value l = b.broadcast_in_dim(hermitian ? b.conjugate(column) : column, s, {0, 1});
    return b.reduce(b.binary("multiply", l, trailing), b.constant(0, x.dtype()), {1}, "add");  // [B, c]
  };
  Value upd_k = b.binary("subtract", row_at(b, x, kc), reduced(column_at(b, ld, kc)));
  Value upd_km1 = b.binary("subtract", row_at(b, x, km1), reduced(column_at(b, ld, km1)));
  Value updated = b.select(cmp(b, rows, kb, CompareDirection::EQ), b.broadcast_in_dim(upd_k, s, {0, 2}), x);
  Value two_rows = b.select(cmp(b, rows, bcast_lead(b, km1, s), CompareDirection::EQ),
                            b.broadcast_in_dim(upd_km1, s, {0, 2}), updated);
  Value next = b.select(bcast_lead(b, one, s), updated, two_rows);
  next = swap_rows(b, next, kc, kp);
  next = b.select(bcast_lead(b, active, s), next, x);
  Value step = b.select(one, scalar_s64(b, 1, bs), scalar_s64(b, 2, bs));
  return {b.select(active, b.binary("subtract", k, step), k), next};
}

}  // namespace

// linalg_ldl_solve(LD, pivots, B, *, hermitian): LAPACK's sytrs with
// sytrf's factors (lower), each matrix stepping through its own 1x1 and 2x2
// blocks; chetrs's for complex factors with hermitian.
std::vector<Value> linalg_ldl_solve(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& t = ctx.out_types.at(0);
  if (t.numel() == 0) return {zeros(b, t)};
  const Shape batch = batch_of(t.shape);
  Value ld = batched_to(b, ctx.tensor(0), batch, Complex::Computes);
  Value x = batched_to(b, ctx.tensor(2), batch, Complex::Computes);
  const bool hermitian = ctx.bool_arg(3) && hlo::is_complex(ld.dtype());
  const int64_t n = ld.shape()[1];
  Value piv = b.reshape(b.broadcast_to(ctx.tensor(1), concat(batch, {n})), {ld.shape()[0], n});
  const int64_t bsz = ld.shape()[0];
  auto forward = b.while_loop(
      {zeros(b, {ElementType::S64, {bsz}}), x},
      [&](Builder& rb, const std::vector<Value>& st) { return std::vector<Value>{any_below(rb, st[0], n)}; },
      [&](Builder& rb, const std::vector<Value>& st) {
        return ldl_forward_step(rb, st[0], st[1], ld, piv, hermitian);
      });
  auto backward = b.while_loop(
      {scalar_s64(b, n - 1, {bsz}), forward[1]},
      [&](Builder& rb, const std::vector<Value>& st) {
        Value more = cmp(rb, st[0], scalar_s64(rb, 0, {bsz}), CompareDirection::GE);
        return std::vector<Value>{rb.reduce(more, rb.constant(0, ElementType::Pred), {0}, "or")};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        return ldl_backward_step(rb, st[0], st[1], ld, piv, hermitian);
      });
  return {reshape_as(b, backward[1], t)};
}

}  // namespace torch_tpu::lower
