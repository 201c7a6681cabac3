// Householder QR (LAPACK geqr2 / org2r) as stablehlo.while loops over the
// columns: geqrf, linalg_householder_product, linalg_qr.
#include "lower/linalg.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "lower/linalg/common.h"
#include "lower/linalg/qr.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

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

}  // namespace

// geqrf of [B, m, n]: (reflectors and R, tau [B, min(m, n)]).
std::pair<Value, Value> linalg::geqrf_of(Builder& b, const Value& a) {
  const int64_t k = std::min(a.shape()[1], a.shape()[2]);
  auto out =
      for_loop(b, 0, k, 1, {a, zeros(b, {a.dtype(), {a.shape()[0], k}})},
               [](Builder& rb, const Value& kv, std::vector<Value> st) { return geqr2_step(rb, kv, st[0], st[1]); });
  return {out[0], out[1]};
}

// Q = H_0 H_1 ... H_{k-1} I[m, cols] (orgqr), k = tau's length.
Value linalg::orgqr(Builder& b, const Value& reflectors, const Value& tau, int64_t cols) {
  const int64_t bsz = reflectors.shape()[0], m = reflectors.shape()[1], k = tau.shape()[1];
  Value q = eye(b, {bsz, m, cols}, reflectors.dtype());
  Value all = b.splat(1, {ElementType::Pred, q.shape()});
  auto out = for_loop(b, k - 1, -1, -1, {q}, [&](Builder& rb, const Value& i, std::vector<Value> st) {
    return std::vector<Value>{apply_reflector(rb, st[0], reflector(rb, reflectors, i), entry(rb, tau, i), all)};
  });
  return out[0];
}

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

}  // namespace torch_tpu::lower
