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
#include "lower/unpool.h"

#include <algorithm>
#include <limits>
#include <string>

#include "lower/resample.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

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
  Shape shape;
  for (int64_t i = 0; i < v.rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) shape.push_back(v.shape()[i]);
  }
  const TensorType sv{v.dtype(), {}}, si{ElementType::S64, {}};
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
  return b.op_with_region("reduce", {v, idx, lowest, no_index}, {{v.dtype(), shape}, {ElementType::S64, shape}},
                          "dimensions = " + Builder::dims_attr(dims), {sv, si, sv, si}, body);
}

void require_float(ElementType t, const char* op) {
  if (!hlo::is_float(t)) throw NotImplementedForDtype(std::string(op) + ": only floating point inputs are supported");
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

}  // namespace

// grad (planes..., pooled...) added into a zero tensor of `out` at `indices`
// (flat positions within each plane of out's trailing n dims).
Value scatter_add_planes(Builder& b, const Value& grad, const Value& indices, const TensorType& out, int64_t n) {
  if (out.numel() == 0 || grad.type.numel() == 0) return zeros(b, out);
  const Planes p = planes_of(out.shape, grad.shape(), n);
  Value idx = b.reshape(b.convert(indices, ElementType::S64), {p.count, p.values});
  Value sum = scatter_into_planes(b, grad, idx, p, {accumulation_type(out.dtype), out.shape}, hlo::accumulate);
  return b.convert(sum, out.dtype);
}

// adaptive_max_pool{2,3}d(self, output_size) -> (output, indices)
std::vector<Value> adaptive_max_pool(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_float(out.dtype, "adaptive_max_pool");
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
  require_float(ctx.out_types.at(0).dtype, "adaptive_max_pool2d_backward");
  return {scatter_add_planes(ctx.b, ctx.tensor(0), ctx.tensor(2), ctx.out_types.at(0), 2)};
}

std::vector<Value> adaptive_max_pool3d_backward(LowerContext& ctx) {
  require_float(ctx.out_types.at(0).dtype, "adaptive_max_pool3d_backward");
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
  require_float(out.dtype, "fractional_max_pool");
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
  Value global = b.binary("add", within, b.binary("multiply", b.iota(it, 0), b.splat(static_cast<double>(plane_size), it)));
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
  require_float(ctx.out_types.at(0).dtype, "fractional_max_pool_backward");
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
