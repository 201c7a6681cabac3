// Batch normalization, forward and backward. nn.BatchNorm{1,2,3}d and
// F.batch_norm reach the device as native_batch_norm (eager) and
// native_batch_norm_backward; torch.compile's decompositions produce the
// _native_batch_norm_legit family, export's _batch_norm_with_update (with
// batch_norm_backward). Statistics are per channel (dim 1) over
// every other dim, in f32 for bf16/f16 inputs, as PyTorch's kernels; the
// saved statistics are the batch mean and 1/sqrt(biased var + eps).
//
// Training also updates running_mean/running_var in place, with momentum and
// the UNBIASED batch variance (PyTorch's rule):
//   running = (1 - momentum) * running + momentum * batch_stat.
// native_batch_norm's schema does not mark those arguments as written, and
// _native_batch_norm_legit's returns do not alias them, so the new running
// statistics are returned after the schema's returns, in argument order
// (running_mean, then running_var, each only if it is defined); the device
// layer writes them back.
#include "lower/batch_norm.h"

#include <stdexcept>

#include "lower/common/output_mask.h"
#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

// Every dim but the channel dim 1.
std::vector<int64_t> stat_dims(int64_t rank) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

int64_t stat_count(const Shape& shape) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != 1) n *= shape[d];
  }
  return n;
}

// A per-channel [C] value broadcast over `shape`.
Value per_channel(Builder& b, const Value& v, const Shape& shape, ElementType dtype) {
  return b.broadcast_in_dim(b.convert(v, dtype), shape, {1});
}

Value sum_stat(Builder& b, const Value& v) { return reduce_with(b, v, stat_dims(v.rank()), "add"); }

Value invstd_of(Builder& b, const Value& var, double eps) {
  return b.unary("rsqrt", b.binary("add", var, b.splat(eps, var.type)));
}

Value mix(Builder& b, const Value& running, const Value& batch, double momentum) {
  const ElementType t = running.dtype();
  const ElementType acc = accumulation_type(t);
  Value keep = b.binary("multiply", b.convert(running, acc), b.splat(1.0 - momentum, {acc, running.shape()}));
  Value add = b.binary("multiply", b.convert(batch, acc), b.splat(momentum, {acc, running.shape()}));
  return b.convert(b.binary("add", keep, add), t);
}

// (input, weight?, bias?) at 0..2, then (running_mean?, running_var?) at 3..4
// when `running_stats`; the rest given.
std::vector<Value> batch_norm_forward(LowerContext& ctx, bool training, double momentum, double eps,
                                      bool running_stats = true) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(0);
  const Shape& shape = input.shape();
  const TensorType& out_t = ctx.out_types.at(0);
  // Statistics in f32 for bf16/f16 (opmath), whatever dtype they are saved in.
  const ElementType acc = accumulation_type(input.dtype());
  const Shape stat_shape{shape.at(1)};
  const bool has_mean = running_stats && ctx.has(3), has_var = running_stats && ctx.has(4);
  Value x = b.convert(input, acc);

  Value mean, var, invstd;
  if (training) {
    Value n = b.splat(static_cast<double>(stat_count(shape)), {acc, stat_shape});
    mean = b.binary("divide", sum_stat(b, x), n);
    Value xc = b.binary("subtract", x, per_channel(b, mean, shape, acc));
    var = b.binary("divide", sum_stat(b, b.binary("multiply", xc, xc)), n);  // biased, two-pass
  } else {
    mean = b.convert(ctx.tensor(3), acc);
    var = b.convert(ctx.tensor(4), acc);
  }
  invstd = invstd_of(b, var, eps);
  Value y = b.binary("multiply", b.binary("subtract", x, per_channel(b, mean, shape, acc)),
                     per_channel(b, invstd, shape, acc));
  if (ctx.has(1)) y = b.binary("multiply", y, per_channel(b, ctx.tensor(1), shape, acc));
  if (ctx.has(2)) y = b.binary("add", y, per_channel(b, ctx.tensor(2), shape, acc));
  if (!training) {  // no statistics saved for backward: empty tensors, as CPU returns
    return {b.convert(y, out_t.dtype), zeros(b, ctx.out_types.at(1)), zeros(b, ctx.out_types.at(2))};
  }
  std::vector<Value> results{b.convert(y, out_t.dtype), coerce(b, mean, ctx.out_types.at(1)),
                             coerce(b, invstd, ctx.out_types.at(2))};
  const int64_t n = stat_count(shape);
  Value unbiased = b.binary("multiply", var, b.splat(static_cast<double>(n) / static_cast<double>(n - 1), var.type));
  if (has_mean) results.push_back(mix(b, ctx.tensor(3), mean, momentum));
  if (has_var) results.push_back(mix(b, ctx.tensor(4), unbiased, momentum));
  return results;
}

}  // namespace

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
// _native_batch_norm_legit(input, weight?, bias?, running_mean!, running_var!, training, momentum, eps)
std::vector<Value> native_batch_norm(LowerContext& ctx) {
  return batch_norm_forward(ctx, ctx.bool_arg(5), ctx.double_arg(6), ctx.double_arg(7));
}

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps):
// batch statistics only, nothing to update.
std::vector<Value> native_batch_norm_no_stats(LowerContext& ctx) {
  return batch_norm_forward(ctx, ctx.bool_arg(3), ctx.double_arg(4), ctx.double_arg(5), false);
}

// _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!, momentum, eps)
//   -> (out, save_mean, save_invstd, reserve): training batch norm; reserve is
// cuDNN's workspace, empty (uint8) on every other backend; the updated running
// statistics follow the returns, as for _native_batch_norm_legit.
std::vector<Value> batch_norm_with_update(LowerContext& ctx) {
  std::vector<Value> r = batch_norm_forward(ctx, true, ctx.double_arg(5), ctx.double_arg(6));
  r.insert(r.begin() + 3, zeros(ctx.b, ctx.out_types.at(3)));
  return r;
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum, eps)
std::vector<Value> native_batch_norm_no_training(LowerContext& ctx) {
  return batch_norm_forward(ctx, false, ctx.double_arg(5), ctx.double_arg(6));
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?,
// save_mean?, save_invstd?, train, eps, output_mask[3]) -> (grad_input, grad_weight, grad_bias)
// batch_norm_backward (_batch_norm_with_update's) has the same arguments, then
// the unused cuDNN `reserve`; its `update` is `train` and `save_var` the invstd.
// Formula: torch/_decomp/decompositions.py native_batch_norm_backward.
std::vector<Value> native_batch_norm_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(1);
  const Shape& shape = input.shape();
  const ElementType acc = accumulation_type(input.dtype());
  const bool train = ctx.bool_arg(7);
  OutputMask results(ctx, 9, "batch_norm_backward");

  Value g = b.convert(ctx.tensor(0), acc);
  Value x = b.convert(input, acc);
  Value mean = b.convert(ctx.tensor(train ? 5 : 3), acc);
  Value invstd = train ? b.convert(ctx.tensor(6), acc) : invstd_of(b, b.convert(ctx.tensor(4), acc), ctx.double_arg(8));
  Value x_hat = b.binary("multiply", b.binary("subtract", x, per_channel(b, mean, shape, acc)),
                         per_channel(b, invstd, shape, acc));
  Value sum_g = sum_stat(b, g);
  Value sum_g_xhat = sum_stat(b, b.binary("multiply", g, x_hat));

  if (results.wanted(0)) {
    Value scale = invstd;
    if (ctx.has(2)) scale = b.binary("multiply", scale, b.convert(ctx.tensor(2), acc));
    Value gx = g;
    if (train) {
      // g - mean(g) - x_hat * mean(g * x_hat), per channel.
      Value n = b.splat(static_cast<double>(stat_count(shape)), sum_g.type);
      Value mean_g = per_channel(b, b.binary("divide", sum_g, n), shape, acc);
      Value proj = per_channel(b, b.binary("divide", sum_g_xhat, n), shape, acc);
      gx = b.binary("subtract", b.binary("subtract", g, mean_g), b.binary("multiply", x_hat, proj));
    }
    results.push(b.convert(b.binary("multiply", gx, per_channel(b, scale, shape, acc)), results.next_type().dtype));
  }
  if (results.wanted(1)) results.push(b.convert(sum_g_xhat, results.next_type().dtype));
  if (results.wanted(2)) results.push(b.convert(sum_g, results.next_type().dtype));
  return results.finish();
}

}  // namespace torch_tpu::lower
