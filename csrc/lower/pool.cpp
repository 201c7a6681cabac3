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
//
// Adaptive and fractional max pooling (values and PyTorch's indices: the flat
// position within the input plane, h * W + w), their backward ops, and
// max_unpool. The pooled dims are the trailing 1-3; the leading ones are
// planes, batched or not.
//   - Windows are gathered out explicitly ([..., out, window] per pooled dim)
//     and reduced with PyTorch's CPU rule: the first maximum, except that a
//     NaN wins and a later NaN replaces an earlier one (`val > max || isnan`).
//   - Adaptive windows [floor(o*in/out), ceil((o+1)*in/out)) are static;
//     shorter windows repeat their last element, which changes nothing.
//   - Fractional windows start where generate_intervals (PyTorch's
//     FractionalMaxPool2d.cpp) puts them, from the per-plane samples, in the
//     input's dtype arithmetic; they are computed on the device.
//   - Backward ops add grad at the recorded indices (scatter-add per plane).
#include "lower/pool.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "lower/common/spatial.h"
#include "lower/common/type_promotion.h"

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

// The windows of a pooling op over `in_shape` producing `out_shape`: low
// padding is PyTorch's, high padding covers the last window (ceil mode) and
// is never negative (floor mode drops trailing elements; the result is sliced).
hlo::Window pool_windows(const PoolParams& p, const Shape& in_shape, const Shape& out_shape) {
  hlo::Window w{full_rank(p, p.kernel, 1), full_rank(p, p.stride, 1), full_rank(p, p.dilation, 1),
                full_rank(p, p.padding, 0), std::vector<int64_t>(in_shape.size(), 0)};
  for (size_t i = 0; i < p.n; ++i) {
    const size_t d = p.first + i;
    const int64_t needed = (out_shape[d] - 1) * p.stride[i] + p.dilation[i] * (p.kernel[i] - 1) + 1;
    w.pad_hi[d] = std::max<int64_t>(0, needed - in_shape[d] - p.padding[i]);
  }
  return w;
}

Value crop(Builder& b, const Value& v, const Shape& shape) {
  if (v.shape() == shape) return v;
  return b.slice(v, Shape(shape.size(), 0), shape, Shape(shape.size(), 1));
}

Value sum_windows(Builder& b, const Value& x, const hlo::Window& w) {
  return b.reduce_window({x}, {b.constant(0, x.dtype())}, w, [](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{rb.binary("add", a[0], a[1])};
  })[0];
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
    // Counts are small integers, exact in float64 and in any dtype they convert to.
    Value c = b.broadcast_in_dim(b.convert(b.constant_vector(counts, ElementType::F64), out.dtype), out.shape, {d});
    divisor = b.binary("multiply", divisor, c);
  }
  return divisor;
}

std::optional<int64_t> optional_int(const LowerContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.int_arg(i);
}

// Adaptive pooling window of output `o` over `in` elements into `out`: PyTorch's
// [floor(o * in / out), ceil((o + 1) * in / out)), each element weighted 1/len.
spatial::Rows adaptive_rows(int64_t in, int64_t out) {
  spatial::Rows rows(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t h = start; h < end; ++h) rows[o].push_back({h, 1.0 / static_cast<double>(end - start)});
  }
  return rows;
}

// Backward of adaptive average pooling over the trailing `n` dims.
std::vector<Value> adaptive_avg_pool_backward(LowerContext& ctx, size_t n) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "adaptive_avg_pool_backward");
  const ElementType acc = accumulation_type(out.dtype);
  Value g = b.convert(ctx.tensor(0), acc);
  const int64_t first = g.rank() - static_cast<int64_t>(n);
  for (int64_t d = first; d < g.rank(); ++d) {
    g = spatial::apply_rows_transposed(b, g, d, adaptive_rows(out.shape[d], g.shape()[d]), out.shape[d]);
  }
  return {b.convert(g, out.dtype)};
}

// ---- indices within planes, windows gathered out --------------------------------
// Flat index within a plane of `shape`'s trailing `n` dims, as int64.
Value plane_index(Builder& b, const Shape& shape, int64_t n) {
  TensorType t{ElementType::S64, shape};
  Value index = b.splat(0, t);
  int64_t multiplier = 1;
  const int64_t first = static_cast<int64_t>(shape.size()) - n;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= first; --d) {
    index = b.binary("add", index, b.binary("multiply", b.iota(t, d), b.splat(static_cast<double>(multiplier), t)));
    multiplier *= shape[d];
  }
  return index;
}

// Reduces (values, indices) over `dims` with PyTorch's max-with-index rule.
std::vector<Value> max_with_index(Builder& b, const Value& v, const Value& idx, const std::vector<int64_t>& dims) {
  Value lowest = b.constant(-std::numeric_limits<double>::infinity(), v.dtype());
  Value no_index = b.constant_int(std::numeric_limits<int64_t>::max(), ElementType::S64);
  auto body = [](Builder& rb, const std::vector<Value>& a) {
    const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
    Value a_nan = rb.compare(av, av, CompareDirection::NE), b_nan = rb.compare(bv, bv, CompareDirection::NE);
    Value neither = rb.binary("and", rb.unary("not", a_nan), rb.unary("not", b_nan));
    Value both = rb.binary("and", a_nan, b_nan);
    Value a_first = rb.compare(ai, bi, CompareDirection::LT);
    Value a_wins_number = rb.binary("or", rb.compare(av, bv, CompareDirection::GT),
                                    rb.binary("and", rb.compare(av, bv, CompareDirection::EQ), a_first));
    Value take_a = rb.binary("or", rb.binary("and", a_nan, rb.unary("not", b_nan)),
                             rb.binary("or", rb.binary("and", neither, a_wins_number),
                                       rb.binary("and", both, rb.compare(ai, bi, CompareDirection::GT))));
    return std::vector<Value>{rb.select(take_a, av, bv), rb.select(take_a, ai, bi)};
  };
  return b.reduce({v, idx}, {lowest, no_index}, dims, body);
}

// How out's trailing n dims split it into planes: `count` planes of `out`
// elements each, each receiving `values` elements.
struct Planes {
  int64_t count = 1, out = 1, values = 1;
};

Planes planes_of(const Shape& out, const Shape& values, int64_t n) {
  Planes p;
  const int64_t rank = static_cast<int64_t>(out.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (d + n < rank) {
      p.count *= out[d];
    } else {
      p.out *= out[d];
      p.values *= values[d];
    }
  }
  return p;
}

// A zero tensor of `out` with `values` (in out's dtype) combined in at `idx`
// ([planes, values per plane]: flat positions within each plane).
Value scatter_into_planes(Builder& b, const Value& values, const Value& idx, const Planes& p, const TensorType& out,
                          const hlo::ScatterCombiner& combiner) {
  Value base = b.binary("multiply", b.iota(idx.type, 0), b.splat(static_cast<double>(p.out), idx.type));
  Value flat_idx = b.reshape(b.binary("add", idx, base), {p.count * p.values, 1});
  Value updates = b.reshape(b.convert(values, out.dtype), {p.count * p.values});
  Value operand = b.splat(0, {out.dtype, {p.count * p.out}});
  return b.reshape(b.scatter_points(operand, flat_idx, updates, combiner), out.shape);
}

// grad (planes..., pooled...) added into a zero tensor of `out` at `indices`
// (flat positions within each plane of out's trailing n dims).
Value scatter_add_planes(Builder& b, const Value& grad, const Value& indices, const TensorType& out, int64_t n) {
  if (out.numel() == 0 || grad.type.numel() == 0) return zeros(b, out);
  const Planes p = planes_of(out.shape, grad.shape(), n);
  Value idx = b.reshape(b.convert(indices, ElementType::S64), {p.count, p.values});
  Value sum = scatter_into_planes(b, grad, idx, p, {accumulation_type(out.dtype), out.shape}, hlo::accumulate);
  return b.convert(sum, out.dtype);
}

}  // namespace

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
std::vector<Value> max_pool_with_indices(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& x = ctx.tensor(0);
  const TensorType& out = ctx.out_types.at(0);
  const PoolParams p = pool_params(ctx, x, 1, 4);
  // CPU and CUDA pool every real dtype but bool.
  if (!hlo::is_float(x.dtype()) && !hlo::is_integer(x.dtype()))
    not_implemented_for(p.n == 2 ? "max_pool2d" : "max_pool3d", x.dtype());
  if (out.numel() == 0) return {zeros(b, out), zeros(b, ctx.out_types.at(1))};
  const hlo::Window w = pool_windows(p, x.shape(), out.shape);
  const Value lowest = reduce_init(b, "maximum", x.dtype());
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
  std::vector<Value> r = b.reduce_window({x, plane_index(b, x.shape(), p.n)}, {lowest, no_index}, w, body);
  return {crop(b, r[0], out.shape), b.convert(crop(b, r[1], out.shape), ctx.out_types.at(1).dtype)};
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices) -> grad_input
std::vector<Value> max_pool_with_indices_backward(LowerContext& ctx) {
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "max_pool_backward");
  const int64_t n = static_cast<int64_t>(ctx.ints(2).size());
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(7), out, n)};
}

namespace {

// avg_pool and its backward: argument 0 in the accumulation type of the
// result, the pooling parameters from argument `kernel_size`.
struct AvgPoolInput {
  TensorType out;
  ElementType acc;
  Value x;
  PoolParams p;
};
// CPU's avg_pool forward also averages int64 (integer sums, divided with
// truncation toward zero, as XLA's integer divide does).
AvgPoolInput avg_pool_input(LowerContext& ctx, const char* op, size_t kernel_size, bool takes_int64 = false) {
  const TensorType& out = ctx.out_types.at(0);
  if (!(takes_int64 && out.dtype == ElementType::S64)) require_floating_input(out.dtype, op);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = ctx.b.convert(ctx.tensor(0), acc);
  return {out, acc, x, pool_params(ctx, x, kernel_size, 0)};
}

}  // namespace

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
std::vector<Value> avg_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [out, acc, x, p] = avg_pool_input(ctx, "avg_pool", 1, /*takes_int64=*/true);
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
  auto [out, acc, g, p] = avg_pool_input(ctx, "avg_pool_backward", 2);
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
  hlo::Window w{full_rank(p, p.kernel, 1), std::vector<int64_t>(rank, 1), std::vector<int64_t>(rank, 1),
                std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  return {b.convert(sum_windows(b, spread, w), out.dtype)};
}

namespace {

// CPU's adaptive_avg_pool3d for bfloat16/float16 (AdaptiveAveragePooling3d.cpp)
// sums each window in scalar_t, element by element (t, then h, then w),
// rounding every addition, and divides by kT, kH and kW in turn: the window
// offsets are taken one at a time, in that order, each a gather of every
// window's element at that offset.
Value adaptive_avg_pool3d_in_turn(Builder& b, const Value& x, const TensorType& out) {
  const int64_t first = x.rank() - 3;
  const ElementType t = x.dtype();
  auto rounded = [&](const Value& v) { return b.convert(b.convert(v, out.dtype), t); };
  std::vector<Value> starts, sizes;
  std::vector<int64_t> widest;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t in = x.shape()[first + i], o = out.shape[first + i];
    const TensorType index_t{ElementType::S64, {o}};
    Value pos = b.iota(index_t, 0);
    Value start = b.binary("divide", b.binary("multiply", pos, b.splat(static_cast<double>(in), index_t)),
                           b.splat(static_cast<double>(o), index_t));
    Value end = b.binary("divide",
                         b.binary("add",
                                  b.binary("multiply", b.binary("add", pos, b.splat(1, index_t)),
                                           b.splat(static_cast<double>(in), index_t)),
                                  b.splat(static_cast<double>(o - 1), index_t)),
                         b.splat(static_cast<double>(o), index_t));
    starts.push_back(start);
    sizes.push_back(b.binary("subtract", end, start));
    int64_t most = 0;
    for (int64_t k = 0; k < o; ++k) most = std::max(most, ((k + 1) * in + o - 1) / o - k * in / o);
    widest.push_back(most);
  }
  const int64_t offsets = widest[0] * widest[1] * widest[2];
  auto sum = b.while_loop(
      {b.constant_int(0, ElementType::S64), rounded(zeros(b, {t, out.shape}))},
      [&](Builder& rb, const std::vector<Value>& st) {
        return std::vector<Value>{rb.compare(st[0], rb.constant_int(offsets, ElementType::S64), CompareDirection::LT)};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        const int64_t inner[3] = {widest[1] * widest[2], widest[2], 1};
        Value v = x;
        Value valid = rb.splat(1, {ElementType::Pred, out.shape});
        for (int64_t i = 0; i < 3; ++i) {
          const int64_t o = out.shape[first + i], d = first + i;
          const TensorType index_t{ElementType::S64, {o}};
          Value j = rb.binary("remainder", rb.binary("divide", st[0], rb.constant_int(inner[i], ElementType::S64)),
                              rb.constant_int(widest[i], ElementType::S64));
          Value jv = rb.broadcast_in_dim(j, {o}, {});
          Value at = rb.binary("minimum", rb.binary("add", starts[i], jv),
                               rb.splat(static_cast<double>(x.shape()[d] - 1), index_t));
          v = rb.gather_slices(v, d, rb.reshape(at, {o, 1}));
          Value inside = rb.compare(jv, sizes[i], CompareDirection::LT);
          valid = rb.binary("and", valid, rb.broadcast_in_dim(inside, out.shape, {d}));
        }
        Value next = rounded(rb.binary("add", st[1], rb.select(valid, v, zeros(rb, v.type))));
        return std::vector<Value>{rb.binary("add", st[0], rb.constant_int(1, ElementType::S64)), next};
      });
  Value avg = sum[1];
  for (int64_t i = 0; i < 3; ++i) {
    Value k = b.broadcast_in_dim(b.convert(sizes[i], t), out.shape, {first + i});
    avg = rounded(b.binary("divide", avg, rounded(k)));
  }
  return avg;
}

}  // namespace

// _adaptive_avg_pool{2,3}d(self, output_size)
std::vector<Value> adaptive_avg_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  // Nothing to average: CPU's 2d kernel returns before it dispatches on the
  // dtype (any dtype's empty result); where CPU raises, the row's check did.
  if (out.numel() == 0) return {zeros(b, out)};
  require_floating_input(out.dtype, "adaptive_avg_pool");
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  if (ctx.ints(1).size() == 3 && acc != out.dtype)
    return {b.convert(adaptive_avg_pool3d_in_turn(b, x, out), out.dtype)};
  const int64_t first = x.rank() - static_cast<int64_t>(ctx.ints(1).size());
  for (int64_t d = first; d < x.rank(); ++d) {
    x = spatial::apply_rows(b, x, d, adaptive_rows(x.shape()[d], out.shape[d]));
  }
  return {b.convert(x, out.dtype)};
}

// _adaptive_avg_pool2d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool2d_backward(LowerContext& ctx) { return adaptive_avg_pool_backward(ctx, 2); }

// _adaptive_avg_pool3d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool3d_backward(LowerContext& ctx) { return adaptive_avg_pool_backward(ctx, 3); }

// ---- adaptive and fractional max pooling, max_unpool ----------------------------
// adaptive_max_pool{2,3}d(self, output_size) -> (output, indices)
std::vector<Value> adaptive_max_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "adaptive_max_pool");
  const Value& x = ctx.tensor(0);
  const int64_t n = static_cast<int64_t>(ctx.ints(1).size());
  const int64_t first = x.rank() - n;
  if (out.numel() == 0) return {zeros(b, out), zeros(b, ctx.out_types.at(1))};
  Value v = x, idx = plane_index(b, x.shape(), n);
  std::vector<int64_t> window_dims;
  // Last dim first, so the dims still to split keep their positions.
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t d = first + k, in = x.shape()[d], o_size = out.shape[d];
    int64_t widest = 0;
    for (int64_t o = 0; o < o_size; ++o) {
      widest = std::max(widest, ((o + 1) * in + o_size - 1) / o_size - (o * in) / o_size);
    }
    std::vector<int64_t> taps;
    for (int64_t o = 0; o < o_size; ++o) {
      const int64_t start = (o * in) / o_size, end = ((o + 1) * in + o_size - 1) / o_size;
      for (int64_t j = 0; j < widest; ++j) taps.push_back(std::min(start + j, end - 1));
    }
    Shape split = v.shape();
    split[d] = o_size;
    split.insert(split.begin() + d + 1, widest);
    v = b.reshape(spatial::take_along(b, v, d, taps), split);
    idx = b.reshape(spatial::take_along(b, idx, d, taps), split);
  }
  for (int64_t k = 0; k < n; ++k) window_dims.push_back(first + 2 * k + 1);
  std::vector<Value> r = max_with_index(b, v, idx, window_dims);
  return {r[0], b.convert(r[1], ctx.out_types.at(1).dtype)};
}

// adaptive_max_pool{2,3}d_backward(grad_output, self, indices)
std::vector<Value> adaptive_max_pool2d_backward(LowerContext& ctx) {
  require_floating_input(ctx.out_types.at(0).dtype, "adaptive_max_pool2d_backward");
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(2), ctx.out_types.at(0), 2)};
}

std::vector<Value> adaptive_max_pool3d_backward(LowerContext& ctx) {
  require_floating_input(ctx.out_types.at(0).dtype, "adaptive_max_pool3d_backward");
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(2), ctx.out_types.at(0), 3)};
}

namespace {

// generate_intervals for every plane: the first input position of each of the
// `out` windows along one dim, from that dim's sample u in [0, 1):
// int((i + u) * alpha) - int(u * alpha), the last window flush with the end;
// alpha = (in - pool) / (out - 1). Arithmetic in the samples' dtype, rounded
// after each operation as PyTorch's scalar_t arithmetic does.
Value interval_starts(Builder& b, const Value& u, int64_t in, int64_t out, int64_t pool) {
  const int64_t planes = u.shape()[0];
  const TensorType t{ElementType::S64, {planes, out}};
  if (out <= 1) return b.splat(static_cast<double>(in - pool), t);
  const ElementType dt = u.dtype();
  auto round = [&](const Value& v) { return b.convert(b.convert(v, dt), ElementType::F32); };
  const TensorType f{ElementType::F32, {planes, out}};
  // alpha in scalar_t: (scalar_t)(in - pool) / (scalar_t)(out - 1).
  Value alpha = round(b.binary("divide", round(b.splat(static_cast<double>(in - pool), f)),
                               round(b.splat(static_cast<double>(out - 1), f))));
  Value uf = b.broadcast_in_dim(b.convert(u, ElementType::F32), f.shape, {0});
  Value i = b.convert(b.iota({ElementType::S64, f.shape}, 1), ElementType::F32);
  Value hi = b.convert(round(b.binary("multiply", round(b.binary("add", i, uf)), alpha)), ElementType::S64);
  Value lo = b.convert(round(b.binary("multiply", uf, alpha)), ElementType::S64);
  Value starts = b.binary("subtract", hi, lo);
  Value last = b.compare(b.iota(t, 1), b.splat(static_cast<double>(out - 1), t), CompareDirection::EQ);
  return b.select(last, b.splat(static_cast<double>(in - pool), t), starts);
}

}  // namespace

// fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples) -> (output, indices)
// random_samples [N, C, n]: sample k is for pooled dim k (2d: W then H).
std::vector<Value> fractional_max_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "fractional_max_pool");
  const Value& x = ctx.tensor(0);
  const std::vector<int64_t>& kernel = ctx.ints(1);
  const int64_t n = static_cast<int64_t>(kernel.size());
  const int64_t first = x.rank() - n;
  if (out.numel() == 0) return {zeros(b, out), zeros(b, ctx.out_types.at(1))};
  int64_t planes = 1, plane_size = 1;
  for (int64_t d = 0; d < first; ++d) planes *= x.shape()[d];
  for (int64_t d = first; d < x.rank(); ++d) plane_size *= x.shape()[d];
  Value samples = b.reshape(ctx.tensor(3), {planes, n});
  // Index shape: [P, o_0 .. o_{n-1}, k_0 .. k_{n-1}].
  Shape ishape{planes};
  for (int64_t k = 0; k < n; ++k) ishape.push_back(out.shape[first + k]);
  for (int64_t k = 0; k < n; ++k) ishape.push_back(kernel[k]);
  const TensorType it{ElementType::S64, ishape};
  Value within = b.splat(0, it);
  int64_t stride = 1;
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t d = first + k, in = x.shape()[d];
    // 2d samples are (W, H); 3d (T, H, W).
    const int64_t sample = n == 2 ? 1 - k : k;
    Value u = b.reshape(b.slice(samples, {0, sample}, {planes, sample + 1}, {1, 1}), {planes});
    Value starts = interval_starts(b, u, in, out.shape[d], kernel[k]);
    Value pos = b.binary("add", b.broadcast_in_dim(starts, ishape, {0, 1 + k}), b.iota(it, 1 + n + k));
    within = b.binary("add", within, b.binary("multiply", pos, b.splat(static_cast<double>(stride), it)));
    stride *= in;
  }
  Value global =
      b.binary("add", within, b.binary("multiply", b.iota(it, 0), b.splat(static_cast<double>(plane_size), it)));
  Value flat = b.reshape(x, {planes * plane_size});
  // `global` holds flat positions: its index vector dim is implicit (size 1).
  Value v = b.gather(flat, global, hlo::GatherDims::points(1, global.rank()), ishape);
  std::vector<int64_t> window_dims;
  for (int64_t k = 0; k < n; ++k) window_dims.push_back(1 + n + k);
  std::vector<Value> r = max_with_index(b, v, within, window_dims);
  return {b.reshape(r[0], out.shape), b.convert(b.reshape(r[1], out.shape), ctx.out_types.at(1).dtype)};
}

// fractional_max_pool{2,3}d_backward(grad_output, self, kernel_size, output_size, indices)
std::vector<Value> fractional_max_pool_backward(LowerContext& ctx) {
  require_floating_input(ctx.out_types.at(0).dtype, "fractional_max_pool_backward");
  const int64_t n = static_cast<int64_t>(ctx.ints(2).size());
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(4), ctx.out_types.at(0), n)};
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices,
// output_size, stride, padding): a zero tensor with each value written at its
// index within its plane.
std::vector<Value> max_unpool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  const int64_t n = static_cast<int64_t>(ctx.ints(2).size());
  if (out.numel() == 0 || x.type.numel() == 0) return {zeros(b, out)};
  const Planes p = planes_of(out.shape, x.shape(), n);
  Value idx = b.reshape(b.convert(ctx.tensor(1), ElementType::S64), {p.count, p.values});
  ctx.check_in_range(idx, 0, p.out, "max_unpool: Found an invalid max index");
  return {scatter_into_planes(b, x, idx, p, out, hlo::overwrite)};
}

}  // namespace torch_tpu::lower
