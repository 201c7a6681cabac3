// Matrix products: mm, bmm, addmm, addmv, baddbmm, dot, vdot (conjugating),
// addbmm (a batch of products summed into one matrix), _grouped_mm (the
// per-expert products of mixture-of-experts layers), and the shared
// matmul_2d. torch.matmul, nn.Linear and einsum-style products decompose
// into these before they reach the device. Like PyTorch's CPU/CUDA kernels, half-width
// floats (bf16, f16) accumulate in f32 and round once; the alpha/beta update
// of addmm and baddbmm happens in that accumulation type too.
#include "lower/matmul.h"

#include <stdexcept>

namespace torch_tpu::lower {

Value contract(LowerContext& ctx, const Value& a, const Value& b, const std::vector<int64_t>& batch_a,
               const std::vector<int64_t>& batch_b, int64_t contract_a, int64_t contract_b, ElementType out) {
  Shape shape;
  for (int64_t d : batch_a) shape.push_back(a.shape()[d]);
  auto is_batch = [](const std::vector<int64_t>& dims, int64_t i) {
    for (int64_t d : dims)
      if (d == i) return true;
    return false;
  };
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (i != contract_a && !is_batch(batch_a, i)) shape.push_back(a.shape()[i]);
  }
  for (int64_t i = 0; i < b.rank(); ++i) {
    if (i != contract_b && !is_batch(batch_b, i)) shape.push_back(b.shape()[i]);
  }
  const ElementType acc = accumulation_type(out);
  Value ca = at_matmul_precision(ctx, ctx.b.convert(a, out)), cb = at_matmul_precision(ctx, ctx.b.convert(b, out));
  return ctx.b.dot_general(ca, cb, batch_a, batch_b, {contract_a}, {contract_b}, {acc, shape}, ctx.matmul_precision);
}

namespace {

// Whether Scalar argument i is `v` (a defaulted one is 1); a complex alpha or
// beta equals v only with no imaginary part.
bool scalar_is(const LowerContext& ctx, size_t i, double v) {
  if (!ctx.has(i)) return v == 1.0;
  const ScalarArg& s = ctx.args[i].scalar;
  return s.as_double() == v && (s.kind != ScalarArg::Kind::Complex || s.imag == 0);
}

}  // namespace

Value add_scaled(LowerContext& ctx, Value product, size_t self_index, size_t beta_index, size_t alpha_index,
                 bool with_self) {
  Builder& b = ctx.b;
  const TensorType pt = product.type;
  const bool logical = pt.dtype == ElementType::Pred;
  if (!scalar_is(ctx, alpha_index, 1)) {
    product = b.binary(logical ? "and" : "multiply", product,
                       b.broadcast_to(ctx.scalar_arg(alpha_index, pt.dtype), pt.shape));
  }
  if (!with_self || scalar_is(ctx, beta_index, 0)) return product;
  Value self = coerce(b, ctx.tensor(self_index), pt);
  if (!scalar_is(ctx, beta_index, 1)) {
    self = b.binary(logical ? "and" : "multiply", self, b.broadcast_to(ctx.scalar_arg(beta_index, pt.dtype), pt.shape));
  }
  return b.binary(logical ? "or" : "add", self, product);
}

Value matmul_2d(LowerContext& ctx, const Value& a, const Value& bm, ElementType out) {
  if (a.rank() < 1 || bm.rank() < 1 || bm.rank() > 2) throw std::invalid_argument("matmul_2d: bad operand ranks");
  return ctx.b.convert(contract(ctx, a, bm, {}, {}, a.rank() - 1, 0, out), out);
}

std::vector<Value> mm(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  return {matmul_2d(ctx, ctx.tensor(0), ctx.tensor(1), out.dtype)};
}

std::vector<Value> dot(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  return {matmul_2d(ctx, ctx.tensor(0), ctx.tensor(1), out.dtype)};
}

std::vector<Value> bmm(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  return {ctx.b.convert(contract(ctx, ctx.tensor(0), ctx.tensor(1), {0}, {0}, 2, 1, out.dtype), out.dtype)};
}

// addmm(self, mat1, mat2, *, beta, alpha): beta * self + alpha * (mat1 @ mat2).
std::vector<Value> addmm(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  Value p = contract(ctx, ctx.tensor(1), ctx.tensor(2), {}, {}, 1, 0, out.dtype);
  return {ctx.b.convert(add_scaled(ctx, p, 0, 3, 4), out.dtype)};
}

// addmv(self, mat, vec, *, beta, alpha): beta * self + alpha * (mat @ vec).
// torch.mv and matrix @ vector reach the device as addmv.out with beta = 0.
std::vector<Value> addmv(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  // CPU's gemv converts beta and alpha to the result type (addmm converts
  // them to its opmath type, float for float16).
  for (size_t i : {3, 4}) {
    if (ctx.has(i)) check_scalar_fits(ctx.args[i].scalar, out.dtype);
  }
  Value p = contract(ctx, ctx.tensor(1), ctx.tensor(2), {}, {}, 1, 0, out.dtype);
  return {ctx.b.convert(add_scaled(ctx, p, 0, 3, 4), out.dtype)};
}

// baddbmm(self, batch1, batch2, *, beta, alpha): beta * self + alpha * (batch1 @ batch2).
std::vector<Value> baddbmm(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  Value p = contract(ctx, ctx.tensor(1), ctx.tensor(2), {0}, {0}, 2, 1, out.dtype);
  return {ctx.b.convert(add_scaled(ctx, p, 0, 3, 4), out.dtype)};
}

// ---- vdot and addbmm ------------------------------------------------------------
// addbmm rounds once per batch, as CPU's loop of addmm_ does.
namespace {

// addbmm's arguments: self 0, batch1 1, batch2 2, beta 3, alpha 4.
constexpr size_t kSelf = 0, kBeta = 3, kAlpha = 4;

// PyTorch's CPU addbmm is a loop of addmm_ calls, one per batch, each
// computing in f32 and rounding into the bf16/f16 result; rounding after
// every batch reproduces its values. Beyond this many batches one f32
// contraction is used instead (closer to the exact sum, not bit-equal).
constexpr int64_t kMaxRoundedBatches = 64;

Value addbmm_rounding_each_batch(LowerContext& ctx, const TensorType& pt) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value b1 = b.convert(ctx.tensor(1), out.dtype), b2 = b.convert(ctx.tensor(2), out.dtype);
  Value result;
  for (int64_t i = 0; i < b1.shape()[0]; ++i) {
    Value m1 = b.reshape(b.slice(b1, {i, 0, 0}, {i + 1, b1.shape()[1], b1.shape()[2]}, {1, 1, 1}),
                         {b1.shape()[1], b1.shape()[2]});
    Value m2 = b.reshape(b.slice(b2, {i, 0, 0}, {i + 1, b2.shape()[1], b2.shape()[2]}, {1, 1, 1}),
                         {b2.shape()[1], b2.shape()[2]});
    Value product = b.dot_general(m1, m2, {}, {}, {1}, {0}, pt, ctx.matmul_precision);
    Value sum = i == 0 ? add_scaled(ctx, product, kSelf, kBeta, kAlpha)
                       : b.binary("add", b.convert(result, pt.dtype),
                                  add_scaled(ctx, product, kSelf, kBeta, kAlpha, /*with_self=*/false));
    result = b.convert(sum, out.dtype);
  }
  return result;
}

}  // namespace

// vdot(self, other): sum(conj(self) * other) over two 1-d tensors; for real
// dtypes at::vdot is at::dot. Bool has no dot kernel on CPU.
std::vector<Value> vdot(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.dtype == ElementType::Pred) throw NotImplementedForDtype("\"dot\" not implemented for 'Bool'");
  Value self = b.conjugate(b.convert(ctx.tensor(0), out.dtype));
  if (self.type.numel() == 0) return {zeros(b, out)};
  return {matmul_2d(ctx, self, ctx.tensor(1), out.dtype)};
}

// addbmm(self, batch1, batch2, *, beta, alpha):
// beta * self + alpha * sum_b(batch1[b] @ batch2[b]). PyTorch rule: beta == 0
// ignores `self` (NaN and inf in it do not propagate).
std::vector<Value> addbmm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  const TensorType pt{acc, out.shape};
  const Value& b1 = ctx.tensor(1);
  const Value& b2 = ctx.tensor(2);
  const int64_t batches = b1.shape().at(0);
  if (acc != out.dtype && batches > 1 && batches <= kMaxRoundedBatches) return {addbmm_rounding_each_batch(ctx, pt)};
  Value product = zeros(b, pt);
  if (b1.type.numel() != 0 && b2.type.numel() != 0) {
    // One dot_general contracts the batch dim together with the inner dim.
    product = b.dot_general(at_matmul_precision(ctx, b.convert(b1, out.dtype)),
                            at_matmul_precision(ctx, b.convert(b2, out.dtype)), {}, {}, {0, 2}, {0, 1}, pt,
                            ctx.matmul_precision);
  }
  return {b.convert(add_scaled(ctx, product, kSelf, kBeta, kAlpha), out.dtype)};
}

// ---- _grouped_mm ------------------------------------------------------------
// _grouped_mm(self, mat2, offs?, bias?, out_dtype?): one product per group,
// the groups of a 2-d operand's rows (or columns, or contraction) being
// consecutive ranges ending at offs (int32, cumulative), as CUDA's kernel
// and CPU's loop take them:
//   2-d (S, K) x 3-d (G, K, N) -> (S, N): rows of group g times mat2[g];
//   3-d (G, M, K) x 2-d (K, N) -> (M, N): self[g] times columns of group g;
//   2-d (M, K) x 2-d (K, N) -> (G, M, N): the contraction split by group;
//   3-d x 3-d: bmm.
// The group sizes are data, so the program masks each group's range and
// contracts over groups too: one static-shape dot_general, G times the
// products' work. Rows (or columns) past offs' last end are zero.
namespace {

using hlo::CompareDirection;

// pred [G, n]: whether position i lies in group g's range [offs[g-1], offs[g]).
Value group_ranges(Builder& b, const Value& offs, int64_t n) {
  const int64_t groups = offs.shape()[0];
  const ElementType it = offs.type.dtype;
  Value starts = b.concatenate({b.reshape(b.constant_int(0, it), {1}), b.slice(offs, {0}, {groups - 1}, {1})}, 0);
  Value position = b.iota({it, {groups, n}}, 1);
  Value after_start = b.compare(position, b.broadcast_in_dim(starts, {groups, n}, {0}), CompareDirection::GE);
  Value before_end = b.compare(position, b.broadcast_in_dim(offs, {groups, n}, {0}), CompareDirection::LT);
  return b.binary("and", after_start, before_end);
}

// v broadcast to [G, *v.shape], zero outside group g's range along v's dim `along`.
Value per_group(Builder& b, const Value& v, const Value& ranges, int64_t along) {
  const int64_t groups = ranges.shape()[0];
  Shape shape{groups};
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.rank(); ++i) shape.push_back(v.shape()[i]), dims.push_back(i + 1);
  Value mask = b.broadcast_in_dim(ranges, {shape.begin(), shape.end()}, {0, along + 1});
  return b.select(mask, b.broadcast_in_dim(v, shape, dims), b.splat(0, {v.type.dtype, shape}));
}

}  // namespace

std::vector<Value> grouped_mm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value a = at_matmul_precision(ctx, b.convert(ctx.tensor(0), out.dtype));
  Value m = at_matmul_precision(ctx, b.convert(ctx.tensor(1), out.dtype));
  const ElementType acc = accumulation_type(out.dtype);
  const std::string& precision = ctx.matmul_precision;
  Value product;
  if (a.rank() == 3 && m.rank() == 3) {
    product = b.dot_general(a, m, {0}, {0}, {2}, {1}, {acc, out.shape}, precision);
  } else if (a.rank() == 2 && m.rank() == 3) {
    Value rows = per_group(b, a, group_ranges(b, ctx.tensor(2), a.shape()[0]), 0);  // [G, S, K]
    product = b.dot_general(rows, m, {}, {}, {0, 2}, {0, 1}, {acc, out.shape}, precision);
  } else if (a.rank() == 3 && m.rank() == 2) {
    Value columns = per_group(b, m, group_ranges(b, ctx.tensor(2), m.shape()[1]), 1);  // [G, K, N]
    product = b.dot_general(a, columns, {}, {}, {0, 2}, {0, 1}, {acc, out.shape}, precision);
  } else {
    Value parts = per_group(b, a, group_ranges(b, ctx.tensor(2), a.shape()[1]), 1);  // [G, M, K]
    product = b.dot_general(parts, m, {}, {}, {2}, {0}, {acc, out.shape}, precision);
  }
  return {b.convert(product, out.dtype)};
}

}  // namespace torch_tpu::lower
