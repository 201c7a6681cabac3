// im2col / col2im over the last two dims (batched or not) and channel_shuffle.
// Column layout, as PyTorch's: row c * kh * kw + i * kw + j holds kernel
// offset (i, j) of channel c, column l = oh_index * ow + ow_index the window.
//   - im2col: one strided slice of the zero-padded input per kernel offset;
//   - col2im (its transpose): each offset's slice is placed back with a
//     strided pad and the slices are summed, then the padding is cropped.
#include "lower/im2col.h"

#include <string>

namespace torch_tpu::lower {

namespace {

struct PatchParams {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

// kernel_size, dilation, padding, stride starting at argument `first`.
PatchParams patch_params(const LowerContext& ctx, size_t first) {
  auto pair = [&](size_t i) {
    const auto& v = ctx.ints(i);
    if (v.size() != 2) throw std::invalid_argument("im2col/col2im: expected 2 values per parameter");
    return v;
  };
  const auto &k = pair(first), &d = pair(first + 1), &p = pair(first + 2), &s = pair(first + 3);
  return {k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
}

// Number of windows along a dim of `size` elements.
int64_t blocks(int64_t size, int64_t kernel, int64_t dilation, int64_t pad, int64_t stride) {
  return (size + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

}  // namespace

// im2col(self, kernel_size, dilation, padding, stride)
std::vector<Value> im2col(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const PatchParams p = patch_params(ctx, 1);
  const int64_t r = x.rank();
  const int64_t oh = blocks(x.shape()[r - 2], p.kh, p.dh, p.ph, p.sh);
  const int64_t ow = blocks(x.shape()[r - 1], p.kw, p.dw, p.pw, p.sw);
  Shape lo(r, 0), hi(r, 0), interior(r, 0);
  lo[r - 2] = hi[r - 2] = p.ph;
  lo[r - 1] = hi[r - 1] = p.pw;
  Value padded = b.pad(x, b.constant(0, x.dtype()), lo, hi, interior);
  Shape piece_shape(x.shape().begin(), x.shape().end() - 2);  // [N,] C
  piece_shape.push_back(1);
  piece_shape.push_back(oh * ow);
  std::vector<Value> pieces;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      Shape start(r, 0), limit = padded.shape(), strides(r, 1);
      start[r - 2] = i * p.dh;
      start[r - 1] = j * p.dw;
      limit[r - 2] = start[r - 2] + (oh - 1) * p.sh + 1;
      limit[r - 1] = start[r - 1] + (ow - 1) * p.sw + 1;
      strides[r - 2] = p.sh;
      strides[r - 1] = p.sw;
      pieces.push_back(b.reshape(b.slice(padded, start, limit, strides), piece_shape));
    }
  }
  Value cols = pieces.size() == 1 ? pieces[0] : b.concatenate(pieces, r - 2);  // [N,] C, kh*kw, L
  return {b.reshape(cols, out.shape)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride)
std::vector<Value> col2im(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {zeros(b, out)};
  const PatchParams p = patch_params(ctx, 2);
  const ElementType acc = accumulation_type(out.dtype);
  const int64_t r = out.rank();
  const int64_t H = out.shape[r - 2], W = out.shape[r - 1];
  const int64_t oh = blocks(H, p.kh, p.dh, p.ph, p.sh), ow = blocks(W, p.kw, p.dw, p.pw, p.sw);
  Shape split(out.shape.begin(), out.shape.end() - 2);  // [N,] C
  split.push_back(p.kh * p.kw);
  split.push_back(oh);
  split.push_back(ow);
  Value cols = b.reshape(b.convert(ctx.tensor(0), acc), split);  // [N,] C, kh*kw, oh, ow
  const int64_t k_dim = r - 2;
  Value sum;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      Shape start(r + 1, 0), limit = cols.shape(), strides(r + 1, 1);
      start[k_dim] = i * p.kw + j;
      limit[k_dim] = start[k_dim] + 1;
      Shape piece_shape(out.shape.begin(), out.shape.end() - 2);
      piece_shape.push_back(oh);
      piece_shape.push_back(ow);
      Value piece = b.reshape(b.slice(cols, start, limit, strides), piece_shape);
      Shape lo(r, 0), hi(r, 0), interior(r, 0);
      lo[r - 2] = i * p.dh;
      lo[r - 1] = j * p.dw;
      interior[r - 2] = p.sh - 1;
      interior[r - 1] = p.sw - 1;
      hi[r - 2] = H + 2 * p.ph - (lo[r - 2] + (oh - 1) * p.sh + 1);
      hi[r - 1] = W + 2 * p.pw - (lo[r - 1] + (ow - 1) * p.sw + 1);
      Value placed = b.pad(piece, b.constant(0, acc), lo, hi, interior);
      sum = sum.name.empty() ? placed : b.binary("add", sum, placed);
    }
  }
  Shape start(r, 0), limit = sum.shape(), strides(r, 1);
  start[r - 2] = p.ph;
  start[r - 1] = p.pw;
  limit[r - 2] = p.ph + H;
  limit[r - 1] = p.pw + W;
  return {b.convert(b.slice(sum, start, limit, strides), out.dtype)};
}

// channel_shuffle(self, groups): channel g * (C / groups) + k moves to k * groups + g.
std::vector<Value> channel_shuffle(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  const int64_t groups = ctx.int_arg(1);
  if (out.numel() == 0 || x.rank() < 2) return {out.numel() == 0 ? zeros(b, out) : x};
  const int64_t C = x.shape()[1];
  Shape split{x.shape()[0], groups, C / groups};
  split.insert(split.end(), x.shape().begin() + 2, x.shape().end());
  std::vector<int64_t> perm{0, 2, 1};
  for (int64_t d = 3; d < static_cast<int64_t>(split.size()); ++d) perm.push_back(d);
  return {b.reshape(b.transpose(b.reshape(x, split), perm), out.shape)};
}

}  // namespace torch_tpu::lower
