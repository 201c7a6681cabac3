// Convolution, forward and backward, 1d/2d/3d, plain and transposed, with
// groups. nn.ConvNd and F.convNd reach the device as aten::convolution (the
// overrideable twins that at::_convolution would call for PrivateUse1 have no
// meta kernel, so the device takes the op one step earlier), and autograd
// calls aten::convolution_backward. Every case is one "stablehlo.convolution":
//   - a transposed convolution is a convolution of the input dilated by the
//     stride (lhs_dilation) with the spatially flipped, group-regrouped weight;
//   - grad_input of a convolution is the transposed convolution of grad_output
//     (and the other way round);
//   - grad_weight is a convolution of the input with grad_output in which the
//     batch dim is contracted (the rule JAX's conv_general_dilated VJP uses).
// Half-width floats convolve in f32 and round once, as PyTorch's CPU kernels.
//
// On the CPU plugin two cases take another form (lower::Platform::Cpu), where
// XLA:CPU's generic convolution loop is 25-900x slower than PyTorch's CPU
// kernels (benchmarks/conv.py) and a TPU's convolution unit loses nothing:
//   - a depthwise convolution (one input channel per group) is a sum of k^d
//     shifted, strided slices of the padded input times one weight per
//     channel: one fused elementwise loop; its gradients are the same sums
//     run backwards (pads with interior padding for grad_input, reductions
//     for grad_weight);
//   - the weight gradient of a grouped convolution (batch_group_count, the
//     slow case) is one plain weight gradient per group, concatenated.
#include "lower/conv.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lower/common/output_mask.h"
#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

using hlo::ConvDims;
using hlo::ConvWindow;

// PyTorch's per-op parameters, each expanded to one entry per spatial dim.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t n, int64_t fallback) {
  if (v.empty()) return std::vector<int64_t>(n, fallback);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n) throw std::invalid_argument("convolution: parameter list length differs from the spatial rank");
  return v;
}

// Arguments from `first` on: stride, padding, dilation, transposed, output_padding, groups.
ConvParams conv_params(const LowerContext& ctx, size_t first, size_t spatial) {
  ConvParams p;
  p.stride = per_dim(ctx.ints(first), spatial, 1);
  p.padding = per_dim(ctx.ints(first + 1), spatial, 0);
  p.dilation = per_dim(ctx.ints(first + 2), spatial, 1);
  p.transposed = ctx.bool_arg(first + 3);
  p.output_padding = per_dim(ctx.ints(first + 4), spatial, 0);
  p.groups = ctx.int_arg(first + 5, 1);
  // at::_convolution's checks (this overload is reached without it).
  for (int64_t v : p.padding) {
    if (v < 0) throw std::runtime_error("negative padding is not supported");
  }
  for (int64_t v : p.stride) {
    if (v <= 0) throw std::runtime_error("non-positive stride is not supported");
  }
  return p;
}

// A convolution at the context's matmul precision.
Value convolution_op(LowerContext& ctx, const Value& lhs, const Value& rhs, const ConvWindow& w, const ConvDims& dims,
                     const TensorType& result) {
  return ctx.b.convolution(at_matmul_precision(ctx, lhs), at_matmul_precision(ctx, rhs), dims, w, result,
                           ctx.matmul_precision);
}

// [b, f, *]x[o, i, *]->[b, f, *]
ConvDims standard_dims(size_t spatial) { return {spatial}; }

// y[n, o, *] of a plain convolution: x [N, C, *], w [O, C/g, *K], y of type `out`.
Value conv_forward(LowerContext& ctx, const Value& x, const Value& w, const ConvParams& p, const TensorType& out) {
  const size_t spatial = x.rank() - 2;
  ConvWindow win{p.stride, p.padding, {}, std::vector<int64_t>(spatial, 1), p.dilation, p.groups, 1};
  for (size_t i = 0; i < spatial; ++i) {
    // The last window starts at (o-1)*s and spans d(k-1)+1; padding past it
    // is unread. For a forward convolution this is `padding` less the unread
    // tail (PyTorch's floor((in + 2p - d(k-1) - 1) / s) + 1). As grad_input of
    // a transposed convolution, grad_output also holds the output_padding
    // rows, which no input row reached when output_padding >= stride (allowed
    // where dilation > output_padding), so the high padding is cut by them
    // (negative where they exceed `padding`).
    const int64_t in = x.shape()[i + 2], k = w.shape()[i + 2], o = out.shape[i + 2];
    win.pad_hi.push_back((o - 1) * p.stride[i] + p.dilation[i] * (k - 1) + 1 - in - p.padding[i]);
  }
  return convolution_op(ctx, x, w, win, standard_dims(spatial), out);
}

// A transposed weight [Cin, Cout/g, *K] as the plain weight [Cout, Cin/g, *K]
// of the equivalent convolution: groups regrouped, spatial dims flipped.
Value transposed_weight(Builder& b, const Value& w, int64_t groups) {
  const Shape& s = w.shape();
  const size_t spatial = s.size() - 2;
  Shape grouped{groups, s[0] / groups, s[1]};
  for (size_t i = 0; i < spatial; ++i) grouped.push_back(s[i + 2]);
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < spatial; ++i) perm.push_back(3 + i);
  Value t = b.transpose(b.reshape(w, grouped), perm);
  Shape plain{s[1] * groups, s[0] / groups};
  std::vector<int64_t> flip;
  for (size_t i = 0; i < spatial; ++i) {
    plain.push_back(s[i + 2]);
    flip.push_back(2 + i);
  }
  Value r = b.reshape(t, plain);
  return b.reverse(r, flip);
}

// y of a transposed convolution of x [N, Cin, *] with w [Cin, Cout/g, *K]
// whose result type `out` fixes the output_padding.
Value conv_transposed(LowerContext& ctx, const Value& x, const Value& w, const ConvParams& p, const TensorType& out) {
  const size_t spatial = x.rank() - 2;
  ConvWindow win{std::vector<int64_t>(spatial, 1), {}, {}, p.stride, p.dilation, p.groups, 1};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x.shape()[i + 2], k = w.shape()[i + 2], o = out.shape[i + 2];
    const int64_t lo = p.dilation[i] * (k - 1) - p.padding[i];
    win.pad_lo.push_back(lo);
    // The dilated input spans (in-1)*stride+1; the rest of `o` is padding.
    win.pad_hi.push_back(o + p.dilation[i] * (k - 1) - lo - ((in - 1) * p.stride[i] + 1));
  }
  return convolution_op(ctx, x, transposed_weight(ctx.b, w, p.groups), win, standard_dims(spatial), out);
}

// d<conv(x, w), g>/dw for a plain convolution with x [N, C, *], g [N, O, *]:
// a convolution over the batch dim (x's channels as batch, g as the kernel),
// with stride and dilation trading places; groups become batch groups.
Value conv_weight_grad(LowerContext& ctx, const Value& x, const Value& g, const ConvParams& p, const TensorType& out);

// Channels [j*n, (j+1)*n) of v [N, C, *].
Value channel_block(Builder& b, const Value& v, int64_t j, int64_t n) {
  Shape start(v.rank(), 0), limit = v.shape();
  start[1] = j * n;
  limit[1] = (j + 1) * n;
  return b.slice(v, start, limit, Shape(v.rank(), 1));
}

// The grouped weight gradient as one plain weight gradient per group,
// concatenated: XLA:CPU's batch_group_count convolution is 70x slower than
// PyTorch's CPU kernel (benchmarks/conv.py, groups=8); G plain ones are not.
// Up to 32 groups (more are depthwise-like, one program would hold them all).
bool weight_grad_per_group(const LowerContext& ctx, const ConvParams& p) {
  return ctx.platform == Platform::Cpu && p.groups > 1 && p.groups <= 32;
}

Value grouped_weight_grad(LowerContext& ctx, const Value& x, const Value& g, const ConvParams& p,
                          const TensorType& out) {
  ConvParams plain = p;
  plain.groups = 1;
  const int64_t xs = x.shape()[1] / p.groups, gs = g.shape()[1] / p.groups;
  TensorType block = out;
  block.shape[0] = out.shape[0] / p.groups;
  std::vector<Value> blocks;
  for (int64_t j = 0; j < p.groups; ++j) {
    blocks.push_back(
        conv_weight_grad(ctx, channel_block(ctx.b, x, j, xs), channel_block(ctx.b, g, j, gs), plain, block));
  }
  return ctx.b.concatenate(blocks, 0);
}

Value conv_weight_grad(LowerContext& ctx, const Value& x, const Value& g, const ConvParams& p, const TensorType& out) {
  if (weight_grad_per_group(ctx, p)) return grouped_weight_grad(ctx, x, g, p, out);
  const size_t spatial = x.rank() - 2;
  ConvWindow win{p.dilation, p.padding, {}, std::vector<int64_t>(spatial, 1), p.stride, 1, p.groups};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x.shape()[i + 2], k = out.shape[i + 2], o = g.shape()[i + 2];
    win.pad_hi.push_back((o - 1) * p.stride[i] - in + p.dilation[i] * (k - 1) + 1 - p.padding[i]);
  }
  // [f, b, *]x[i, o, *]->[f, b, *]
  const ConvDims dims{spatial, /*input_feature_first=*/true, /*kernel_input_first=*/true,
                      /*output_feature_first=*/true};
  return convolution_op(ctx, x, g, win, dims, out);
}

// A depthwise convolution worth lowering as multiply-adds: on the CPU
// plugin, a plain (not transposed) convolution with one input channel per
// group and a kernel of at most 64 taps (the sum is unrolled in the program).
bool depthwise_as_multiply_adds(const LowerContext& ctx, const Shape& x, const Shape& w, const ConvParams& p) {
  if (ctx.platform != Platform::Cpu || p.transposed || p.groups == 1) return false;
  if (x[1] != p.groups || w[1] != 1) return false;
  int64_t taps = 1;
  for (size_t i = 2; i < w.size(); ++i) taps *= w[i];
  return taps <= 64;
}

// Every position of a kernel with spatial sizes w[2:], in row-major order.
std::vector<std::vector<int64_t>> kernel_taps(const Shape& w) {
  std::vector<std::vector<int64_t>> taps{{}};
  for (size_t i = 2; i < w.size(); ++i) {
    std::vector<std::vector<int64_t>> longer;
    for (const auto& tap : taps) {
      for (int64_t k = 0; k < w[i]; ++k) {
        longer.push_back(tap);
        longer.back().push_back(k);
      }
    }
    taps = std::move(longer);
  }
  return taps;
}

// x [N, C, *] as [N, C*m, *], each channel repeated m times in a row: output
// channel o of a depthwise convolution with multiplier m reads channel o / m.
Value repeat_channels(Builder& b, const Value& x, int64_t m) {
  if (m == 1) return x;
  const Shape& s = x.shape();
  Shape wide{s[0], s[1], m};
  std::vector<int64_t> dims{0, 1};
  for (size_t i = 2; i < s.size(); ++i) {
    wide.push_back(s[i]);
    dims.push_back(static_cast<int64_t>(i) + 1);
  }
  Shape merged{s[0], s[1] * m};
  merged.insert(merged.end(), s.begin() + 2, s.end());
  return b.reshape(b.broadcast_in_dim(x, wide, dims), merged);
}

// The weight of one tap, w[:, 0, tap] [O], along the channel dim of `shape`.
Value tap_weight(Builder& b, const Value& w, const std::vector<int64_t>& tap, const Shape& shape) {
  Shape start{0, 0}, limit{w.shape()[0], 1};
  for (int64_t k : tap) {
    start.push_back(k);
    limit.push_back(k + 1);
  }
  Value column = b.reshape(b.slice(w, start, limit, Shape(start.size(), 1)), {w.shape()[0]});
  return b.broadcast_in_dim(column, shape, {1});
}

// The input window that tap `tap` multiplies: [N, O, *out] of the padded,
// channel-repeated input `xp`.
Value tap_window(Builder& b, const Value& xp, const std::vector<int64_t>& tap, const ConvParams& p, const Shape& out) {
  Shape start{0, 0}, limit{out[0], out[1]}, strides{1, 1};
  for (size_t i = 0; i < tap.size(); ++i) {
    start.push_back(tap[i] * p.dilation[i]);
    limit.push_back(start.back() + (out[i + 2] - 1) * p.stride[i] + 1);
    strides.push_back(p.stride[i]);
  }
  return b.slice(xp, start, limit, strides);
}

// x [N, C, *] zero-padded by `padding` and repeated to O channels.
Value padded_input(LowerContext& ctx, const Value& x, int64_t out_channels, const ConvParams& p) {
  Builder& b = ctx.b;
  Value xr = repeat_channels(b, at_matmul_precision(ctx, x), out_channels / x.shape()[1]);
  Shape lo{0, 0}, interior(x.rank(), 0);
  lo.insert(lo.end(), p.padding.begin(), p.padding.end());
  return b.pad(xr, b.constant(0, xr.dtype()), lo, lo, interior);
}

// y of a depthwise convolution: sum over taps of window * weight.
Value depthwise_forward(LowerContext& ctx, const Value& x, const Value& w, const ConvParams& p, const TensorType& out) {
  Builder& b = ctx.b;
  const Value xp = padded_input(ctx, x, out.shape[1], p);
  const Value wr = at_matmul_precision(ctx, w);
  std::optional<Value> y;
  for (const auto& tap : kernel_taps(w.shape())) {
    Value term = b.binary("multiply", tap_window(b, xp, tap, p, out.shape), tap_weight(b, wr, tap, out.shape));
    y = y ? b.binary("add", *y, term) : term;
  }
  return *y;
}

// grad_input of a depthwise convolution: each tap's g * weight scattered back
// to the input positions it read (a pad whose interior padding undoes the
// stride and whose negative edges drop the zero padding), summed; with a
// channel multiplier m the m output channels of an input channel add up.
Value depthwise_input_grad(LowerContext& ctx, const Value& g, const Value& w, const ConvParams& p,
                           const TensorType& out) {
  Builder& b = ctx.b;
  const Value gr = at_matmul_precision(ctx, g);
  const Value wr = at_matmul_precision(ctx, w);
  const Shape& gs = g.shape();
  const size_t spatial = gs.size() - 2;
  std::optional<Value> sum;
  for (const auto& tap : kernel_taps(w.shape())) {
    Shape lo{0, 0}, hi{0, 0}, interior{0, 0};
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t first = tap[i] * p.dilation[i] - p.padding[i];  // input position of the first window
      lo.push_back(first);
      hi.push_back(out.shape[i + 2] - (first + (gs[i + 2] - 1) * p.stride[i] + 1));
      interior.push_back(p.stride[i] - 1);
    }
    Value term =
        b.pad(b.binary("multiply", gr, tap_weight(b, wr, tap, gs)), b.constant(0, gr.dtype()), lo, hi, interior);
    sum = sum ? b.binary("add", *sum, term) : term;
  }
  const int64_t channels = out.shape[1], m = gs[1] / channels;
  if (m == 1) return *sum;
  Shape split{gs[0], channels, m};
  split.insert(split.end(), out.shape.begin() + 2, out.shape.end());
  return reduce_with(b, b.reshape(*sum, split), {2}, "add");
}

// grad_weight of a depthwise convolution: per tap, the window times g summed
// over batch and positions; the taps' [O] sums stacked into [O, 1, *K].
Value depthwise_weight_grad(LowerContext& ctx, const Value& x, const Value& g, const ConvParams& p,
                            const TensorType& out) {
  Builder& b = ctx.b;
  const Value xp = padded_input(ctx, x, out.shape[0], p);
  const Value gr = at_matmul_precision(ctx, g);
  std::vector<int64_t> summed{0};
  for (int64_t d = 2; d < gr.rank(); ++d) summed.push_back(d);
  std::vector<Value> columns;
  for (const auto& tap : kernel_taps(out.shape)) {
    Value products = b.binary("multiply", tap_window(b, xp, tap, p, gr.shape()), gr);
    columns.push_back(b.reshape(reduce_with(b, products, summed, "add"), {out.shape[0], 1}));
  }
  return b.reshape(b.concatenate(columns, 1), out.shape);
}

// The type a convolution computes in (float inputs only, as CPU).
ElementType convolution_type(ElementType t) {
  if (!hlo::is_float(t)) throw NotImplementedForDtype("convolution: only floating point inputs are supported");
  return accumulation_type(t);
}

TensorType retyped(const TensorType& t, ElementType dtype) { return {dtype, t.shape}; }

// Bias [O] added along the channel dim.
Value add_bias(Builder& b, const Value& y, const Value& bias) {
  return b.binary("add", y, b.broadcast_in_dim(b.convert(bias, y.dtype()), y.shape(), {1}));
}

}  // namespace

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
std::vector<Value> convolution(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = convolution_type(out.dtype);
  Float16InputPrecision precision(ctx, ctx.tensor(0).dtype());  // the convolution runs in acc
  Value x = b.convert(ctx.tensor(0), acc);
  Value w = b.convert(ctx.tensor(1), acc);
  const ConvParams p = conv_params(ctx, 3, x.rank() - 2);
  Value y = p.transposed ? conv_transposed(ctx, x, w, p, retyped(out, acc))
            : depthwise_as_multiply_adds(ctx, x.shape(), w.shape(), p)
                ? depthwise_forward(ctx, x, w, p, retyped(out, acc))
                : conv_forward(ctx, x, w, p, retyped(out, acc));
  if (ctx.has(2)) y = add_bias(b, y, ctx.tensor(2));
  return {b.convert(y, out.dtype)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding,
// dilation, transposed, output_padding, groups, output_mask[3])
//   -> (grad_input, grad_weight, grad_bias); only the defined ones are returned.
std::vector<Value> convolution_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const ElementType acc = convolution_type(ctx.tensor(1).dtype());
  Float16InputPrecision precision(ctx, ctx.tensor(1).dtype());  // the convolutions run in acc
  Value g = b.convert(ctx.tensor(0), acc);
  Value x = b.convert(ctx.tensor(1), acc);
  Value w = b.convert(ctx.tensor(2), acc);
  const ConvParams p = conv_params(ctx, 4, x.rank() - 2);
  OutputMask results(ctx, 10, "convolution_backward");
  const bool depthwise = depthwise_as_multiply_adds(ctx, x.shape(), w.shape(), p);
  if (results.wanted(0)) {
    const TensorType t = results.next_type();
    Value gx = p.transposed ? conv_forward(ctx, g, w, p, retyped(t, acc))
               : depthwise  ? depthwise_input_grad(ctx, g, w, p, retyped(t, acc))
                            : conv_transposed(ctx, g, w, p, retyped(t, acc));
    results.push(b.convert(gx, t.dtype));
  }
  if (results.wanted(1)) {
    const TensorType t = results.next_type();
    // A transposed convolution is the input-gradient of a plain one whose
    // input has grad_output's shape, so the roles of x and g swap.
    Value gw = p.transposed ? conv_weight_grad(ctx, g, x, p, retyped(t, acc))
               : depthwise  ? depthwise_weight_grad(ctx, x, g, p, retyped(t, acc))
                            : conv_weight_grad(ctx, x, g, p, retyped(t, acc));
    results.push(b.convert(gw, t.dtype));
  }
  if (results.wanted(2) && results.more_defined()) {  // undefined without bias_sizes
    const TensorType t = results.next_type();
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < g.rank(); ++d) dims.push_back(d);
    results.push(b.convert(reduce_with(b, g, dims, "add"), t.dtype));
  }
  return results.finish();
}

}  // namespace torch_tpu::lower
