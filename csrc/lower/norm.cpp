// Layer normalization, forward and backward. F.layer_norm, nn.LayerNorm and
// the autograd formula reach the device as these two ops (F.rms_norm and
// group norm decompose into elementwise ops and reductions). Weight
// normalization's fused pair follows at the end. Statistics are
// computed in f32 for bf16/f16 inputs, as PyTorch's kernels do, and mean/rstd
// are returned in that type with shape input.shape[:axis] + [1] * len(normalized_shape).
#include "lower/norm.h"

#include <stdexcept>

#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

// The split of an input of rank `rank` normalized over its last `normalized` dims.
struct NormDims {
  int64_t axis = 0;                   // first normalized dim
  std::vector<int64_t> inner, outer;  // normalized dims, the rest
  Shape outer_shape;
  int64_t inner_numel = 1;
};

NormDims norm_dims(const Shape& shape, size_t normalized) {
  NormDims d;
  d.axis = static_cast<int64_t>(shape.size()) - static_cast<int64_t>(normalized);
  if (d.axis < 0) throw std::invalid_argument("layer_norm: normalized_shape longer than the input");
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < d.axis) {
      d.outer.push_back(i);
      d.outer_shape.push_back(shape[i]);
    } else {
      d.inner.push_back(i);
      d.inner_numel *= shape[i];
    }
  }
  return d;
}

// A value over the outer dims (any trailing size-1 dims dropped) broadcast to `shape`.
Value outer_to_full(Builder& b, const Value& v, const NormDims& d, const Shape& shape) {
  return b.broadcast_in_dim(b.reshape(v, d.outer_shape), shape, d.outer);
}

// weight/bias (shape normalized_shape) broadcast over the input.
Value inner_to_full(Builder& b, const Value& v, const NormDims& d, const Shape& shape, ElementType dtype) {
  return b.broadcast_in_dim(b.convert(v, dtype), shape, d.inner);
}

Value sum_over(Builder& b, const Value& v, const std::vector<int64_t>& dims) { return reduce_with(b, v, dims, "add"); }

}  // namespace

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
std::vector<Value> native_layer_norm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(0);
  const NormDims d = norm_dims(input.shape(), ctx.ints(1).size());
  const TensorType& out_t = ctx.out_types.at(0);
  const ElementType acc = ctx.out_types.at(1).dtype;
  const Shape& shape = input.shape();

  Value x = b.convert(input, acc);
  Value n = b.splat(static_cast<double>(d.inner_numel), {acc, d.outer_shape});
  Value mean = b.binary("divide", sum_over(b, x, d.inner), n);
  Value xc = b.binary("subtract", x, outer_to_full(b, mean, d, shape));
  // Biased variance of the centred values (two-pass, as PyTorch's CPU kernel).
  Value var = b.binary("divide", sum_over(b, b.binary("multiply", xc, xc), d.inner), n);
  Value eps = b.splat(ctx.double_arg(4), var.type);
  Value rstd = b.unary("rsqrt", b.binary("add", var, eps));
  Value y = b.binary("multiply", xc, outer_to_full(b, rstd, d, shape));
  if (ctx.has(2)) y = b.binary("multiply", y, inner_to_full(b, ctx.tensor(2), d, shape, acc));
  if (ctx.has(3)) y = b.binary("add", y, inner_to_full(b, ctx.tensor(3), d, shape, acc));
  return {b.convert(y, out_t.dtype), b.reshape(mean, ctx.out_types.at(1).shape),
          b.reshape(rstd, ctx.out_types.at(2).shape)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
// weight?, bias?, output_mask[3]) -> (grad_input, grad_weight, grad_bias).
// PyTorch's meta kernel leaves a result undefined when its mask entry is
// false, and grad_weight/grad_bias also when weight/bias is None; only the
// defined ones are returned here (ctx.out_types lists only those).
// Formula: torch/_decomp/decompositions.py native_layer_norm_backward.
std::vector<Value> native_layer_norm_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(1);
  const NormDims d = norm_dims(input.shape(), ctx.ints(2).size());
  const Shape& shape = input.shape();
  const ElementType acc = accumulation_type(input.dtype());
  // bool[3] is read as 0/1 ints once the device layer passes bool lists (see
  // lowered_kernel.cpp to_arg); until then every result counts as requested.
  std::vector<bool> mask(3, true);
  const std::vector<int64_t>& mask_ints = ctx.ints(7);
  for (size_t i = 0; i < 3 && i < mask_ints.size(); ++i) mask[i] = mask_ints[i] != 0;
  const bool want_input = mask[0], want_weight = mask[1] && ctx.has(5), want_bias = mask[2] && ctx.has(6);

  Value g = b.convert(ctx.tensor(0), acc);
  Value x = b.convert(input, acc);
  Value mean = outer_to_full(b, b.convert(ctx.tensor(3), acc), d, shape);
  Value rstd = outer_to_full(b, b.convert(ctx.tensor(4), acc), d, shape);
  Value x_hat = b.binary("multiply", b.binary("subtract", x, mean), rstd);

  std::vector<Value> results;
  size_t k = 0;
  auto out_dtype = [&]() { return ctx.out_types.at(k++).dtype; };
  if (want_input) {
    Value gx = ctx.has(5) ? b.binary("multiply", g, inner_to_full(b, ctx.tensor(5), d, shape, acc)) : g;
    Value n = b.splat(static_cast<double>(d.inner_numel), {acc, shape});
    Value sum_gx = outer_to_full(b, sum_over(b, gx, d.inner), d, shape);
    Value sum_gx_xhat = outer_to_full(b, sum_over(b, b.binary("multiply", gx, x_hat), d.inner), d, shape);
    Value inner = b.binary("subtract", b.binary("subtract", b.binary("multiply", gx, n), sum_gx),
                           b.binary("multiply", x_hat, sum_gx_xhat));
    Value scale = b.binary("divide", rstd, n);
    results.push_back(b.convert(b.binary("multiply", scale, inner), out_dtype()));
  }
  if (want_weight) {
    results.push_back(b.convert(sum_over(b, b.binary("multiply", g, x_hat), d.outer), out_dtype()));
  }
  if (want_bias) results.push_back(b.convert(sum_over(b, g, d.outer), out_dtype()));
  if (results.size() != ctx.out_types.size()) {
    throw std::invalid_argument("layer_norm_backward: defined results differ from the meta kernel's");
  }
  return results;
}

namespace {

// Weight normalization along `dim`, which ATen's _weight_norm routes to the
// fused op only when it is the first or the last dim: the norm is over every
// other dim, kept as size 1 (shape [n, 1, ...] or [..., 1, n]).
struct WeightNormDims {
  std::vector<int64_t> reduced;
  int64_t dim = 0;
};

WeightNormDims weight_norm_dims(const Value& v, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(v.shape().size());
  if (dim < 0) dim += rank;
  if (dim != 0 && dim != rank - 1) {
    throw std::invalid_argument("_weight_norm_interface: dim must be the first or the last dimension, got " +
                                std::to_string(dim));
  }
  WeightNormDims d;
  d.dim = dim;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) d.reduced.push_back(i);
  return d;
}

// A per-`dim` value (norm or g, shape [n, 1, ...] or [..., 1, n]) broadcast over `shape`.
Value along_dim(Builder& b, const Value& v, const WeightNormDims& d, const Shape& shape) {
  return b.broadcast_in_dim(b.reshape(v, {shape[d.dim]}), shape, {d.dim});
}

}  // namespace

// _weight_norm_interface(v, g, dim) -> (v * g / norm, norm), norm = ||v|| over
// every dim but `dim`; computed in the norm's dtype (float32 for half types),
// as aten/src/ATen/native/WeightNorm.cpp does. nn.utils.weight_norm and
// parametrizations.weight_norm reach it through _weight_norm (wav2vec2's
// family, HiFi-GAN vocoders).
std::vector<Value> weight_norm_interface(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& v_in = ctx.tensor(0);
  const WeightNormDims d = weight_norm_dims(v_in, ctx.int_arg(2));
  const ElementType acc = ctx.out_types.at(1).dtype;
  const Shape& shape = v_in.shape();
  Value v = b.convert(v_in, acc);
  Value norm = b.unary("sqrt", sum_over(b, b.binary("multiply", v, v), d.reduced));
  Value scale = b.binary("divide", b.reshape(b.convert(ctx.tensor(1), acc), {shape[d.dim]}), norm);
  Value w = b.binary("multiply", v, along_dim(b, scale, d, shape));
  return {b.convert(w, ctx.out_types.at(0).dtype), b.reshape(norm, ctx.out_types.at(1).shape)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
// -> (grad_v, grad_g), WeightNorm.cpp's formula: with s = sum(grad_w * v) over
// the normalized dims, grad_g = s / norm and
// grad_v = (g / norm) * (grad_w - v * s / norm^2).
std::vector<Value> weight_norm_interface_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& v_in = ctx.tensor(1);
  const WeightNormDims d = weight_norm_dims(v_in, ctx.int_arg(4));
  const Shape& shape = v_in.shape();
  const ElementType acc = accumulation_type(v_in.dtype());
  const Shape per_dim = {shape[d.dim]};
  Value grad_w = b.convert(ctx.tensor(0), acc);
  Value v = b.convert(v_in, acc);
  Value g = b.reshape(b.convert(ctx.tensor(2), acc), per_dim);
  Value norm = b.reshape(b.convert(ctx.tensor(3), acc), per_dim);
  Value s = sum_over(b, b.binary("multiply", grad_w, v), d.reduced);
  Value grad_g = b.binary("divide", s, norm);
  Value projection = b.binary("divide", s, b.binary("multiply", norm, norm));
  Value grad_v = b.binary("multiply", along_dim(b, b.binary("divide", g, norm), d, shape),
                          b.binary("subtract", grad_w, b.binary("multiply", v, along_dim(b, projection, d, shape))));
  return {b.convert(grad_v, ctx.out_types.at(0).dtype),
          b.convert(b.reshape(grad_g, ctx.out_types.at(1).shape), ctx.out_types.at(1).dtype)};
}

}  // namespace torch_tpu::lower
