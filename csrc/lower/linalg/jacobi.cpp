// The symmetric (Hermitian) eigenproblem and the SVD by cyclic Jacobi
// rotations: linalg_eigh, linalg_svd.
#include "lower/linalg.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "lower/common/reduction.h"
#include "lower/linalg/common.h"
#include "lower/linalg/qr.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

// Jacobi rotations converge to full float32 accuracy (at least LAPACK's);
// sweeps over all pairs (p, q) repeat until the off-diagonal part (eigh) or
// the column inner products (SVD, one-sided) are negligible. Results are
// sorted as LAPACK returns them (eigenvalues ascending, singular values
// descending); eigenvector and singular vector signs are unspecified, as in
// PyTorch.
namespace {

constexpr int64_t kMaxSweeps = 20;

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
  return {b.constant_indices(ps), b.constant_indices(qs), static_cast<int64_t>(ps.size())};
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

}  // namespace torch_tpu::lower
