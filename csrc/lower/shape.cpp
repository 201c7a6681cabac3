// Shape ops that compute values: cat, tril, triu. (Pure views — reshape,
// transpose, slice — are metadata in the device layer, not lowerings.)
#include "lower/shape.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// tril keeps col - row <= diagonal, triu keeps col - row >= diagonal, over
// the last two dims; everything else becomes zero.
Value triangle(LowerContext& ctx, CompareDirection keep_dir) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value self = b.convert(ctx.tensor(0), out.dtype);
  if (out.numel() == 0) return self;
  const int64_t r = out.rank();
  TensorType plane{ElementType::S64, {out.shape[r - 2], out.shape[r - 1]}};
  Value offset = b.binary("subtract", b.iota(plane, 1), b.iota(plane, 0));
  Value diagonal = b.splat(static_cast<double>(ctx.int_arg(1)), plane);
  Value keep = b.broadcast_in_dim(b.compare(offset, diagonal, keep_dir), out.shape, {r - 2, r - 1});
  return b.select(keep, self, zeros(b, out));
}

// PyTorch's cat skips legacy empty tensors (1-d of size 0) whatever their
// rank; other empty inputs add nothing along `dim` either.
bool contributes(const std::optional<Value>& t) { return t && t->type.numel() > 0; }

}  // namespace

std::vector<Value> cat(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const int64_t dim = wrap_dim(ctx.int_arg(1), out.rank());
  std::vector<Value> parts;
  for (const auto& t : ctx.args.at(0).tensors) {
    if (contributes(t)) parts.push_back(b.convert(*t, out.dtype));  // out dtype: promoted inputs
  }
  return {b.concatenate(parts, dim)};
}

std::vector<Value> tril(LowerContext& ctx) { return {triangle(ctx, CompareDirection::LE)}; }

std::vector<Value> triu(LowerContext& ctx) { return {triangle(ctx, CompareDirection::GE)}; }

// flip(self, dims): reverse along each listed dim (repeated dims are
// rejected by PyTorch's meta kernel before we get here).
std::vector<Value> flip(LowerContext& ctx) {
  const Value& x = ctx.tensor(0);
  std::vector<int64_t> dims;
  for (int64_t d : ctx.ints(1)) dims.push_back(wrap_dim(d, x.rank()));
  if (dims.empty() || x.rank() == 0) return {x};
  return {ctx.b.reverse(x, dims)};
}

}  // namespace torch_tpu::lower
