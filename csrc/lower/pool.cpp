// Pooling over the trailing 1, 2 or 3 dims (the spatial ones; the leading
// dims are planes, batched or not): max pooling with PyTorch's indices, average
// pooling, adaptive average pooling, and their backward ops. The number of
// spatial dims is the length of kernel_size / output_size, so one lowering
// serves the 2d and 3d overloads.
//   - windows are "stablehlo.reduce_window"; padding is PyTorch's on the low
//     side and whatever the result size (floor or ceil mode) needs on the high
//     side;
//   - max-pool indices are the flat index within each input plane (h * W + w),
//     the first maximum in the window, NaN counting as the largest value, as
//     PyTorch's CPU kernel; the backward scatter-adds grad at those indices;
//   - the average-pool backward spreads grad / divisor back over each window:
//     grad dilated by the stride, padded, summed over a window of the kernel.
// Sums of half-width floats run in f32.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "lower/elementwise.h"
#include "lower/resample.h"
#include "lower/unpool.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

struct PoolParams {
  size_t n = 0;      // spatial dims
  size_t first = 0;  // index of the first spatial dim
  std::vector<int64_t> kernel, stride, padding, dilation;
};

std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t n, int64_t fallback) {
  if (v.empty()) return std::vector<int64_t>(n, fallback);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n) throw std::invalid_argument("pooling: parameter list length differs from the kernel's");
  return v;
}

// kernel_size, stride (empty: the kernel), padding and, if `dilation_arg` > 0, dilation.
PoolParams pool_params(const LowerContext& ctx, const Value& x, size_t kernel_arg, size_t dilation_arg) {
  PoolParams p;
  p.n = ctx.ints(kernel_arg).size();
  if (p.n == 0 || static_cast<size_t>(x.rank()) < p.n) throw std::invalid_argument("pooling: bad kernel_size");
  p.first = x.rank() - p.n;
  p.kernel = per_dim(ctx.ints(kernel_arg), p.n, 1);
  p.stride = ctx.ints(kernel_arg + 1).empty() ? p.kernel : per_dim(ctx.ints(kernel_arg + 1), p.n, 1);
  p.padding = per_dim(ctx.ints(kernel_arg + 2), p.n, 0);
  p.dilation = dilation_arg > 0 ? per_dim(ctx.ints(dilation_arg), p.n, 1) : std::vector<int64_t>(p.n, 1);
  return p;
}

// A per-dim attribute over the whole rank: `fill` for the plane dims.
std::vector<int64_t> full_rank(const PoolParams& p, const std::vector<int64_t>& spatial, int64_t fill) {
  std::vector<int64_t> v(p.first, fill);
  v.insert(v.end(), spatial.begin(), spatial.end());
  return v;
}

std::string padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i) s += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

// The windows of a pooling op over `in_shape` producing `out_shape`: low
// padding is PyTorch's, high padding covers the last window (ceil mode) and
// is never negative (floor mode drops trailing elements; the result is sliced).
struct Windows {
  std::vector<int64_t> dims, strides, dilations, pad_lo, pad_hi;
};

Windows pool_windows(const PoolParams& p, const Shape& in_shape, const Shape& out_shape) {
  Windows w{full_rank(p, p.kernel, 1), full_rank(p, p.stride, 1), full_rank(p, p.dilation, 1),
            full_rank(p, p.padding, 0), std::vector<int64_t>(in_shape.size(), 0)};
  for (size_t i = 0; i < p.n; ++i) {
    const size_t d = p.first + i;
    const int64_t needed = (out_shape[d] - 1) * p.stride[i] + p.dilation[i] * (p.kernel[i] - 1) + 1;
    w.pad_hi[d] = std::max<int64_t>(0, needed - in_shape[d] - p.padding[i]);
  }
  return w;
}

Shape window_result_shape(const Windows& w, const Shape& in) {
  Shape s;
  for (size_t d = 0; d < in.size(); ++d) {
    const int64_t padded = in[d] + w.pad_lo[d] + w.pad_hi[d];
    const int64_t span = w.dilations[d] * (w.dims[d] - 1) + 1;
    s.push_back(padded < span ? 0 : (padded - span) / w.strides[d] + 1);
  }
  return s;
}

std::vector<Value> reduce_window(Builder& b, const std::vector<Value>& operands, const std::vector<Value>& inits,
                                 const Windows& w, const Builder::RegionBody& body) {
  const Shape shape = window_result_shape(w, operands[0].shape());
  std::vector<TensorType> results, block_args;
  for (const Value& v : operands) results.push_back({v.dtype(), shape});
  for (int twice = 0; twice < 2; ++twice) {
    for (const Value& v : operands) block_args.push_back({v.dtype(), {}});
  }
  std::vector<Value> all(operands);
  all.insert(all.end(), inits.begin(), inits.end());
  return b.op_with_region("reduce_window", all, results,
                          "padding = " + padding_attr(w.pad_lo, w.pad_hi) +
                              ", window_dilations = " + Builder::dims_attr(w.dilations) +
                              ", window_dimensions = " + Builder::dims_attr(w.dims) +
                              ", window_strides = " + Builder::dims_attr(w.strides),
                          block_args, body);
}

Value crop(Builder& b, const Value& v, const Shape& shape) {
  if (v.shape() == shape) return v;
  return b.slice(v, Shape(shape.size(), 0), shape, Shape(shape.size(), 1));
}

Value sum_windows(Builder& b, const Value& x, const Windows& w) {
  return reduce_window(b, {x}, {b.constant(0, x.dtype())}, w, [](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{rb.binary("add", a[0], a[1])};
  })[0];
}

void require_float(ElementType t, const char* op) {
  if (!hlo::is_float(t)) throw NotImplementedForDtype(std::string(op) + ": only floating point inputs are supported");
}

// Flat index within a plane of `shape`'s trailing `p.n` dims, as int64.
Value plane_index(Builder& b, const PoolParams& p, const Shape& shape) {
  TensorType t{ElementType::S64, shape};
  Value index = b.splat(0, t);
  int64_t multiplier = 1;
  for (size_t i = p.n; i-- > 0;) {
    const int64_t d = p.first + i;
    Value term = b.binary("multiply", b.iota(t, d), b.splat(static_cast<double>(multiplier), t));
    index = b.binary("add", index, term);
    multiplier *= shape[d];
  }
  return index;
}

// PyTorch's avg_pool divisor for each output position (separable per dim):
// the window clipped to the padded input with count_include_pad, to the input
// without; divisor_override replaces both.
Value avg_divisor(Builder& b, const PoolParams& p, const Shape& in, const TensorType& out, bool include_pad,
                  std::optional<int64_t> divisor_override) {
  if (divisor_override) return b.splat(static_cast<double>(*divisor_override), out);
  Value divisor = b.splat(1, out);
  for (size_t i = 0; i < p.n; ++i) {
    const int64_t d = p.first + i;
    std::vector<double> counts;
    for (int64_t o = 0; o < out.shape[d]; ++o) {
      const int64_t start = o * p.stride[i] - p.padding[i];
      const int64_t end = std::min(start + p.kernel[i], in[d] + p.padding[i]);
      counts.push_back(include_pad ? end - start : std::min(end, in[d]) - std::max<int64_t>(start, 0));
    }
    Value c = b.broadcast_in_dim(spatial::constant_vector(b, counts, out.dtype), out.shape, {d});
    divisor = b.binary("multiply", divisor, c);
  }
  return divisor;
}

std::optional<int64_t> optional_int(const LowerContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.int_arg(i);
}

// Adaptive pooling window of output `o` over `in` elements into `out`: PyTorch's
// [floor(o * in / out), ceil((o + 1) * in / out)). As a matrix [out, in] of 1/len.
Value adaptive_matrix(Builder& b, int64_t in, int64_t out, ElementType dtype) {
  std::vector<double> m(out * in, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t h = start; h < end; ++h) m[o * in + h] = 1.0 / static_cast<double>(end - start);
  }
  return b.reshape(spatial::constant_vector(b, m, dtype), {out, in});
}

// Contracts dim `d` of x with dim `contract` of the [out, in] matrix m and puts
// the matrix's other dim at position d.
Value apply_along(LowerContext& ctx, const Value& x, const Value& m, int64_t d, int64_t contract) {
  Builder& b = ctx.b;
  const int64_t kept = 1 - contract;
  Shape shape{m.shape()[kept]};
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != d) shape.push_back(x.shape()[i]);
  }
  // Averaging weights are not a user matmul: full precision on every plugin.
  Value y = b.dot_general(m, x, {}, {}, {contract}, {d}, {x.dtype(), shape}, "HIGHEST");
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= d; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = d + 1; i < x.rank(); ++i) perm.push_back(i);
  return b.transpose(y, perm);
}

// Backward of adaptive average pooling over the trailing `n` dims.
std::vector<Value> adaptive_avg_pool_backward(LowerContext& ctx, size_t n) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "adaptive_avg_pool_backward");
  const ElementType acc = accumulation_type(out.dtype);
  Value g = b.convert(ctx.tensor(0), acc);
  const int64_t first = g.rank() - static_cast<int64_t>(n);
  for (int64_t d = first; d < g.rank(); ++d) {
    g = apply_along(ctx, g, adaptive_matrix(b, out.shape[d], g.shape()[d], acc), d, 0);
  }
  return {b.convert(g, out.dtype)};
}

}  // namespace

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
std::vector<Value> max_pool_with_indices(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& x = ctx.tensor(0);
  require_float(x.dtype(), "max_pool");
  const TensorType& out = ctx.out_types.at(0);
  const PoolParams p = pool_params(ctx, x, 1, 4);
  if (out.numel() == 0) return {zeros(b, out), zeros(b, ctx.out_types.at(1))};
  const Windows w = pool_windows(p, x.shape(), out.shape);
  const Value lowest = b.constant(-std::numeric_limits<double>::infinity(), x.dtype());
  // Padding takes the init index, larger than any real one, so real elements win ties.
  const Value no_index = b.constant_int(std::numeric_limits<int64_t>::max(), ElementType::S64);
  auto body = [](Builder& rb, const std::vector<Value>& a) {
    const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
    Value a_nan = rb.compare(av, av, CompareDirection::NE), b_nan = rb.compare(bv, bv, CompareDirection::NE);
    Value b_num = rb.unary("not", b_nan);
    Value a_greater = rb.binary("or", rb.compare(av, bv, CompareDirection::GT), rb.binary("and", a_nan, b_num));
    Value same = rb.binary("or", rb.compare(av, bv, CompareDirection::EQ), rb.binary("and", a_nan, b_nan));
    Value first = rb.binary("and", same, rb.compare(ai, bi, CompareDirection::LT));
    Value take_a = rb.binary("or", a_greater, first);
    return std::vector<Value>{rb.select(take_a, av, bv), rb.select(take_a, ai, bi)};
  };
  std::vector<Value> r = reduce_window(b, {x, plane_index(b, p, x.shape())}, {lowest, no_index}, w, body);
  return {crop(b, r[0], out.shape), b.convert(crop(b, r[1], out.shape), ctx.out_types.at(1).dtype)};
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices) -> grad_input
std::vector<Value> max_pool_with_indices_backward(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "max_pool_backward");
  const int64_t n = static_cast<int64_t>(ctx.ints(2).size());
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(7), out, n)};
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
std::vector<Value> avg_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "avg_pool");
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  const PoolParams p = pool_params(ctx, x, 1, 0);
  if (out.numel() == 0) return {zeros(b, out)};
  Value sum = crop(b, sum_windows(b, x, pool_windows(p, x.shape(), out.shape)), out.shape);
  const TensorType acc_out{acc, out.shape};
  Value divisor = avg_divisor(b, p, x.shape(), acc_out, ctx.bool_arg(5, true), optional_int(ctx, 6));
  return {b.convert(b.binary("divide", sum, divisor), out.dtype)};
}

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override?) -> grad_input
std::vector<Value> avg_pool_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "avg_pool_backward");
  const ElementType acc = accumulation_type(out.dtype);
  Value g = b.convert(ctx.tensor(0), acc);
  const PoolParams p = pool_params(ctx, g, 2, 0);
  if (out.numel() == 0 || g.type.numel() == 0) return {zeros(b, out)};
  g = b.binary("divide", g, avg_divisor(b, p, out.shape, g.type, ctx.bool_arg(6, true), optional_int(ctx, 7)));
  // Input position h gets grad of every output o with o*s - pad <= h < o*s - pad + k.
  const size_t rank = out.shape.size();
  Shape lo(rank, 0), hi(rank, 0), interior(rank, 0);
  for (size_t i = 0; i < p.n; ++i) {
    const size_t d = p.first + i;
    const int64_t dilated = (g.shape()[d] - 1) * p.stride[i] + 1;
    lo[d] = p.kernel[i] - 1 - p.padding[i];
    hi[d] = out.shape[d] + p.padding[i] - dilated;
    interior[d] = p.stride[i] - 1;
  }
  Value spread = b.pad(g, b.constant(0, acc), lo, hi, interior);
  Windows w{full_rank(p, p.kernel, 1), std::vector<int64_t>(rank, 1), std::vector<int64_t>(rank, 1),
            std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  return {b.convert(sum_windows(b, spread, w), out.dtype)};
}

// _adaptive_avg_pool{2,3}d(self, output_size)
std::vector<Value> adaptive_avg_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "adaptive_avg_pool");
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  if (out.numel() == 0) return {zeros(b, out)};
  const int64_t first = x.rank() - static_cast<int64_t>(ctx.ints(1).size());
  for (int64_t d = first; d < x.rank(); ++d) {
    x = apply_along(ctx, x, adaptive_matrix(b, x.shape()[d], out.shape[d], acc), d, 1);
  }
  return {b.convert(x, out.dtype)};
}

// _adaptive_avg_pool2d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool2d_backward(LowerContext& ctx) { return adaptive_avg_pool_backward(ctx, 2); }

// _adaptive_avg_pool3d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool3d_backward(LowerContext& ctx) { return adaptive_avg_pool_backward(ctx, 3); }

}  // namespace torch_tpu::lower
