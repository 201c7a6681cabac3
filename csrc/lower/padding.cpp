// reflection_pad{1,2,3}d and replication_pad{1,2,3}d with their backward ops.
// `padding` lists (left, right) per padded dim starting from the last dim, as
// PyTorch's; negative amounts crop. Each output position reads one input
// position known from the sizes alone, so the forward is a gather of static
// indices per dim (exact for every dtype) and the backward sums grad into
// those positions (the gather's transpose, a one-hot matrix applied per dim).
#include "lower/padding.h"

#include <algorithm>
#include <string>

#include "lower/common/spatial.h"

namespace torch_tpu::lower {

namespace {

enum class PadMode { Reflect, Replicate };

// Input position read by each output position of one dim.
std::vector<int64_t> pad_source(PadMode mode, int64_t in, int64_t left, int64_t right) {
  std::vector<int64_t> idx;
  for (int64_t o = 0; o < in + left + right; ++o) {
    int64_t i = o - left;
    if (mode == PadMode::Replicate) {
      i = std::clamp<int64_t>(i, 0, in - 1);
    } else {
      if (i < 0) i = -i;
      if (i >= in) i = 2 * (in - 1) - i;
    }
    idx.push_back(i);
  }
  return idx;
}

// Calls fn(dim, left, right) for each padded dim of a rank-`rank` tensor.
template <typename Fn>
void for_each_padded_dim(const std::vector<int64_t>& padding, int64_t rank, Fn fn) {
  const int64_t n = static_cast<int64_t>(padding.size()) / 2;
  for (int64_t k = 0; k < n; ++k) fn(rank - 1 - k, padding[2 * k], padding[2 * k + 1]);
}

// *_pad{1,2,3}d(self, padding)
std::vector<Value> pad_forward(LowerContext& ctx, PadMode mode) {
  const TensorType& out = ctx.out_types.at(0);
  Value x = ctx.tensor(0);
  if (out.numel() == 0) return {zeros(ctx.b, out)};
  for_each_padded_dim(ctx.ints(1), x.rank(), [&](int64_t d, int64_t left, int64_t right) {
    x = spatial::take_along(ctx.b, x, d, pad_source(mode, x.shape()[d], left, right));
  });
  return {x};
}

// *_pad{1,2,3}d_backward(grad_output, self, padding)
std::vector<Value> pad_backward(LowerContext& ctx, PadMode mode) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (!hlo::is_float(out.dtype))
    throw NotImplementedForDtype("padding backward: only floating point inputs are supported");
  Value g = b.convert(ctx.tensor(0), accumulation_type(out.dtype));
  if (out.numel() == 0) return {zeros(b, out)};
  for_each_padded_dim(ctx.ints(2), g.rank(), [&](int64_t d, int64_t left, int64_t right) {
    const int64_t in = out.shape[d];
    g = spatial::scatter_add_along(b, g, d, pad_source(mode, in, left, right), in);
  });
  return {b.convert(g, out.dtype)};
}

}  // namespace

std::vector<Value> reflection_pad(LowerContext& ctx) { return pad_forward(ctx, PadMode::Reflect); }
std::vector<Value> reflection_pad_backward(LowerContext& ctx) { return pad_backward(ctx, PadMode::Reflect); }
std::vector<Value> replication_pad(LowerContext& ctx) { return pad_forward(ctx, PadMode::Replicate); }
std::vector<Value> replication_pad_backward(LowerContext& ctx) { return pad_backward(ctx, PadMode::Replicate); }

}  // namespace torch_tpu::lower
