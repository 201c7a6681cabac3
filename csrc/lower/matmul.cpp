// Matrix products: mm, bmm, addmm, addmv, baddbmm, dot, and the shared matmul_2d.
// torch.matmul, nn.Linear and einsum-style products decompose into these
// before they reach the device. Like PyTorch's CPU/CUDA kernels, half-width
// floats (bf16, f16) accumulate in f32 and round once; the alpha/beta update
// of addmm and baddbmm happens in that accumulation type too.
#include <stdexcept>

#include "lower/elementwise.h"

namespace torch_tpu::lower {

Value contract(LowerContext& ctx, const Value& a, const Value& b, const std::vector<int64_t>& batch_a,
               const std::vector<int64_t>& batch_b, int64_t contract_a, int64_t contract_b, ElementType out) {
  Shape shape;
  for (int64_t d : batch_a) shape.push_back(a.shape()[d]);
  auto is_batch = [](const std::vector<int64_t>& dims, int64_t i) {
    for (int64_t d : dims) if (d == i) return true;
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
  return ctx.b.dot_general(ca, cb, batch_a, batch_b, {contract_a}, {contract_b}, {acc, shape},
                           ctx.matmul_precision);
}

namespace {

// A defaulted Scalar argument (absent) is 1.
double scalar_value(const LowerContext& ctx, size_t i) { return ctx.has(i) ? ctx.args[i].scalar.as_double() : 1.0; }

}  // namespace

Value add_scaled(LowerContext& ctx, Value product, size_t self_index, size_t beta_index, size_t alpha_index,
                 bool with_self) {
  Builder& b = ctx.b;
  const TensorType pt = product.type;
  const bool logical = pt.dtype == ElementType::Pred;
  if (scalar_value(ctx, alpha_index) != 1) {
    product = b.binary(logical ? "and" : "multiply", product,
                       b.broadcast_to(ctx.scalar_arg(alpha_index, pt.dtype), pt.shape));
  }
  if (!with_self || scalar_value(ctx, beta_index) == 0) return product;
  Value self = coerce(b, ctx.tensor(self_index), pt);
  if (scalar_value(ctx, beta_index) != 1) {
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

}  // namespace torch_tpu::lower
