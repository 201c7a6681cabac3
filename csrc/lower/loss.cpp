// Negative log-likelihood loss, forward and backward. F.cross_entropy and
// F.nll_loss reach the device as log_softmax + these. One lowering serves
// nll_loss (input (C) or (N, C)) and nll_loss2d (input (N, C, H, W)): the
// class dim is 0 for 1-D input and 1 otherwise, and the target has the
// input's shape without it.
//
// The target class is picked with a one-hot mask (iota == target) instead of
// a gather: the logits are read once either way, and the same mask scatters
// the gradient. Targets equal to ignore_index contribute 0 and are left out
// of total_weight. Out-of-range targets contribute 0 and raise IndexError by
// the next synchronization, as CPU raises at the op (CUDA asserts in its
// kernel).
#include "lower/loss.h"

#include "lower/common/reduction.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Per-target quantities shared by forward and backward.
struct NllTerms {
  int64_t class_dim = 0;
  Value pick;      // pred, input shape: class == target and target != ignore_index
  Value weight_t;  // acc type, target shape: weight[target], 0 where ignored
};

NllTerms nll_terms(LowerContext& ctx, const Value& input, const Value& target, size_t weight_index,
                   int64_t ignore_index, ElementType acc) {
  Builder& b = ctx.b;
  NllTerms t;
  t.class_dim = input.rank() == 1 ? 0 : 1;
  const Shape& shape = input.shape();
  std::vector<int64_t> target_dims;  // where the target's dims sit in the input
  for (int64_t i = 0; i < input.rank(); ++i) {
    if (i != t.class_dim) target_dims.push_back(i);
  }
  Value tgt = b.convert(target, ElementType::S64);
  Value valid =
      b.compare(tgt, b.broadcast_to(b.constant_int(ignore_index, ElementType::S64), tgt.shape()), CompareDirection::NE);
  Value classes = b.iota({ElementType::S64, shape}, t.class_dim);
  Value hit = b.compare(classes, b.broadcast_in_dim(tgt, shape, target_dims), CompareDirection::EQ);
  t.pick = b.binary("and", hit, b.broadcast_in_dim(valid, shape, target_dims));

  Value zero_t = b.splat(0, {acc, tgt.shape()});
  if (ctx.has(weight_index)) {
    Value w = b.broadcast_in_dim(b.convert(ctx.tensor(weight_index), acc), shape, {t.class_dim});
    Value picked = b.select(t.pick, w, b.splat(0, {acc, shape}));
    t.weight_t = b.reduce(picked, b.constant(0, acc), {t.class_dim}, "add");
  } else {
    t.weight_t = b.select(valid, b.splat(1, {acc, tgt.shape()}), zero_t);
  }
  return t;
}

}  // namespace

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<Value> nll_loss_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(0);
  const ElementType out = ctx.out_types.at(0).dtype;
  const ElementType acc = accumulation_type(out);
  const int64_t reduction = ctx.int_arg(3, kMean);
  const int64_t ignore_index = ctx.int_arg(4, -100);
  NllTerms t = nll_terms(ctx, input, ctx.tensor(1), 2, ignore_index, acc);
  {
    Value tgt = b.convert(ctx.tensor(1), ElementType::S64);
    auto bound = [&](int64_t v) { return b.broadcast_to(b.constant_int(v, ElementType::S64), tgt.shape()); };
    Value in_range = b.binary("and", b.compare(tgt, bound(0), CompareDirection::GE),
                              b.compare(tgt, bound(input.shape()[t.class_dim]), CompareDirection::LT));
    ctx.check_all(b.binary("or", in_range, b.compare(tgt, bound(ignore_index), CompareDirection::EQ)),
                  "Target is out of bounds.", /*runtime_error=*/false);
  }

  Value x = b.convert(input, acc);
  Value x_t = b.reduce(b.select(t.pick, x, b.splat(0, x.type)), b.constant(0, acc), {t.class_dim}, "add");
  // -x[target] * weight[target]; ignored entries pick 0 with weight 0.
  Value loss = b.unary("negate", b.binary("multiply", x_t, t.weight_t));
  // PyTorch's CPU kernel leaves total_weight 0 when nothing is reduced.
  Value total_weight = reduction == kNone ? b.constant(0, acc) : sum_all(b, t.weight_t);
  Value result = loss;
  if (reduction != kNone) {
    result = sum_all(b, loss);
    // PyTorch rule: mean divides by the summed target weights (NaN when all are ignored).
    if (reduction == kMean) result = b.binary("divide", result, total_weight);
  }
  return {b.convert(b.reshape(result, ctx.out_types.at(0).shape), out),
          b.convert(b.reshape(total_weight, ctx.out_types.at(1).shape), ctx.out_types.at(1).dtype)};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight) -> grad_input
std::vector<Value> nll_loss_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& input = ctx.tensor(1);
  const TensorType& out = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out.dtype);
  const int64_t reduction = ctx.int_arg(4, kMean);
  NllTerms t = nll_terms(ctx, input, ctx.tensor(2), 3, ctx.int_arg(5, -100), acc);

  Value g = b.convert(ctx.tensor(0), acc);
  const Shape& target_shape = t.weight_t.shape();
  if (reduction == kNone) {
    g = b.reshape(g, target_shape);
  } else {
    g = b.reshape(g, {});
    if (reduction == kMean) g = b.binary("divide", g, b.reshape(b.convert(ctx.tensor(6), acc), {}));
    g = b.broadcast_in_dim(g, target_shape, {});
  }
  Value g_t = b.unary("negate", b.binary("multiply", g, t.weight_t));
  std::vector<int64_t> target_dims;
  for (int64_t i = 0; i < input.rank(); ++i) {
    if (i != t.class_dim) target_dims.push_back(i);
  }
  Value spread = b.broadcast_in_dim(g_t, input.shape(), target_dims);
  Value grad = b.select(t.pick, spread, b.splat(0, {acc, input.shape()}));
  return {b.convert(grad, out.dtype)};
}

}  // namespace torch_tpu::lower
