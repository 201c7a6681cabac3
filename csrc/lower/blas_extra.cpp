// vdot and addbmm. Like matmul.cpp, half-width floats accumulate in f32
// (addbmm rounds once per batch, as CPU's loop of addmm_ does), and
// dot_general carries ctx.matmul_precision (float32 operands rounded to bf16
// under DEFAULT, lowering.h at_matmul_precision).
#include "lower/blas_extra.h"

#include "lower/elementwise.h"

namespace torch_tpu::lower {

namespace {

// Complex conjugate; the identity for real values.
Value conjugate(Builder& b, const Value& x) {
  if (!hlo::is_complex(x.dtype())) return x;
  TensorType part{ElementType::F32, x.shape()};
  Value re = b.op("real", {x}, part), im = b.op("imag", {x}, part);
  return b.op("complex", {re, b.unary("negate", im)}, x.type);
}

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
  Value self = conjugate(b, b.convert(ctx.tensor(0), out.dtype));
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

}  // namespace torch_tpu::lower
