// unfold_backward(grad_in, input_sizes, dim, size, step): x.unfold(dim, size,
// step) has shape input_sizes with dim replaced by n = (L - size) / step + 1
// windows and a new last dim of `size`; element j of window i reads
// x[i * step + j]. The gradient adds each window element back where it was
// read (PyTorch's unfold_backward, a scatter-add on CPU and CUDA).
//
// Without a scatter: pad each window to m = ceil(size / step) blocks of
// `step` elements. Block r of window i covers x[(i + r) * step, +step), so
// for a fixed r the windows' blocks tile a contiguous run: a reshape, then a
// pad by r * step puts them in place. Summing the m runs adds the overlaps;
// m is 1 when windows do not overlap.
#include "lower/unfold_backward.h"

namespace torch_tpu::lower {

namespace {

bool is_empty(const Shape& s) {
  for (int64_t d : s) {
    if (d == 0) return true;
  }
  return false;
}

// g [A, n, size, B] -> [A, n, m, step, B], windows zero-padded to m * step.
Value window_blocks(Builder& b, const Value& g, size_t dim, int64_t m, int64_t step) {
  const Shape& s = g.shape();
  Shape high(s.size(), 0);
  high[dim + 1] = m * step - s[dim + 1];
  Value padded = b.pad(g, b.constant(0, g.dtype()), Shape(s.size(), 0), high, Shape(s.size(), 0));
  Shape blocks(s.begin(), s.begin() + dim + 1);
  blocks.push_back(m);
  blocks.push_back(step);
  blocks.insert(blocks.end(), s.begin() + dim + 2, s.end());
  return b.reshape(padded, blocks);
}

// Block r of every window, laid end to end and placed at offset r * step of a
// dim of length `length` (negative high padding drops the zero tail).
Value placed_block(Builder& b, const Value& blocks, size_t dim, int64_t r, int64_t length) {
  const Shape& s = blocks.shape();
  Shape start(s.size(), 0), limit = s;
  start[dim + 1] = r;
  limit[dim + 1] = r + 1;
  Value one = b.slice(blocks, start, limit, Shape(s.size(), 1));
  const int64_t n = s[dim], step = s[dim + 2];
  Shape run(s.begin(), s.begin() + dim);
  run.push_back(n * step);
  run.insert(run.end(), s.begin() + dim + 3, s.end());
  Shape low(run.size(), 0), high(run.size(), 0);
  low[dim] = r * step;
  high[dim] = length - (n + r) * step;
  return b.pad(b.reshape(one, run), b.constant(0, blocks.dtype()), low, high, Shape(run.size(), 0));
}

}  // namespace

std::vector<Value> unfold_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  // A 0-d input unfolds as if it were [1].
  const Shape sizes = out.shape.empty() ? Shape{1} : out.shape;
  const size_t rank = sizes.size();
  const auto dim = static_cast<size_t>(wrap_dim(ctx.int_arg(2), static_cast<int64_t>(rank)));
  const int64_t size = ctx.int_arg(3), step = ctx.int_arg(4);
  const Value& grad = ctx.tensor(0);
  if (is_empty(grad.shape()) || is_empty(sizes)) return {zeros(b, out)};

  const ElementType acc = accumulation_type(out.dtype);  // one rounding for bf16, as CPU's opmath
  Value g = b.convert(out.shape.empty() ? b.reshape(grad, {1, size}) : grad, acc);
  // Window elements next to their window index: [A, n, size, B].
  std::vector<int64_t> perm;
  for (size_t d = 0; d <= dim; ++d) perm.push_back(static_cast<int64_t>(d));
  perm.push_back(static_cast<int64_t>(rank));
  for (size_t d = dim + 1; d < rank; ++d) perm.push_back(static_cast<int64_t>(d));
  g = b.transpose(g, perm);

  const int64_t m = (size + step - 1) / step;
  Value blocks = window_blocks(b, g, dim, m, step);
  Value sum = placed_block(b, blocks, dim, 0, sizes[dim]);
  for (int64_t r = 1; r < m; ++r) sum = b.binary("add", sum, placed_block(b, blocks, dim, r, sizes[dim]));
  return {b.convert(b.reshape(sum, out.shape), out.dtype)};
}

}  // namespace torch_tpu::lower
