// LDL^T with Bunch-Kaufman pivoting (LAPACK sytrf/sytrs, and hetrf/hetrs for
// Hermitian complex matrices): linalg_ldl_factor_ex, linalg_ldl_solve.
#include "lower/linalg.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "lower/linalg/common.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

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
