// Resampling: upsample_{nearest,linear,bilinear,bicubic,trilinear} (and the
// nearest-exact and antialiased variants) with their backward ops, and
// grid_sampler_{2,3}d.
//   - Upsampling is separable: each spatial dim is resampled alone with
//     weights that depend only on sizes, align_corners and the given scale,
//     so they are computed here, on the host, with PyTorch's formulas and in
//     its float arithmetic (aten/src/ATen/native/UpSample.h), and applied as
//     an [out, in] matrix (dot_general), or as weighted gathers when the
//     matrix would be large; the backward applies the transpose.
//     Nearest modes gather (exact for NaN and infinities).
//   - Half-width floats compute in f32 and round once (PyTorch's CPU kernels
//     keep some intermediates in the input dtype; results can differ by an
//     ulp of it).
#include "lower/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "lower/common/arith.h"
#include "lower/common/spatial.h"
#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace {

using spatial::take_along;

std::optional<double> optional_double(const LowerContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.double_arg(i);
}

// The helpers below compute in T, PyTorch's opmath type of the input: float
// for float32 and the half-width floats, double for float64 (the weights of
// a float64 resampling carry no float32 rounding).

// compute_scales_value<T>: a given positive scale means 1/scale, else in/out.
template <typename T>
T scales_value(std::optional<double> scale, int64_t in, int64_t out) {
  return (scale && *scale > 0.) ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / out;
}

// area_pixel_compute_scale<T>.
template <typename T>
T area_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / (out - 1) : T(0);
  return scales_value<T>(scale, in, out);
}

// area_pixel_compute_source_index<T>.
template <typename T>
T source_index(T scale, int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * o;
  const T src = scale * (o + T(0.5)) - T(0.5);
  return (!cubic && src < T(0)) ? T(0) : src;
}

// nearest_idx / nearest_exact_idx (the legacy mode keeps its 1x and 2x shortcuts).
int64_t nearest_index(int64_t o, int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  if (!exact) {
    if (out == in) return o;
    if (out == 2 * in) return o >> 1;
    const float s = scales_value<float>(scale, in, out);
    return std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
  }
  const float s = scales_value<float>(scale, in, out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>((o + 0.5) * s))), in - 1);
}

// guard_index_and_lambda.
template <typename T>
void guard_index(T real, int64_t in, int64_t& index, T& lambda) {
  index = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
  lambda = std::min(std::max(real - static_cast<T>(index), T(0)), T(1));
}

enum class Mode { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA };

// The antialiasing filters of _upsample_{bilinear,bicubic}2d_aa (PyTorch's
// aa_filter: a triangle, and Keys' cubic with a = -0.5 as Pillow).
double aa_filter(Mode mode, double x) {
  x = std::abs(x);
  if (mode == Mode::LinearAA) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One row per output of the antialiased resampling: the filter, stretched by
// the scale when downsampling, centred on the output's source position,
// clipped to the input and normalized to sum 1
// (_compute_indices_min_size_weights_aa in UpSampleKernel.cpp).
template <typename T>
void aa_rows(Mode mode, int64_t in, int64_t out, T scale, spatial::Rows& rows) {
  const double interp_size = mode == Mode::LinearAA ? 2.0 : 4.0;
  const T support = scale >= T(1) ? static_cast<T>(interp_size * 0.5 * scale) : static_cast<T>(interp_size * 0.5);
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const T invscale = scale >= T(1) ? T(1) / scale : T(1);
  for (int64_t o = 0; o < out; ++o) {
    const T center = static_cast<T>(scale * (o + 0.5));
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + T(0.5)), int64_t{0});
    const int64_t xsize =
        std::clamp(std::min(static_cast<int64_t>(center + support + T(0.5)), in) - xmin, int64_t{0}, max_size);
    std::vector<T> w(static_cast<size_t>(xsize));
    T total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] = static_cast<T>(aa_filter(mode, (j + xmin - center + T(0.5)) * invscale));
      total += w[j];
    }
    for (int64_t j = 0; j < xsize; ++j) rows[o].push_back({xmin + j, total != T(0) ? w[j] / total : w[j]});
  }
}

std::vector<int64_t> nearest_indices(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  std::vector<int64_t> idx;
  for (int64_t o = 0; o < out; ++o) idx.push_back(nearest_index(o, in, out, scale, exact));
  return idx;
}

// The input positions and weights each output of one dim reads, computed in
// T (see scales_value).
template <typename T>
spatial::Rows interpolation_rows(Mode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  spatial::Rows rows(static_cast<size_t>(out));
  const T s = area_scale<T>(in, out, align_corners, scale);
  if (mode == Mode::LinearAA || mode == Mode::CubicAA) {
    aa_rows<T>(mode, in, out, s, rows);
    return rows;
  }
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::Linear) {
      // compute_source_index_and_lambda: equal sizes copy.
      if (out == in) {
        rows[o].push_back({o, 1.0});
        continue;
      }
      int64_t i0;
      T l1;
      guard_index<T>(source_index<T>(s, o, align_corners, false), in, i0, l1);
      const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      rows[o].push_back({i0, static_cast<double>(T(1) - l1)});
      rows[o].push_back({i1, static_cast<double>(l1)});
      continue;
    }
    // Cubic: get_cubic_upsample_coefficients with A = -0.75, taps clamped to the edge.
    int64_t i0;
    T t;
    guard_index<T>(source_index<T>(s, o, align_corners, true), in, i0, t);
    const T A = -0.75;
    auto conv1 = [A](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto conv2 = [A](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    const T x2 = T(1) - t;
    const T c[4] = {conv2(t + T(1)), conv1(t), conv1(x2), conv2(x2 + T(1))};
    for (int64_t j = 0; j < 4; ++j) {
      rows[o].push_back({std::max<int64_t>(std::min(i0 - 1 + j, in - 1), 0), static_cast<double>(c[j])});
    }
  }
  return rows;
}

// The rows of one dim: nearest modes' single taps, else the interpolation's
// weights in the precision of `acc`, the resampling's accumulation type.
spatial::Rows resample_rows(Mode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                            ElementType acc) {
  if (mode == Mode::Nearest || mode == Mode::NearestExact) {
    spatial::Rows rows(static_cast<size_t>(out));
    const auto idx = nearest_indices(in, out, scale, mode == Mode::NearestExact);
    for (int64_t o = 0; o < out; ++o) rows[o].push_back({idx[o], 1.0});
    return rows;
  }
  return acc == ElementType::F64 ? interpolation_rows<double>(mode, in, out, align_corners, scale)
                                 : interpolation_rows<float>(mode, in, out, align_corners, scale);
}

struct ResampleArgs {
  Mode mode;
  size_t align_arg;    // 0: none (nearest)
  size_t scale_first;  // index of the first scales_* argument
};

// upsample_*(self, output_size, [align_corners,] scales...)
std::vector<Value> resample_forward(LowerContext& ctx, const ResampleArgs& a) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const Value& self = ctx.tensor(0);
  const int64_t n = static_cast<int64_t>(ctx.ints(1).size());
  const int64_t first = out.rank() - n;
  const bool align = a.align_arg ? ctx.bool_arg(a.align_arg) : false;
  if (out.numel() == 0) return {zeros(b, out)};
  const bool nearest = a.mode == Mode::Nearest || a.mode == Mode::NearestExact;
  if (!nearest) require_floating_input(out.dtype, "upsample");
  const ElementType acc = accumulation_type(self.dtype());
  Value x = nearest ? self : b.convert(self, acc);
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t d = first + k, in_d = x.shape()[d], out_d = out.shape[d];
    const auto scale = optional_double(ctx, a.scale_first + k);
    if (nearest) {
      x = take_along(b, x, d, nearest_indices(in_d, out_d, scale, a.mode == Mode::NearestExact));
    } else {
      x = spatial::apply_rows(b, x, d, resample_rows(a.mode, in_d, out_d, align, scale, acc));
    }
  }
  return {b.convert(x, out.dtype)};
}

// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)
std::vector<Value> resample_backward(LowerContext& ctx, const ResampleArgs& a) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "upsample_backward");
  const int64_t n = static_cast<int64_t>(ctx.ints(1).size());
  const int64_t first = out.rank() - n;
  const bool align = a.align_arg ? ctx.bool_arg(a.align_arg) : false;
  const ElementType acc = accumulation_type(out.dtype);
  Value g = b.convert(ctx.tensor(0), acc);
  if (out.numel() == 0) return {zeros(b, out)};
  for (int64_t k = 0; k < n; ++k) {
    const int64_t d = first + k, in_d = out.shape[d], out_d = g.shape()[d];
    const auto rows = resample_rows(a.mode, in_d, out_d, align, optional_double(ctx, a.scale_first + k), acc);
    g = spatial::apply_rows_transposed(b, g, d, rows, in_d);
  }
  return {b.convert(g, out.dtype)};
}

}  // namespace

// upsample_nearest{1,2,3}d(self, output_size, scales...)
std::vector<Value> upsample_nearest(LowerContext& ctx) { return resample_forward(ctx, {Mode::Nearest, 0, 2}); }

// _upsample_nearest_exact{1,2,3}d(self, output_size, scales...)
std::vector<Value> upsample_nearest_exact(LowerContext& ctx) {
  return resample_forward(ctx, {Mode::NearestExact, 0, 2});
}

// upsample_{linear1d,bilinear2d,trilinear3d}(self, output_size, align_corners, scales...)
std::vector<Value> upsample_linear(LowerContext& ctx) { return resample_forward(ctx, {Mode::Linear, 2, 3}); }

// upsample_bicubic2d(self, output_size, align_corners, scales_h, scales_w)
std::vector<Value> upsample_bicubic(LowerContext& ctx) { return resample_forward(ctx, {Mode::Cubic, 2, 3}); }

// _upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners, scales_h, scales_w)
std::vector<Value> upsample_bilinear_aa(LowerContext& ctx) { return resample_forward(ctx, {Mode::LinearAA, 2, 3}); }
std::vector<Value> upsample_bicubic_aa(LowerContext& ctx) { return resample_forward(ctx, {Mode::CubicAA, 2, 3}); }
std::vector<Value> upsample_bilinear_aa_backward(LowerContext& ctx) {
  return resample_backward(ctx, {Mode::LinearAA, 3, 4});
}
std::vector<Value> upsample_bicubic_aa_backward(LowerContext& ctx) {
  return resample_backward(ctx, {Mode::CubicAA, 3, 4});
}

std::vector<Value> upsample_nearest_backward(LowerContext& ctx) {
  return resample_backward(ctx, {Mode::Nearest, 0, 3});
}

std::vector<Value> upsample_nearest_exact_backward(LowerContext& ctx) {
  return resample_backward(ctx, {Mode::NearestExact, 0, 3});
}

std::vector<Value> upsample_linear_backward(LowerContext& ctx) { return resample_backward(ctx, {Mode::Linear, 3, 4}); }

std::vector<Value> upsample_bicubic_backward(LowerContext& ctx) { return resample_backward(ctx, {Mode::Cubic, 3, 4}); }

}  // namespace torch_tpu::lower

// ---- grid_sampler_{2,3}d ----------------------------------------------------
// PyTorch's GridSampler.h: a grid point (x, y[, z]) in [-1, 1] is unnormalized
// to a source position per dim, then border-clipped or reflected (padding
// modes zeros=0, border=1, reflection=2); bilinear (0) weighs the 2^n
// neighbours, nearest (1) rounds half to even, bicubic (2, 2d only) weighs
// 4x4 taps whose indices are padded one by one. Out-of-range taps read 0.
// Values are gathered channels-last ([N, spatial..., C]) per tap; the
// backward scatter-adds into the input and differentiates the weights
// (times the derivative of the source position) for the grid.
namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Elementwise arithmetic on values of one shape, in the op's compute type
// (f32 for float32 and the half-width dtypes, f64 for float64, as PyTorch's
// CPU kernel computes in scalar_t). With `round_to` (the input's half-width
// dtype) every result is rounded to it, operation by operation.
struct Arith {
  Builder& b;
  TensorType t;
  std::optional<ElementType> round_to;
  Value r(const Value& v) const { return round_to ? b.convert(b.convert(v, *round_to), v.dtype()) : v; }
  Value c(double v) const { return r(b.splat(v, t)); }
  Value add(const Value& x, const Value& y) const { return r(b.binary("add", x, y)); }
  Value sub(const Value& x, const Value& y) const { return r(b.binary("subtract", x, y)); }
  Value mul(const Value& x, const Value& y) const { return r(b.binary("multiply", x, y)); }
  Value div(const Value& x, const Value& y) const { return r(b.binary("divide", x, y)); }
  Value lt(const Value& x, const Value& y) const { return b.compare(x, y, CompareDirection::LT); }
  Value le(const Value& x, const Value& y) const { return b.compare(x, y, CompareDirection::LE); }
  Value ge(const Value& x, const Value& y) const { return b.compare(x, y, CompareDirection::GE); }
  Value sel(const Value& p, const Value& x, const Value& y) const { return b.select(p, x, y); }
  Value floor(const Value& x) const { return b.unary("floor", x); }
};

struct SourceCoord {
  Value pos;   // source position (compute type)
  Value grad;  // d pos / d grid coordinate
};

// clip_coordinates_set_grad.
SourceCoord clip(const Arith& m, const SourceCoord& s, int64_t size) {
  Value hi = m.c(static_cast<double>(size - 1));
  Value inside = m.b.binary("and", m.lt(m.c(0), s.pos), m.lt(s.pos, hi));
  Value pos = m.sel(m.le(s.pos, m.c(0)), m.c(0), m.sel(m.ge(s.pos, hi), hi, s.pos));
  return {pos, m.sel(inside, s.grad, m.c(0))};
}

// reflect_coordinates_set_grad over [twice_low / 2, twice_high / 2].
SourceCoord reflect(const Arith& m, const SourceCoord& s, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return {m.c(0), m.c(0)};
  const double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Value in = m.sub(s.pos, m.c(lo));
  Value negative = m.lt(in, m.c(0));
  Value sign = m.sel(negative, m.c(-1), m.c(1));
  in = m.b.unary("abs", in);
  Value extra = m.r(m.b.binary("remainder", in, m.c(span)));
  Value flips = m.floor(m.div(in, m.c(span)));
  Value even = m.b.compare(m.b.binary("remainder", flips, m.c(2)), m.c(0), CompareDirection::EQ);
  Value pos = m.sel(even, m.add(extra, m.c(lo)), m.add(m.sub(m.c(span), extra), m.c(lo)));
  Value g = m.mul(s.grad, m.sel(even, sign, m.sub(m.c(0), sign)));
  return {pos, g};
}

// compute_coordinates: the padding mode applied to a source position.
SourceCoord pad_coordinate(const Arith& m, SourceCoord s, int64_t size, int64_t padding, bool align) {
  if (padding == 1) return clip(m, s, size);
  if (padding == 2) {
    s = align ? reflect(m, s, 0, 2 * (size - 1)) : reflect(m, s, -1, 2 * size - 1);
    return clip(m, s, size);
  }
  return s;
}

// grid_sampler_unnormalize_set_grad.
SourceCoord unnormalize(const Arith& m, const Value& coord, int64_t size, bool align) {
  if (align)
    return {m.mul(m.div(m.add(coord, m.c(1)), m.c(2)), m.c(static_cast<double>(size - 1))), m.c((size - 1) / 2.0)};
  return {m.div(m.sub(m.mul(m.add(coord, m.c(1)), m.c(static_cast<double>(size))), m.c(1)), m.c(2)), m.c(size / 2.0)};
}

// One tap: an integer position per spatial dim (spatial order), its weight,
// and d weight / d source position per dim (grid order: x first).
struct Tap {
  std::vector<Value> index;  // compute type holding integers, [N, O...]
  Value weight;
  std::vector<Value> dweight;
};

// Keys' cubic coefficients (A = -0.75) for offsets -1..2 and their derivatives in t.
std::vector<Value> cubic_coeffs(const Arith& m, const Value& t, bool derivative) {
  const double A = -0.75;
  auto conv1 = [&](const Value& x) {  // ((A+2)x - (A+3))x^2 + 1, |x| <= 1
    return m.add(m.mul(m.mul(m.sub(m.mul(m.c(A + 2), x), m.c(A + 3)), x), x), m.c(1));
  };
  auto conv2 = [&](const Value& x) {  // ((Ax - 5A)x + 8A)x - 4A, 1 < |x| < 2
    return m.sub(m.mul(m.add(m.mul(m.sub(m.mul(m.c(A), x), m.c(5 * A)), x), m.c(8 * A)), x), m.c(4 * A));
  };
  auto dconv1 = [&](const Value& x) {  // 3(A+2)x^2 - 2(A+3)x
    return m.mul(m.sub(m.mul(m.c(3 * (A + 2)), x), m.c(2 * (A + 3))), x);
  };
  auto dconv2 = [&](const Value& x) {  // 3Ax^2 - 10Ax + 8A
    return m.add(m.mul(m.sub(m.mul(m.c(3 * A), x), m.c(10 * A)), x), m.c(8 * A));
  };
  Value x0 = m.add(t, m.c(1)), x1 = t, x2 = m.sub(m.c(1), t), x3 = m.add(x2, m.c(1));
  if (!derivative) return {conv2(x0), conv1(x1), conv1(x2), conv2(x3)};
  Value neg = m.c(-1);
  return {dconv2(x0), dconv1(x1), m.mul(neg, dconv1(x2)), m.mul(neg, dconv2(x3))};
}

struct GridSample {
  int64_t n = 0;  // spatial dims
  Shape spatial;  // input spatial sizes (D, H, W order)
  std::vector<Tap> taps;
  std::vector<std::vector<Value>> weights_1d;  // per spatial dim, per tap offset
  std::vector<Value> coord_grad;               // d source position / d grid coordinate, per spatial dim
};

// Taps of every grid point. Spatial dim k (0 = first, e.g. H of HxW) reads
// grid component n - 1 - k.
GridSample grid_taps(LowerContext& ctx, const Value& input, const Value& grid, int64_t mode, int64_t padding,
                     bool align, std::optional<ElementType> round_to) {
  Builder& b = ctx.b;
  GridSample g;
  g.n = input.rank() - 2;
  g.spatial.assign(input.shape().begin() + 2, input.shape().end());
  Shape pts(grid.shape().begin(), grid.shape().end() - 1);
  const Arith m{b, {grid.dtype(), pts}, round_to};
  std::vector<Value> pos(g.n), grad(g.n);
  for (int64_t k = 0; k < g.n; ++k) {
    const int64_t comp = g.n - 1 - k;
    Shape start(grid.rank(), 0), limit = grid.shape(), strides(grid.rank(), 1);
    start.back() = comp;
    limit.back() = comp + 1;
    Value coord = b.reshape(b.slice(grid, start, limit, strides), pts);
    SourceCoord s = unnormalize(m, coord, g.spatial[k], align);
    if (mode != 2) s = pad_coordinate(m, s, g.spatial[k], padding, align);
    pos[k] = s.pos;
    grad[k] = s.grad;
  }
  g.coord_grad = grad;
  if (mode == 1) {  // nearest: round half to even
    Tap t;
    for (int64_t k = 0; k < g.n; ++k) t.index.push_back(b.unary("round_nearest_even", pos[k]));
    t.weight = m.c(1);
    for (int64_t k = 0; k < g.n; ++k) t.dweight.push_back(m.c(0));
    g.taps.push_back(t);
    return g;
  }
  // Per dim: the candidate indices, their 1-d weights and derivatives.
  std::vector<std::vector<Value>> idx(g.n), w(g.n), dw(g.n);
  for (int64_t k = 0; k < g.n; ++k) {
    Value base = m.floor(pos[k]);
    Value frac = m.sub(pos[k], base);
    if (mode == 0) {
      // PyTorch's (ix_se - ix) and (ix - ix_nw).
      idx[k] = {base, m.add(base, m.c(1))};
      w[k] = {m.sub(idx[k][1], pos[k]), frac};
      dw[k] = {m.c(-1), m.c(1)};
    } else {
      w[k] = cubic_coeffs(m, frac, false);
      dw[k] = cubic_coeffs(m, frac, true);
      for (int64_t j = 0; j < 4; ++j) {
        // get_value_bounded: the padding mode applied to each tap's index.
        SourceCoord tap{m.add(base, m.c(static_cast<double>(j - 1))), m.c(0)};
        Value p = pad_coordinate(m, tap, g.spatial[k], padding, align).pos;
        idx[k].push_back(padding == 0 ? p : m.b.unary("floor", p));
      }
    }
  }
  g.weights_1d = w;
  const int64_t per_dim = mode == 0 ? 2 : 4;
  int64_t count = 1;
  for (int64_t k = 0; k < g.n; ++k) count *= per_dim;
  for (int64_t c = 0; c < count; ++c) {
    Tap t;
    std::vector<int64_t> sel(g.n);
    for (int64_t k = g.n - 1, r = c; k >= 0; --k, r /= per_dim) sel[k] = r % per_dim;
    // PyTorch multiplies the x weight first: (wx * wy) * wz.
    t.weight = w[g.n - 1][sel[g.n - 1]];
    for (int64_t k = g.n - 2; k >= 0; --k) t.weight = m.mul(t.weight, w[k][sel[k]]);
    for (int64_t k = 0; k < g.n; ++k) t.index.push_back(idx[k][sel[k]]);
    for (int64_t k = 0; k < g.n; ++k) {
      Value d = dw[k][sel[k]];
      for (int64_t j = 0; j < g.n; ++j) {
        if (j != k) d = m.mul(d, w[j][sel[j]]);
      }
      t.dweight.push_back(d);
    }
    g.taps.push_back(t);
  }
  return g;
}

// Tap positions as gather/scatter indices [N, O..., 1 + n] (batch, spatial...),
// clamped in range, and whether the tap lies inside the input.
std::pair<Value, Value> tap_indices(Builder& b, const GridSample& g, const Tap& t) {
  const Shape& pts = t.weight.shape();
  const TensorType f{t.weight.dtype(), pts};
  Shape one = pts;
  one.push_back(1);
  Value inside = b.splat(1, {ElementType::Pred, pts});
  std::vector<Value> parts{b.reshape(b.iota({ElementType::S64, pts}, 0), one)};
  for (int64_t k = 0; k < g.n; ++k) {
    const Value& i = t.index[k];
    Value hi = b.splat(static_cast<double>(g.spatial[k] - 1), f);
    inside = b.binary(
        "and", inside,
        b.binary("and", b.compare(i, b.splat(0, f), CompareDirection::GE), b.compare(i, hi, CompareDirection::LE)));
    Value clamped = b.clamp(b.splat(0, f), i, hi);
    parts.push_back(b.reshape(b.convert(clamped, ElementType::S64), one));
  }
  return {b.concatenate(parts, static_cast<int64_t>(pts.size())), inside};
}

// A tap addresses channels-last values [N, S..., C] by (batch, spatial...)
// positions [N, O..., 1 + n] and reads or writes all C channels there.
std::vector<int64_t> tap_position_dims(int64_t n) {
  std::vector<int64_t> dims;
  for (int64_t k = 0; k <= n; ++k) dims.push_back(k);
  return dims;
}

hlo::GatherDims tap_gather_dims(int64_t n, int64_t channels) {
  hlo::GatherDims g;
  g.offset_dims = {n + 1};
  g.collapsed_slice_dims = tap_position_dims(n);
  g.start_index_map = tap_position_dims(n);
  g.index_vector_dim = n + 1;
  g.slice_sizes.assign(n + 1, 1);
  g.slice_sizes.push_back(channels);
  return g;
}

hlo::ScatterDims tap_scatter_dims(int64_t n) {
  hlo::ScatterDims s;
  s.update_window_dims = {n + 1};
  s.inserted_window_dims = tap_position_dims(n);
  s.scatter_dims_to_operand_dims = tap_position_dims(n);
  s.index_vector_dim = n + 1;
  return s;
}

// input [N, C, S...] -> [N, S..., C] and back.
std::vector<int64_t> to_channels_last(int64_t rank) {
  std::vector<int64_t> p{0};
  for (int64_t d = 2; d < rank; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}
std::vector<int64_t> to_channels_first(int64_t rank) {
  std::vector<int64_t> p{0, rank - 1};
  for (int64_t d = 1; d < rank - 1; ++d) p.push_back(d);
  return p;
}

// Tap values [N, O..., C], zero outside the input.
Value gather_tap(Builder& b, const Value& cl, const GridSample& g, const Tap& t) {
  auto [indices, inside] = tap_indices(b, g, t);
  Shape shape = t.weight.shape();
  const int64_t C = cl.shape().back();
  shape.push_back(C);
  Value v = b.gather(cl, indices, tap_gather_dims(g.n, C), shape);
  Value mask = b.broadcast_in_dim(inside, shape, [&] {
    std::vector<int64_t> d;
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()) - 1; ++i) d.push_back(i);
    return d;
  }());
  return b.select(mask, v, b.splat(0, v.type));
}

Value along_channels(Builder& b, const Value& per_point, const Shape& shape) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < per_point.rank(); ++i) d.push_back(i);
  return b.broadcast_in_dim(per_point, shape, d);
}

}  // namespace

// grid_sampler_{2,3}d(input, grid, interpolation_mode, padding_mode, align_corners)
std::vector<Value> grid_sampler(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  require_floating_input(out.dtype, "grid_sampler");
  if (out.numel() == 0) return {zeros(b, out)};
  const ElementType compute = accumulation_type(out.dtype);
  Value input = b.convert(ctx.tensor(0), compute);
  Value grid = b.convert(ctx.tensor(1), compute);
  if (input.type.numel() == 0) return {zeros(b, out)};
  std::optional<ElementType> round_to;
  if (accumulation_type(out.dtype) != out.dtype) round_to = out.dtype;
  const GridSample g = grid_taps(ctx, input, grid, ctx.int_arg(2), ctx.int_arg(3), ctx.bool_arg(4), round_to);
  Value cl = b.transpose(input, to_channels_last(input.rank()));
  Value sum;
  if (ctx.int_arg(2) == 2) {
    // Bicubic: PyTorch interpolates each of the 4 rows along x, then the rows along y.
    auto interp = [&](const std::vector<Value>& vs, const std::vector<Value>& w) {
      const Arith m{b, vs[0].type, round_to};
      Value r = m.mul(vs[0], along_channels(b, w[0], vs[0].shape()));
      for (size_t j = 1; j < vs.size(); ++j) r = m.add(r, m.mul(vs[j], along_channels(b, w[j], vs[j].shape())));
      return r;
    };
    std::vector<Value> rows;
    for (size_t i = 0; i < 4; ++i) {
      std::vector<Value> vs;
      for (size_t j = 0; j < 4; ++j) vs.push_back(gather_tap(b, cl, g, g.taps[i * 4 + j]));
      rows.push_back(interp(vs, g.weights_1d[1]));
    }
    sum = interp(rows, g.weights_1d[0]);
  } else {
    for (const Tap& t : g.taps) {
      Value v = gather_tap(b, cl, g, t);
      const Arith m{b, v.type, round_to};
      Value term = m.mul(v, along_channels(b, t.weight, v.shape()));
      sum = sum.name.empty() ? term : m.add(sum, term);
    }
  }
  return {b.convert(b.transpose(sum, to_channels_first(sum.rank())), out.dtype)};
}

// grid_sampler_{2,3}d_backward(grad_output, input, grid, interpolation_mode,
// padding_mode, align_corners, output_mask) -> (grad_input?, grad_grid)
std::vector<Value> grid_sampler_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const std::vector<int64_t>& mask = ctx.ints(6);
  const bool want_input = mask.empty() || mask[0];
  const TensorType& in_t = ctx.tensor(1).type;
  const TensorType& grid_t = ctx.tensor(2).type;
  require_floating_input(grid_t.dtype, "grid_sampler_backward");
  const ElementType compute = accumulation_type(grid_t.dtype);
  Value input = b.convert(ctx.tensor(1), compute);
  Value grid = b.convert(ctx.tensor(2), compute);
  Value go = b.convert(ctx.tensor(0), compute);
  const int64_t mode = ctx.int_arg(3);
  if (go.type.numel() == 0 || input.type.numel() == 0) {
    std::vector<Value> r;
    if (want_input) r.push_back(zeros(b, in_t));
    r.push_back(zeros(b, grid_t));
    return r;
  }
  const GridSample g = grid_taps(ctx, input, grid, mode, ctx.int_arg(4), ctx.bool_arg(5), std::nullopt);
  Value cl = b.transpose(input, to_channels_last(input.rank()));
  Value gcl = b.transpose(go, to_channels_last(go.rank()));  // [N, O..., C]
  const Shape& pts = g.taps[0].weight.shape();
  const Arith m{b, {compute, pts}, std::nullopt};
  std::vector<Value> dpos(g.n, m.c(0));
  Value grad_cl = b.splat(0, cl.type);
  const std::vector<int64_t> channel_dim{static_cast<int64_t>(pts.size())};
  std::vector<Value> all_indices, all_updates;  // every tap's, scattered at once
  for (const Tap& t : g.taps) {
    auto [indices, inside] = tap_indices(b, g, t);
    if (want_input) {
      all_indices.push_back(indices);
      all_updates.push_back(b.binary("multiply", gcl, along_channels(b, m.sel(inside, t.weight, m.c(0)), gcl.shape())));
    }
    if (mode == 1) continue;  // nearest: the grid gets no gradient
    Value v = gather_tap(b, cl, g, t);
    Value gv = b.reduce(b.binary("multiply", v, gcl), b.constant(0, compute), channel_dim, "add");
    for (int64_t k = 0; k < g.n; ++k) dpos[k] = m.add(dpos[k], m.mul(gv, t.dweight[k]));
  }
  if (want_input) {
    Value indices = all_indices.size() == 1 ? all_indices[0] : b.concatenate(all_indices, 0);
    Value updates = all_updates.size() == 1 ? all_updates[0] : b.concatenate(all_updates, 0);
    grad_cl = b.scatter(grad_cl, indices, updates, tap_scatter_dims(g.n), hlo::accumulate);
  }
  std::vector<Value> r;
  if (want_input) r.push_back(b.convert(b.transpose(grad_cl, to_channels_first(grad_cl.rank())), in_t.dtype));
  Shape one = pts;
  one.push_back(1);
  std::vector<Value> comps(g.n);
  for (int64_t k = 0; k < g.n; ++k) {
    comps[g.n - 1 - k] = b.reshape(mode == 1 ? m.c(0) : m.mul(dpos[k], g.coord_grad[k]), one);
  }
  r.push_back(b.convert(b.concatenate(comps, static_cast<int64_t>(pts.size())), grid_t.dtype));
  return r;
}

}  // namespace torch_tpu::lower
