// The Cholesky family: linalg_cholesky_ex (stablehlo.cholesky), its solves
// (cholesky_solve_helper) and inverse (cholesky_inverse).
#include "lower/linalg.h"

#include <cstdint>
#include <vector>

#include "lower/linalg/common.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

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

}  // namespace torch_tpu::lower
