// Pointwise and margin losses, forward and backward, after PyTorch's CPU
// kernels (aten/src/ATen/native/Loss.cpp, LossMultiMargin.cpp,
// LossMultiLabelMargin.cpp, cpu/PointwiseOpsKernel.cpp): the same branch
// conditions (they decide which side of a kink gets the gradient) and the
// same reduction rules: mean divides by the element count (NaN when empty)
// and the backward of mean scales by 1 / input.numel(). Reduced-precision
// floats compute in float32 and round once.
//
// Not checked (the CPU kernels read the values; that needs a host sync):
// binary_cross_entropy's inputs in [0, 1], margin-loss targets in range
// (out-of-range classes pick nothing).
#include "lower/pointwise_loss.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "lower/common/arith.h"
#include "lower/common/reduction.h"
#include "lower/common/scalars.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

using math::add;
using math::div;
using math::mul;
using math::sub;

Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The loss reduced as `reduction` says (mean: sum / count), as result 0.
std::vector<Value> reduced(LowerContext& ctx, const Value& loss, int64_t reduction, int64_t count) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value r = loss;
  if (reduction != kNone) {
    r = sum_all(b, loss);
    if (reduction == kMean) r = div(b, r, b.constant(static_cast<double>(count), r.dtype()));
  }
  return {b.convert(b.reshape(r, out.shape), out.dtype)};
}

// Forward operands self (0) and target (1) broadcast together, in the compute dtype.
struct Pair {
  Value x, t;
};
Pair loss_operands(LowerContext& ctx) {
  const Value &x = ctx.tensor(0), &t = ctx.tensor(1);
  TensorType type{accumulation_type(ctx.out_types.at(0).dtype), broadcast_shape(x.shape(), t.shape())};
  return {coerce(ctx.b, x, type), coerce(ctx.b, t, type)};
}

// Backward operands: grad_output (0), self (1), target (2) as grad_input's
// shape; with a reduction grad_output is one number, scaled by `norm` (and by
// 1 / numel for mean).
struct Grads {
  Value g, x, t;
};
Grads grad_operands(LowerContext& ctx, int64_t reduction, double norm) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  TensorType type{accumulation_type(out.dtype), out.shape};
  Value g = b.convert(ctx.tensor(0), type.dtype);
  if (reduction != kNone) {
    g = b.broadcast_to(b.reshape(g, {}), out.shape);
    if (reduction == kMean) norm /= static_cast<double>(type.numel());
  }
  g = b.broadcast_to(g, out.shape);
  if (norm != 1.0) g = mul(b, g, b.splat(norm, type));
  return {g, coerce(b, ctx.tensor(1), type), coerce(b, ctx.tensor(2), type)};
}

std::vector<Value> grad_result(LowerContext& ctx, const Value& v) {
  return {ctx.b.convert(v, ctx.out_types.at(0).dtype)};
}

// ---- margin losses --------------------------------------------------------------
// Input (N, C) as acc-typed (N, C): a 1-D input is one sample, a 0-d input
// one sample of one class.
Value as_matrix(Builder& b, const Value& x, ElementType acc) {
  Value m = b.convert(x, acc);
  if (x.rank() == 0) return b.reshape(m, {1, 1});
  return x.rank() == 1 ? b.reshape(m, {1, x.shape()[0]}) : m;
}

// multi_margin: per sample n and class c != y_n, h = max(0, margin - x[y] + x[c])^p
// (times weight[y]). Returns the pieces both directions need.
struct MultiMargin {
  Value onehot;              // pred (N, C): c == y_n
  Value z;                   // (N, C): margin - x[y] + x[c]
  Value active;              // pred (N, C): z > 0 and c != y
  std::optional<Value> w_y;  // (N, C) weight[y_n] broadcast
};
MultiMargin multi_margin_terms(LowerContext& ctx, const Value& x, size_t target_index, size_t margin_index,
                               size_t weight_index) {
  Builder& b = ctx.b;
  const Shape& s = x.shape();
  Value y = b.reshape(b.convert(ctx.tensor(target_index), ElementType::S64), {s[0]});
  MultiMargin m;
  m.onehot = b.compare(b.iota({ElementType::S64, s}, 1), b.broadcast_in_dim(y, s, {0}), CompareDirection::EQ);
  Value zero = b.splat(0, x.type);
  Value x_y = reduce_with(b, b.select(m.onehot, x, zero), {1}, "add");
  Value margin = b.broadcast_to(ctx.cast_scalar(ctx.args.at(margin_index).scalar, x.dtype()), s);
  m.z = add(b, sub(b, margin, b.broadcast_in_dim(x_y, s, {0})), x);
  m.active = b.binary("and", b.compare(m.z, zero, CompareDirection::GT), b.unary("not", m.onehot));
  if (ctx.has(weight_index)) {
    Value w = b.broadcast_in_dim(b.convert(ctx.tensor(weight_index), x.dtype()), s, {1});
    m.w_y = b.broadcast_in_dim(reduce_with(b, b.select(m.onehot, w, zero), {1}, "add"), s, {0});
  }
  return m;
}

// multilabel_margin: targets are class lists ended by the first -1. For each
// listed target j and each class c not among the targets,
// h = max(0, 1 - x[j] + x[c]). Shapes (N, K, C) with K == C list slots.
struct MultiLabel {
  Value pick;       // pred (N, K, C): slot k is listed and holds class c
  Value is_target;  // pred (N, C)
  Value active;     // pred (N, K, C): slot k listed, c not a target, h > 0
  Value z;          // (N, K, C)
};
MultiLabel multilabel_terms(LowerContext& ctx, const Value& x, size_t target_index) {
  Builder& b = ctx.b;
  const int64_t n = x.shape()[0], c = x.shape()[1];
  Value y = b.reshape(b.convert(ctx.tensor(target_index), ElementType::S64), {n, c});
  const Shape nk{n, c}, nkc{n, c, c};
  // Slots before the first -1 are listed: k < min{k : y[k] == -1} (C when none).
  Value slot = b.iota({ElementType::S64, nk}, 1);
  Value ends = b.compare(y, b.splat(-1, y.type), CompareDirection::EQ);
  Value first_end = b.reduce(b.select(ends, slot, b.splat(static_cast<double>(c), slot.type)),
                             b.constant_int(c, ElementType::S64), {1}, "minimum");
  Value listed = b.compare(slot, b.broadcast_in_dim(first_end, nk, {0}), CompareDirection::LT);
  MultiLabel m;
  Value hit = b.compare(b.iota({ElementType::S64, nkc}, 2), b.broadcast_in_dim(y, nkc, {0, 1}), CompareDirection::EQ);
  Value listed3 = b.broadcast_in_dim(listed, nkc, {0, 1});
  m.pick = b.binary("and", hit, listed3);
  m.is_target = b.reduce(m.pick, b.constant(0, ElementType::Pred), {1}, "or");
  Value x3 = b.broadcast_in_dim(x, nkc, {0, 2});
  Value x_j = reduce_with(b, b.select(m.pick, x3, b.splat(0, x3.type)), {2}, "add");  // (N, K)
  m.z = add(b, sub(b, b.splat(1, x3.type), b.broadcast_in_dim(x_j, nkc, {0, 1})), x3);
  Value open = b.broadcast_in_dim(b.unary("not", m.is_target), nkc, {0, 2});
  m.active =
      b.binary("and", b.binary("and", listed3, open), b.compare(m.z, b.splat(0, m.z.type), CompareDirection::GT));
  return m;
}

// grad_output of a per-sample loss as (N, C): one number, or one per sample.
Value per_sample_grad(Builder& b, const Value& grad_output, int64_t reduction, const Shape& nc, ElementType acc) {
  Value g = b.convert(grad_output, acc);
  if (reduction != kNone || g.type.numel() == 1) return b.broadcast_to(b.reshape(g, {}), nc);
  return b.broadcast_in_dim(b.reshape(g, {nc[0]}), nc, {0});
}

// huber_loss / smooth_l1_loss (self, target, reduction, threshold): the loss
// of z = |x - t|, `branches` giving it below the threshold and from it on.
using Branches =
    std::function<std::pair<Value, Value>(Builder&, const Value& z, const Value& threshold, const Value& half)>;
std::vector<Value> thresholded_loss(LowerContext& ctx, const Branches& branches) {
  Builder& b = ctx.b;
  Pair p = loss_operands(ctx);
  Value z = b.unary("abs", sub(b, p.x, p.t));
  Value threshold = host_number(ctx, ctx.double_arg(3, 1.0), z);
  auto [below, from] = branches(b, z, threshold, b.splat(0.5, z.type));
  return reduced(ctx, b.select(b.compare(z, threshold, CompareDirection::LT), below, from), ctx.int_arg(2, kMean),
                 z.type.numel());
}

// Their backward's operands (grad_output, self, target, reduction,
// threshold): d = x - t and the threshold.
struct ThresholdedGrads {
  Grads a;
  Value d, threshold;
};
ThresholdedGrads thresholded_grads(LowerContext& ctx) {
  Grads a = grad_operands(ctx, ctx.int_arg(3, kMean), 1.0);
  Value d = sub(ctx.b, a.x, a.t);
  Value threshold = host_number(ctx, ctx.double_arg(4, 1.0), d);
  return {a, d, threshold};
}

}  // namespace

// mse_loss(self, target, reduction): (x - t)^2.
std::vector<Value> mse_loss(LowerContext& ctx) {
  Builder& b = ctx.b;
  Pair p = loss_operands(ctx);
  Value d = sub(b, p.x, p.t);
  return reduced(ctx, mul(b, d, d), ctx.int_arg(2, kMean), p.x.type.numel());
}

// mse_loss_backward(grad_output, self, target, reduction): 2 * (x - t) * g.
std::vector<Value> mse_loss_backward(LowerContext& ctx) {
  Grads a = grad_operands(ctx, ctx.int_arg(3, kMean), 2.0);
  return grad_result(ctx, mul(ctx.b, sub(ctx.b, a.x, a.t), a.g));
}

// huber_loss(self, target, reduction, delta): z < delta ? z^2 / 2 : delta * (z - delta / 2), z = |x - t|.
std::vector<Value> huber_loss(LowerContext& ctx) {
  return thresholded_loss(ctx, [](Builder& b, const Value& z, const Value& delta, const Value& half) {
    return std::pair{mul(b, mul(b, half, z), z), mul(b, delta, sub(b, z, mul(b, half, delta)))};
  });
}

// huber_loss_backward(grad_output, self, target, reduction, delta):
// d < -delta ? -delta * g : (d > delta ? delta * g : d * g), d = x - t.
std::vector<Value> huber_loss_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [a, d, delta] = thresholded_grads(ctx);
  Value above = b.select(b.compare(d, delta, CompareDirection::GT), mul(b, delta, a.g), mul(b, d, a.g));
  Value below = b.compare(d, b.unary("negate", delta), CompareDirection::LT);
  return grad_result(ctx, b.select(below, mul(b, b.unary("negate", delta), a.g), above));
}

// smooth_l1_loss(self, target, reduction, beta): z < beta ? z^2 / (2 beta) : z - beta / 2
// (beta 0 is the L1 loss: the first branch never applies).
std::vector<Value> smooth_l1_loss(LowerContext& ctx) {
  return thresholded_loss(ctx, [](Builder& b, const Value& z, const Value& beta, const Value& half) {
    return std::pair{div(b, mul(b, mul(b, half, z), z), beta), sub(b, z, mul(b, half, beta))};
  });
}

// smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
// d <= -beta ? -g : (d >= beta ? g : d * g / beta); with beta 0, d == 0 gives -g as on CPU.
std::vector<Value> smooth_l1_loss_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [a, d, beta] = thresholded_grads(ctx);
  Value above = b.select(b.compare(d, beta, CompareDirection::GE), a.g, div(b, mul(b, d, a.g), beta));
  Value below = b.compare(d, b.unary("negate", beta), CompareDirection::LE);
  return grad_result(ctx, b.select(below, b.unary("negate", a.g), above));
}

// binary_cross_entropy(self, target, weight?, reduction):
// (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times weight.
// CPU's kernel checks every input and target element (CUDA's asserts on the
// input in the kernel); NaN fails the check, as there.
void check_unit_interval(LowerContext& ctx, const Value& v, const char* what) {
  Builder& b = ctx.b;
  Value ok = b.binary("and", b.compare(v, b.splat(0, v.type), CompareDirection::GE),
                      b.compare(v, b.splat(1, v.type), CompareDirection::LE));
  ctx.check_all(ok, std::string("all elements of ") + what + " should be between 0 and 1");
}

std::vector<Value> binary_cross_entropy(LowerContext& ctx) {
  Builder& b = ctx.b;
  Pair p = loss_operands(ctx);
  check_unit_interval(ctx, p.x, "input");
  check_unit_interval(ctx, p.t, "target");
  Value floor = b.splat(-100, p.x.type);
  Value log_x = b.binary("maximum", b.unary("log", p.x), floor);
  Value log_1mx = b.binary("maximum", b.unary("log_plus_one", b.unary("negate", p.x)), floor);
  Value loss = sub(b, mul(b, sub(b, p.t, b.splat(1, p.t.type)), log_1mx), mul(b, p.t, log_x));
  if (ctx.has(2)) loss = mul(b, loss, coerce(b, ctx.tensor(2), loss.type));
  return reduced(ctx, loss, ctx.int_arg(3, kMean), loss.type.numel());
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction):
// g * (x - t) / max((1 - x) * x, 1e-12), times weight.
std::vector<Value> binary_cross_entropy_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Grads a = grad_operands(ctx, ctx.int_arg(4, kMean), 1.0);
  Value denom = b.binary("maximum", mul(b, sub(b, b.splat(1, a.x.type), a.x), a.x), b.splat(1e-12, a.x.type));
  Value grad = div(b, mul(b, a.g, sub(b, a.x, a.t)), denom);
  if (ctx.has(3)) grad = mul(b, grad, coerce(b, ctx.tensor(3), grad.type));
  return grad_result(ctx, grad);
}

// multi_margin_loss(self, target, p, margin, weight?, reduction): per sample
// sum over c != y of max(0, margin - x[y] + x[c])^p * weight[y], over C.
std::vector<Value> multi_margin_loss(LowerContext& ctx) {
  Builder& b = ctx.b;
  const ElementType acc = accumulation_type(ctx.out_types.at(0).dtype);
  Value x = as_matrix(b, ctx.tensor(0), acc);
  MultiMargin m = multi_margin_terms(ctx, x, 1, 3, 4);
  Value h = ctx.int_arg(2, 1) == 1 ? m.z : mul(b, m.z, m.z);
  if (m.w_y) h = mul(b, h, *m.w_y);
  h = b.select(m.active, h, b.splat(0, h.type));
  const double classes = static_cast<double>(x.shape()[1]);
  Value per_sample = div(b, reduce_with(b, h, {1}, "add"), b.splat(classes, {acc, {x.shape()[0]}}));
  return reduced(ctx, per_sample, ctx.int_arg(5, kMean), x.shape()[0]);
}

namespace {

// The margin losses' backward (grad_output, self, target, ...): self as an
// acc-typed (N, C) matrix, and the gradient scale of each term: 1/C, over N
// too under mean reduction.
struct MarginGrad {
  TensorType out;
  ElementType acc;
  Value x;
  int64_t reduction;
  double scale;
};
MarginGrad margin_grad(LowerContext& ctx, size_t reduction_arg) {
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = as_matrix(ctx.b, ctx.tensor(1), acc);
  const int64_t reduction = ctx.int_arg(reduction_arg, kMean);
  double scale = 1.0 / static_cast<double>(x.shape()[1]);
  if (reduction == kMean) scale /= static_cast<double>(x.shape()[0]);
  return {out, acc, x, reduction, scale};
}

}  // namespace

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction):
// d/dx[c] = (p == 1 ? 1 : 2 z) * weight[y] / C for active c; x[y] gets minus their sum.
std::vector<Value> multi_margin_loss_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [out, acc, x, reduction, scale] = margin_grad(ctx, 6);
  MultiMargin m = multi_margin_terms(ctx, x, 2, 4, 5);
  Value h = ctx.int_arg(3, 1) == 1 ? b.splat(scale, x.type) : mul(b, m.z, b.splat(2 * scale, x.type));
  if (m.w_y) h = mul(b, h, *m.w_y);
  h = b.select(m.active, h, b.splat(0, h.type));
  Value to_target = b.broadcast_in_dim(b.unary("negate", reduce_with(b, h, {1}, "add")), x.shape(), {0});
  Value grad = b.select(m.onehot, to_target, h);
  grad = mul(b, grad, per_sample_grad(b, ctx.tensor(0), reduction, x.shape(), acc));
  return {b.convert(b.reshape(grad, out.shape), out.dtype)};
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target):
// per sample the sum of h over listed targets and non-target classes, over C.
std::vector<Value> multilabel_margin_loss_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const ElementType acc = accumulation_type(ctx.out_types.at(0).dtype);
  Value x = as_matrix(b, ctx.tensor(0), acc);
  MultiLabel m = multilabel_terms(ctx, x, 1);
  Value h = b.select(m.active, m.z, b.splat(0, m.z.type));
  const int64_t n = x.shape()[0];
  Value per_sample = div(b, reduce_with(b, h, {1, 2}, "add"), b.splat(static_cast<double>(x.shape()[1]), {acc, {n}}));
  std::vector<Value> out = reduced(ctx, per_sample, ctx.int_arg(2, kMean), n);
  const TensorType& is_target = ctx.out_types.at(1);
  out.push_back(b.reshape(b.convert(m.is_target, is_target.dtype), is_target.shape));
  return out;
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
// each active (target j, class c) pair adds 1/C to x[c] and takes 1/C from x[j].
std::vector<Value> multilabel_margin_loss_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto [out, acc, x, reduction, scale] = margin_grad(ctx, 3);
  MultiLabel m = multilabel_terms(ctx, x, 2);
  Value ones = b.select(m.active, b.splat(1, m.z.type), b.splat(0, m.z.type));
  Value to_class = reduce_with(b, ones, {1}, "add");  // (N, C)
  Value per_slot = b.broadcast_in_dim(reduce_with(b, ones, {2}, "add"), m.z.shape(), {0, 1});
  Value from_target = reduce_with(b, b.select(m.pick, per_slot, b.splat(0, m.z.type)), {1}, "add");
  Value grad = mul(b, sub(b, to_class, from_target), b.splat(scale, to_class.type));
  grad = mul(b, grad, per_sample_grad(b, ctx.tensor(0), reduction, x.shape(), acc));
  return {b.convert(b.reshape(grad, out.shape), out.dtype)};
}

}  // namespace torch_tpu::lower
