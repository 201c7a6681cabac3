// Group normalization, forward and backward. nn.GroupNorm / F.group_norm
// reach the device as native_group_norm (which PyTorch would otherwise run as
// its composite math_group_norm on PrivateUse1) and native_group_norm_backward.
// The input [N, C, *] is viewed as [N, group, C/group * HxW]; statistics are
// per (n, group) in f32 for bf16/f16 inputs and returned as [N, group] in the
// input's dtype (PyTorch's rule); weight and bias are per channel.
// Backward formula: torch/_decomp/decompositions.py native_group_norm_backward.
#include "lower/group_norm.h"

#include <stdexcept>

#include "lower/common/output_mask.h"
#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

struct GroupShape {
  int64_t n, c, hw, groups;
  Shape grouped() const { return {n, groups, c / groups * hw}; }
  Shape channels() const { return {n, c, hw}; }
  int64_t group_numel() const { return c / groups * hw; }
};

// (N, C, HxW, group) at `first`.
GroupShape group_shape(const LowerContext& ctx, size_t first) {
  GroupShape s{ctx.int_arg(first), ctx.int_arg(first + 1), ctx.int_arg(first + 2), ctx.int_arg(first + 3)};
  if (s.groups <= 0 || s.c % s.groups != 0) throw std::invalid_argument("group_norm: C not divisible by group");
  return s;
}

// [N, group] statistics over each group's elements, broadcast to [N, group, D].
Value per_group(Builder& b, const Value& stat, const GroupShape& s) {
  return b.broadcast_in_dim(b.reshape(stat, {s.n, s.groups}), s.grouped(), {0, 1});
}

// A [C] parameter over [N, C, HxW].
Value per_channel(Builder& b, const Value& v, const GroupShape& s, ElementType dtype) {
  return b.broadcast_in_dim(b.convert(v, dtype), s.channels(), {1});
}

Value sum_last(Builder& b, const Value& v) { return reduce_with(b, v, {2}, "add"); }

Value mean_last(Builder& b, const Value& v, int64_t count) {
  Value sum = sum_last(b, v);
  return b.binary("divide", sum, b.splat(static_cast<double>(count), sum.type));
}

}  // namespace

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
std::vector<Value> native_group_norm(LowerContext& ctx) {
  Builder& b = ctx.b;
  const GroupShape s = group_shape(ctx, 3);
  const TensorType& out_t = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out_t.dtype);
  if (out_t.numel() == 0) return {zeros(b, out_t), zeros(b, ctx.out_types.at(1)), zeros(b, ctx.out_types.at(2))};
  Value x = b.reshape(b.convert(ctx.tensor(0), acc), s.grouped());
  Value mean = mean_last(b, x, s.group_numel());
  Value xc = b.binary("subtract", x, per_group(b, mean, s));
  Value var = mean_last(b, b.binary("multiply", xc, xc), s.group_numel());  // biased, two-pass
  Value rstd = b.unary("rsqrt", b.binary("add", var, b.splat(ctx.double_arg(7), var.type)));
  Value y = b.reshape(b.binary("multiply", xc, per_group(b, rstd, s)), s.channels());
  if (ctx.has(1)) y = b.binary("multiply", y, per_channel(b, ctx.tensor(1), s, acc));
  if (ctx.has(2)) y = b.binary("add", y, per_channel(b, ctx.tensor(2), s, acc));
  return {b.convert(b.reshape(y, out_t.shape), out_t.dtype),
          b.convert(b.reshape(mean, ctx.out_types.at(1).shape), ctx.out_types.at(1).dtype),
          b.convert(b.reshape(rstd, ctx.out_types.at(2).shape), ctx.out_types.at(2).dtype)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW,
// group, output_mask[3]) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> native_group_norm_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const GroupShape s = group_shape(ctx, 5);
  const ElementType acc = accumulation_type(ctx.tensor(1).dtype());
  OutputMask results(ctx, 9, "group_norm_backward");
  if (ctx.tensor(1).type.numel() == 0) {
    for (size_t i = 0; i < 3; ++i) {
      if (results.wanted(i) && results.more_defined()) results.push(zeros(b, results.next_type()));
    }
    return results.results();
  }

  Value g = b.reshape(b.convert(ctx.tensor(0), acc), s.channels());
  Value x = b.reshape(b.convert(ctx.tensor(1), acc), s.grouped());
  Value mean = per_group(b, b.convert(ctx.tensor(2), acc), s);
  Value rstd = per_group(b, b.convert(ctx.tensor(3), acc), s);
  Value x_hat = b.reshape(b.binary("multiply", b.binary("subtract", x, mean), rstd), s.channels());
  auto sum_n_hw = [&](const Value& v) { return reduce_with(b, v, {0, 2}, "add"); };

  if (results.wanted(0)) {
    const TensorType t = results.next_type();
    Value gw = ctx.has(4) ? b.binary("multiply", g, per_channel(b, ctx.tensor(4), s, acc)) : g;
    Value gw_g = b.reshape(gw, s.grouped());
    Value xh_g = b.reshape(x_hat, s.grouped());
    // rstd * (gw - mean(gw) - x_hat * mean(gw * x_hat)), per group.
    Value mean_gw = per_group(b, mean_last(b, gw_g, s.group_numel()), s);
    Value proj = per_group(b, mean_last(b, b.binary("multiply", gw_g, xh_g), s.group_numel()), s);
    Value gx = b.binary("subtract", b.binary("subtract", gw_g, mean_gw), b.binary("multiply", xh_g, proj));
    results.push(b.convert(b.reshape(b.binary("multiply", gx, rstd), t.shape), t.dtype));
  }
  if (results.wanted(1) && results.more_defined()) {
    results.push(b.convert(sum_n_hw(b.binary("multiply", g, x_hat)), results.next_type().dtype));
  }
  if (results.wanted(2) && results.more_defined()) results.push(b.convert(sum_n_hw(g), results.next_type().dtype));
  return results.finish();
}

}  // namespace torch_tpu::lower
