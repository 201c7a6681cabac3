// Formulas and result layouts of CUDA's kernels (aten/src/ATen/native/cuda/
// RNN.cu), which define these ops: gates are (batch, k * hidden) blocks in
// the order LSTM i, f, g, o and GRU r, z, n; biases add after the two gate
// inputs; the workspace a forward returns is what its backward reads.
// Reduced-precision floats compute in float32 (the kernels' accscalar_t) and
// round once.
#include "lower/rnn.h"

#include "lower/common/arith.h"

namespace torch_tpu::lower {

namespace {

// One time step's (batch, hidden) blocks, in the compute type.
struct Gates {
  Builder& b;
  int64_t batch = 0;
  int64_t hidden = 0;
  ElementType acc = ElementType::F32;

  Shape shape() const { return {batch, hidden}; }
  // Block `k` of a (batch, n * hidden) value.
  Value block(const Value& v, int64_t k) const {
    return b.convert(b.slice(v, {0, k * hidden}, {batch, (k + 1) * hidden}, {1, 1}), acc);
  }
  // Block `k` of a (n * hidden) bias, broadcast over the batch.
  Value bias_block(const Value& bias, int64_t k) const {
    Value v = b.convert(b.slice(bias, {k * hidden}, {(k + 1) * hidden}, {1}), acc);
    return b.broadcast_in_dim(v, shape(), {1});
  }
  Value join(const std::vector<Value>& blocks, ElementType dtype) const {
    return b.convert(b.concatenate(blocks, 1), dtype);
  }
  // The bias gradient of a gates gradient: its sum over the batch.
  Value batch_sum(const Value& grad_gates) const {
    return b.reduce(grad_gates, b.constant(0, grad_gates.dtype()), {0}, "add");
  }
};

Gates gates_of(LowerContext& ctx, const Value& state, ElementType dtype) {
  return {ctx.b, state.shape().at(0), state.shape().at(1), accumulation_type(dtype)};
}

// Pre-activation of gate `k`: input gates + hidden gates (+ both biases).
Value pre_activation(LowerContext& ctx, const Gates& g, int64_t k) {
  math::Arith a{ctx.b};
  Value v = a.add(g.block(ctx.tensor(0), k), g.block(ctx.tensor(1), k));
  if (ctx.has(3)) v = a.add(a.add(v, g.bias_block(ctx.tensor(3), k)), g.bias_block(ctx.tensor(4), k));
  return v;
}

Value sigmoid(Builder& b, const Value& x) { return b.unary("logistic", x); }

// d sigmoid = s (1 - s), d tanh = 1 - t^2, from the activated values.
Value sigmoid_slope(const math::Arith& a, const Value& s) { return a.mul(a.sub(1.0, s), s); }
Value tanh_slope(const math::Arith& a, const Value& t) { return a.sub(1.0, a.mul(t, t)); }

}  // namespace

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
// hidden_bias?) -> (hy, cy, workspace = activated [i, f, g, o]).
std::vector<Value> thnn_fused_lstm_cell(LowerContext& ctx) {
  Builder& b = ctx.b;
  math::Arith a{b};
  const Value& cx_in = ctx.tensor(2);
  const ElementType dtype = ctx.out_types.at(0).dtype;
  Gates g = gates_of(ctx, cx_in, dtype);
  Value i = sigmoid(b, pre_activation(ctx, g, 0));
  Value f = sigmoid(b, pre_activation(ctx, g, 1));
  Value c = b.unary("tanh", pre_activation(ctx, g, 2));
  Value o = sigmoid(b, pre_activation(ctx, g, 3));
  Value cy = a.add(a.mul(f, b.convert(cx_in, g.acc)), a.mul(i, c));
  Value hy = a.mul(o, b.unary("tanh", cy));
  return {b.convert(hy, dtype), b.convert(cy, dtype), g.join({i, f, c, o}, ctx.out_types.at(2).dtype)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace,
// has_bias) -> (grad_gates, grad_cx, grad_bias if has_bias). An absent
// gradient is zero; with both absent there are no results.
std::vector<Value> thnn_fused_lstm_cell_backward_impl(LowerContext& ctx) {
  if (!ctx.has(0) && !ctx.has(1)) return {};
  Builder& b = ctx.b;
  math::Arith a{b};
  const Value& workspace = ctx.tensor(4);
  const ElementType dtype = ctx.out_types.at(0).dtype;
  Gates g = gates_of(ctx, ctx.tensor(2), dtype);
  Value i = g.block(workspace, 0), f = g.block(workspace, 1), c = g.block(workspace, 2), o = g.block(workspace, 3);
  Value cx = b.convert(ctx.tensor(2), g.acc);
  Value tanh_cy = b.unary("tanh", b.convert(ctx.tensor(3), g.acc));
  Value zero = b.splat(0, {g.acc, g.shape()});
  Value grad_hy = ctx.has(0) ? b.convert(ctx.tensor(0), g.acc) : zero;
  Value grad_cy = ctx.has(1) ? b.convert(ctx.tensor(1), g.acc) : zero;

  // The cell state's gradient: through hy = o tanh(cy), plus cy's own.
  Value grad_c = a.add(a.mul(a.mul(grad_hy, o), tanh_slope(a, tanh_cy)), grad_cy);
  Value grad_i = a.mul(a.mul(grad_c, c), sigmoid_slope(a, i));
  Value grad_f = a.mul(a.mul(grad_c, cx), sigmoid_slope(a, f));
  Value grad_g = a.mul(a.mul(grad_c, i), tanh_slope(a, c));
  Value grad_o = a.mul(a.mul(grad_hy, tanh_cy), sigmoid_slope(a, o));
  Value grad_gates = b.concatenate({grad_i, grad_f, grad_g, grad_o}, 1);
  std::vector<Value> out{b.convert(grad_gates, dtype), b.convert(a.mul(grad_c, f), ctx.out_types.at(1).dtype)};
  if (ctx.bool_arg(5)) out.push_back(b.convert(g.batch_sum(grad_gates), ctx.out_types.at(2).dtype));
  return out;
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
// hidden_bias?) -> (hy, workspace = [r, z, n, hidden n gate + its bias, hx]).
// n = tanh(input n + r * (hidden n + bias)): r gates the hidden part only.
std::vector<Value> thnn_fused_gru_cell(LowerContext& ctx) {
  Builder& b = ctx.b;
  math::Arith a{b};
  const ElementType dtype = ctx.out_types.at(0).dtype;
  Gates g = gates_of(ctx, ctx.tensor(2), dtype);
  Value r = sigmoid(b, pre_activation(ctx, g, 0));
  Value z = sigmoid(b, pre_activation(ctx, g, 1));
  Value input_n = g.block(ctx.tensor(0), 2);
  Value hidden_n = g.block(ctx.tensor(1), 2);
  if (ctx.has(3)) {
    input_n = a.add(input_n, g.bias_block(ctx.tensor(3), 2));
    hidden_n = a.add(hidden_n, g.bias_block(ctx.tensor(4), 2));
  }
  Value n = b.unary("tanh", a.add(input_n, a.mul(r, hidden_n)));
  Value hx = b.convert(ctx.tensor(2), g.acc);
  Value hy = a.add(n, a.mul(z, a.sub(hx, n)));
  return {b.convert(hy, dtype), g.join({r, z, n, hidden_n, hx}, ctx.out_types.at(1).dtype)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
// grad_hidden_bias): the bias gradients only if has_bias.
std::vector<Value> thnn_fused_gru_cell_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  math::Arith a{b};
  const ElementType dtype = ctx.out_types.at(0).dtype;
  Gates g = gates_of(ctx, ctx.tensor(0), dtype);
  const Value& workspace = ctx.tensor(1);
  Value r = g.block(workspace, 0), z = g.block(workspace, 1), n = g.block(workspace, 2);
  Value hidden_n = g.block(workspace, 3), hx = g.block(workspace, 4);
  Value grad_hy = b.convert(ctx.tensor(0), g.acc);

  Value grad_z = a.mul(a.mul(grad_hy, a.sub(hx, n)), sigmoid_slope(a, z));
  Value grad_input_n = a.mul(a.mul(grad_hy, a.sub(1.0, z)), tanh_slope(a, n));
  Value grad_r = a.mul(a.mul(grad_input_n, hidden_n), sigmoid_slope(a, r));
  Value grad_input_gates = b.concatenate({grad_r, grad_z, grad_input_n}, 1);
  Value grad_hidden_gates = b.concatenate({grad_r, grad_z, a.mul(grad_input_n, r)}, 1);
  std::vector<Value> out{b.convert(grad_input_gates, dtype), b.convert(grad_hidden_gates, dtype),
                         b.convert(a.mul(grad_hy, z), dtype)};
  if (ctx.bool_arg(2)) {
    out.push_back(b.convert(g.batch_sum(grad_input_gates), dtype));
    out.push_back(b.convert(g.batch_sum(grad_hidden_gates), dtype));
  }
  return out;
}

}  // namespace torch_tpu::lower
