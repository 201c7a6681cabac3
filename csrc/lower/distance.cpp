// p-norm distances between rows (pdist, cdist) and their backward, after
// PyTorch's CPU kernels (aten/src/ATen/native/cpu/DistanceOpsKernel.cpp):
// the same special cases of p (0 counts, 1 and inf are |.| sums and maxima,
// 2 a square root) and the same zero-distance rules in the gradient. The
// row differences are formed explicitly ((.., P, R, M)); CPU's cdist takes a
// matmul shortcut for p = 2 with more than 25 rows, which differs from this
// by rounding only.
//
// Also the cross product (linalg_cross) and the legacy `norm` overloads.
#include "lower/distance.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lower/common/arith.h"

#include "lower/reduce.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

using math::div;
using math::mul;
using math::sub;
Value pow(Builder& b, const Value& x, double e) { return b.binary("power", x, b.splat(e, x.type)); }

std::vector<int64_t> iota_dims(int64_t from, int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < n; ++i) d.push_back(from + i);
  return d;
}

// The p-norm of `diff` over its last dim.
Value p_norm(Builder& b, const Value& diff, double p) {
  const std::vector<int64_t> last{diff.rank() - 1};
  const ElementType t = diff.dtype();
  Value a = b.unary("abs", diff);
  if (p == 0)
    return b.reduce(b.convert(b.compare(a, b.splat(0, a.type), CompareDirection::NE), t), b.constant(0, t), last,
                    "add");
  if (std::isinf(p)) return b.reduce(a, b.constant(0, t), last, "maximum");
  if (p == 1) return b.reduce(a, b.constant(0, t), last, "add");
  if (p == 2) return b.unary("sqrt", b.reduce(mul(b, diff, diff), b.constant(0, t), last, "add"));
  return pow(b, b.reduce(pow(b, a, p), b.constant(0, t), last, "add"), 1.0 / p);
}

// d dist / d diff times the incoming gradient, elementwise over (.., M);
// `g` and `dist` are already broadcast to diff's shape.
Value dist_grad(Builder& b, const Value& g, const Value& diff, const Value& dist, double p) {
  Value zero = b.splat(0, diff.type);
  if (p == 0) return zero;
  Value sign = b.unary("sign", diff);
  if (p == 1) return mul(b, sign, g);
  Value a = b.unary("abs", diff);
  if (std::isinf(p)) {
    Value at_max = b.convert(b.compare(a, dist, CompareDirection::EQ), diff.dtype());
    return mul(b, mul(b, g, sign), at_max);
  }
  Value no_dist = b.compare(dist, zero, CompareDirection::EQ);
  if (p == 2) return b.select(no_dist, zero, div(b, mul(b, g, diff), dist));
  if (p < 2) {
    // Below p = 1 |diff|^(p-1) is infinite at 0: CPU gives 0 there.
    if (p < 1) no_dist = b.binary("or", no_dist, b.compare(diff, zero, CompareDirection::EQ));
    return b.select(no_dist, zero, div(b, mul(b, mul(b, sign, pow(b, a, p - 1)), g), pow(b, dist, p - 1)));
  }
  return b.select(no_dist, zero, div(b, mul(b, mul(b, diff, pow(b, a, p - 2)), g), pow(b, dist, p - 1)));
}

// Rows of x1 (.., P, M) minus rows of x2 (.., R, M): (.., P, R, M).
Value row_differences(Builder& b, const Value& x1, const Value& x2) {
  const int64_t k = x1.rank() - 2;
  Shape s(x1.shape().begin(), x1.shape().end() - 2);
  const int64_t p = x1.shape()[k], r = x2.shape()[k], m = x1.shape()[k + 1];
  s.insert(s.end(), {p, r, m});
  std::vector<int64_t> d1 = iota_dims(0, k), d2 = iota_dims(0, k);
  d1.insert(d1.end(), {k, k + 2});
  d2.insert(d2.end(), {k + 1, k + 2});
  return sub(b, b.broadcast_in_dim(x1, s, d1), b.broadcast_in_dim(x2, s, d2));
}

// `x` (.., rows, M) with its batch dims broadcast to `batch`.
Value with_batch(Builder& b, const Value& x, const Shape& batch, ElementType t) {
  Shape s = batch;
  s.insert(s.end(), x.shape().end() - 2, x.shape().end());
  return b.broadcast_to(b.convert(x, t), s);
}

// pdist's position of pair (i, j), i < j, in row-major upper-triangle order;
// other pairs get `pairs` (one past the end).
Value pair_index(Builder& b, int64_t n, int64_t pairs) {
  TensorType t{ElementType::S64, {n, n}};
  Value i = b.iota(t, 0), j = b.iota(t, 1);
  auto k = [&](double v) { return b.splat(v, t); };
  // i * n - i * (i + 1) / 2 + j - i - 1
  Value tri = b.binary("divide", mul(b, i, b.binary("add", i, k(1))), k(2));
  Value pos = sub(b, sub(b, b.binary("add", sub(b, mul(b, i, k(static_cast<double>(n))), tri), j), i), k(1));
  return b.select(b.compare(j, i, CompareDirection::GT), pos, k(static_cast<double>(pairs)));
}

// v (pairs) read at every (i, j) of an n x n grid; 0 off the upper triangle.
Value pairs_to_grid(Builder& b, const Value& v, int64_t n) {
  const int64_t pairs = v.shape()[0];
  Value idx = pair_index(b, n, pairs);
  Value upper = b.compare(idx, b.splat(static_cast<double>(pairs), idx.type), CompareDirection::LT);
  Value clamped = b.select(upper, idx, b.splat(0, idx.type));
  Value grid = b.gather_points(v, b.reshape(clamped, {n, n, 1}));
  return b.select(upper, grid, b.splat(0, grid.type));
}

// The upper triangle of an n x n grid as pdist's (pairs) vector.
Value grid_to_pairs(Builder& b, const Value& grid, int64_t pairs) {
  const int64_t n = grid.shape()[0];
  Value idx = b.reshape(pair_index(b, n, pairs), {n * n, 1});
  Value updates = b.reshape(grid, {n * n});
  // Lower-triangle entries index one past the end: scatter drops them.
  return b.scatter_points(b.splat(0, {grid.dtype(), {pairs}}), idx, updates, hlo::overwrite);
}

}  // namespace

// _cdist_forward(x1, x2, p, compute_mode): (.., P, R) p-norms of row differences.
std::vector<Value> cdist_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  const Shape batch(out.shape.begin(), out.shape.end() - 2);
  Value diff = row_differences(b, with_batch(b, ctx.tensor(0), batch, acc), with_batch(b, ctx.tensor(1), batch, acc));
  return {b.convert(b.reshape(p_norm(b, diff, ctx.double_arg(2, 2.0)), out.shape), out.dtype)};
}

// _cdist_backward(grad, x1, x2, p, cdist): gradient for x1, batch dims broadcast
// (autograd sums them back to x1's); x2's is this op with the roles swapped.
std::vector<Value> cdist_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  // No distances: CPU returns zeros of x1's own (unbroadcast) shape.
  if (ctx.tensor(0).type.numel() == 0) return {zeros(b, out)};
  const Shape batch(out.shape.begin(), out.shape.end() - 2);
  Value diff = row_differences(b, with_batch(b, ctx.tensor(1), batch, acc), with_batch(b, ctx.tensor(2), batch, acc));
  const int64_t k = static_cast<int64_t>(batch.size());
  std::vector<int64_t> grid_dims = iota_dims(0, k + 2);
  Shape grid(diff.shape().begin(), diff.shape().end() - 1);
  Value g = b.broadcast_in_dim(b.broadcast_to(b.convert(ctx.tensor(0), acc), grid), diff.shape(), grid_dims);
  Value d = b.broadcast_in_dim(b.broadcast_to(b.convert(ctx.tensor(4), acc), grid), diff.shape(), grid_dims);
  Value per_pair = dist_grad(b, g, diff, d, ctx.double_arg(3, 2.0));
  Value grad = b.reduce(per_pair, b.constant(0, acc), {k + 1}, "add");
  return {b.convert(b.reshape(grad, out.shape), out.dtype)};
}

// _pdist_forward(self, p): distances of rows i < j of self (N, M), row-major.
std::vector<Value> pdist_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const int64_t pairs = out.numel();
  if (pairs == 0) return {zeros(b, out)};
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  Value dist = p_norm(b, row_differences(b, x, x), ctx.double_arg(1, 2.0));
  return {b.convert(b.reshape(grid_to_pairs(b, dist, pairs), out.shape), out.dtype)};
}

// _pdist_backward(grad, self, p, pdist): row i collects the gradient of every
// pair it is in; d dist(i, j) / d x_i is odd in x_i - x_j, so both roles add
// up over the symmetric grid.
std::vector<Value> pdist_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const int64_t n = out.shape.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  const Value& grad = ctx.tensor(0);
  if (grad.type.numel() == 0) return {zeros(b, out)};
  Value x = b.convert(ctx.tensor(1), acc);
  auto symmetric = [&](const Value& v) {
    Value upper = pairs_to_grid(b, b.reshape(b.convert(v, acc), {v.type.numel()}), n);
    return b.binary("add", upper, b.transpose(upper, {1, 0}));
  };
  Value diff = row_differences(b, x, x);
  Value g = b.broadcast_in_dim(symmetric(grad), diff.shape(), {0, 1});
  Value d = b.broadcast_in_dim(symmetric(ctx.tensor(3)), diff.shape(), {0, 1});
  Value per_pair = dist_grad(b, g, diff, d, ctx.double_arg(2, 2.0));
  return {b.convert(b.reduce(per_pair, b.constant(0, acc), {1}, "add"), out.dtype)};
}

// linalg_cross(self, other, dim): (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0) along dim.
// CPU's kernel computes in the tensor's own type, so bfloat16 products are
// rounded before they are subtracted (it matters where they cancel).
std::vector<Value> linalg_cross(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  TensorType t{accumulation_type(out.dtype), out.shape};
  Value x = coerce(b, ctx.tensor(0), t), y = coerce(b, ctx.tensor(1), t);
  const int64_t dim = wrap_dim(ctx.int_arg(2, -1), t.rank());
  auto part = [&](const Value& v, int64_t i) {
    Shape start(v.rank(), 0), limit = v.shape(), strides(v.rank(), 1);
    start[dim] = i;
    limit[dim] = i + 1;
    return b.slice(v, start, limit, strides);
  };
  auto product = [&](int64_t i, int64_t j) {
    return b.convert(b.convert(mul(b, part(x, i), part(y, j)), out.dtype), t.dtype);
  };
  auto term = [&](int64_t i, int64_t j) { return sub(b, product(i, j), product(j, i)); };
  return {b.convert(b.concatenate({term(1, 2), term(2, 0), term(0, 1)}, dim), out.dtype)};
}

// norm.ScalarOpt_dim(self, p?, dim, keepdim) and its dtype/out overloads are
// linalg_vector_norm's arguments; norm.Scalar(self, p) and
// norm.ScalarOpt_dtype(self, p, *, dtype) reduce every dim.
std::vector<Value> norm(LowerContext& ctx) {
  if (ctx.args.size() > 2 && ctx.args[2].kind != Arg::Kind::IntList) ctx.args[2] = Arg{};
  return linalg_vector_norm(ctx);
}

}  // namespace torch_tpu::lower
