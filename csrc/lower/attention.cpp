// Scaled dot-product attention, forward and backward, as one lowering each:
// F.scaled_dot_product_attention reaches the device as
// _scaled_dot_product_fused_attention_overrideable (PyTorch's SDPA entry for
// backends that bring their own kernel; device/attention_choice.cpp picks it)
// and autograd calls its _backward. One op instead of the math path's dozen
// (scaled copies of q and k, a materialized causal mask, _safe_softmax's
// all-masked check) gives XLA the whole pattern: scores, masking and softmax
// fuse, and the backward recomputes the probabilities from the saved
// log-sum-exp instead of keeping a (Tq, Tk) matrix per head alive.
//
// Layout: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], the same leading
// (batch, head) dims on all three (the choice leaves broadcasting and GQA to
// the math path). Products accumulate in f32 for bf16/f16 inputs, as CPU's
// flash kernel does; rows with every key masked give zeros (lse -inf), as
// the math path's _safe_softmax does.
#include "lower/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

struct AttentionDims {
  int64_t rank = 0;
  std::vector<int64_t> batch;  // leading dims, shared by q, k and v
  int64_t tq = 0, tk = 0, d = 0;
  Shape scores;  // [..., Tq, Tk]
  Shape rows;    // [..., Tq]
};

AttentionDims attention_dims(const Value& q, const Value& k, const Value& v) {
  AttentionDims a;
  a.rank = q.rank();
  if (a.rank < 2 || k.rank() != a.rank || v.rank() != a.rank) {
    throw std::invalid_argument("scaled_dot_product_attention: query, key and value must have the same rank (>= 2)");
  }
  for (int64_t i = 0; i + 2 < a.rank; ++i) {
    if (k.shape()[i] != q.shape()[i] || v.shape()[i] != q.shape()[i]) {
      throw std::invalid_argument("scaled_dot_product_attention: query, key and value batch dims differ");
    }
    a.batch.push_back(i);
    a.scores.push_back(q.shape()[i]);
  }
  a.tq = q.shape()[a.rank - 2];
  a.tk = k.shape()[a.rank - 2];
  a.d = q.shape()[a.rank - 1];
  a.rows = a.scores;
  a.rows.push_back(a.tq);
  a.scores.push_back(a.tq);
  a.scores.push_back(a.tk);
  return a;
}

// q/k/v products over the shared leading dims, contracting x's dim `cx`
// with y's dim `cy`, in the (f32/f64) type of x.
Value product(LowerContext& ctx, const AttentionDims& a, const Value& x, const Value& y, int64_t cx, int64_t cy) {
  return contract(ctx, x, y, a.batch, a.batch, cx, cy, x.dtype());
}

// Row values [..., Tq] broadcast over `shape` [..., Tq, n]: the scores, or the output.
Value over_rows(Builder& b, const Value& rows, const AttentionDims& a, const Shape& shape) {
  std::vector<int64_t> dims(a.batch);
  dims.push_back(a.rank - 2);
  return b.broadcast_in_dim(rows, shape, dims);
}

// The scaled, masked scores: q k^T * scale, plus a float bias or -inf where a
// bool mask is false, and -inf above the diagonal when causal (PyTorch's
// is_causal: the top-left aligned lower triangle).
Value masked_scores(LowerContext& ctx, const AttentionDims& a, const Value& q, const Value& k, size_t bias_index,
                    bool causal, double scale) {
  Builder& b = ctx.b;
  const ElementType acc = q.dtype();
  const int64_t last = a.rank - 1;
  Value s = product(ctx, a, q, k, last, last);
  s = b.binary("multiply", s, b.splat(scale, s.type));
  const Value minus_inf = b.splat(-std::numeric_limits<double>::infinity(), s.type);
  if (ctx.has(bias_index)) {
    const Value& bias = ctx.tensor(bias_index);
    if (bias.dtype() == ElementType::Pred) {
      s = b.select(b.broadcast_to(bias, a.scores), s, minus_inf);
    } else {
      s = b.binary("add", s, b.broadcast_to(b.convert(bias, acc), a.scores));
    }
  }
  if (causal) {
    const TensorType index_type{ElementType::S64, a.scores};
    Value row = b.iota(index_type, a.rank - 2), col = b.iota(index_type, last);
    s = b.select(b.compare(col, row, CompareDirection::LE), s, minus_inf);
  }
  return s;
}

double softmax_scale(const LowerContext& ctx, size_t scale_index, int64_t head_dim) {
  return ctx.has(scale_index) ? ctx.double_arg(scale_index) : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

void check_no_dropout(const LowerContext& ctx, size_t index) {
  if (ctx.double_arg(index) != 0.0) {
    throw std::invalid_argument(
        "scaled_dot_product_attention: the fused tpu kernel has no dropout (the SDPA choice sends dropout_p > 0 "
        "to the math path)");
  }
}

Value is_minus_inf(Builder& b, const Value& v) {
  return b.compare(v, b.splat(-std::numeric_limits<double>::infinity(), v.type), CompareDirection::EQ);
}

// Unnormalized softmax over the last dim: p = exp(s - m) with m the row max,
// and l its row sum. A row with every key masked has max -inf, taken as 0 so
// that its probabilities are exp(-inf) = 0, not NaN.
struct RowSoftmax {
  Value m, p, l;
};

RowSoftmax row_softmax(Builder& b, const AttentionDims& a, const Value& s) {
  const int64_t last = a.rank - 1;
  const ElementType acc = s.dtype();
  Value m = b.reduce(s, reduce_init(b, "maximum", acc), {last}, "maximum");
  m = b.select(is_minus_inf(b, m), b.splat(0, m.type), m);
  Value p = b.unary("exponential", b.binary("subtract", s, over_rows(b, m, a, a.scores)));
  Value l = b.reduce(p, b.constant(0, acc), {last}, "add");
  return {m, p, l};
}

// log(sum(exp(s))) per row: -inf for a row with every key masked.
Value row_logsumexp(Builder& b, const RowSoftmax& r) { return b.binary("add", r.m, b.unary("log", r.l)); }

}  // namespace

// _scaled_dot_product_fused_attention_overrideable(q, k, v, attn_bias?,
// dropout_p, is_causal, return_debug_mask, *, scale?) -> (out, logsumexp,
// cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
// debug_attn_mask). The meta kernel leaves cum_seq_* and the debug mask
// undefined and max_q/max_k are ints, so the lowering returns out, the
// log-sum-exp and the two (unused, dropout-free) philox tensors.
std::vector<Value> scaled_dot_product_fused_attention(LowerContext& ctx) {
  Builder& b = ctx.b;
  check_no_dropout(ctx, 4);
  Float16InputPrecision precision(ctx, ctx.tensor(0).dtype());  // products in float32
  const TensorType& out_t = ctx.out_types.at(0);
  const ElementType acc = accumulation_type(out_t.dtype);
  const Value q = b.convert(ctx.tensor(0), acc), k = b.convert(ctx.tensor(1), acc), v = b.convert(ctx.tensor(2), acc);
  const AttentionDims a = attention_dims(q, k, v);
  const int64_t last = a.rank - 1;
  Value s = masked_scores(ctx, a, q, k, 3, ctx.bool_arg(5), softmax_scale(ctx, 7, a.d));

  const RowSoftmax r = row_softmax(b, a, s);
  Value o = product(ctx, a, r.p, v, last, a.rank - 2);
  const Value l_nonzero =
      b.select(b.compare(r.l, b.splat(0, r.l.type), CompareDirection::EQ), b.splat(1, r.l.type), r.l);
  o = b.binary("divide", o, over_rows(b, l_nonzero, a, o.shape()));
  Value lse = row_logsumexp(b, r);
  const TensorType& lse_t = ctx.out_types.at(1);
  return {b.convert(o, out_t.dtype), b.reshape(b.convert(lse, lse_t.dtype), lse_t.shape), zeros(b, ctx.out_types.at(2)),
          zeros(b, ctx.out_types.at(3))};
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, q, k,
// v, attn_bias, grad_input_mask[4], out, logsumexp, cum_seq_q, cum_seq_k,
// max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale?)
// -> (grad_q, grad_k, grad_v, grad_attn_bias). The meta kernel defines
// grad_q/k/v always and grad_attn_bias when attn_bias is defined.
// With P = exp(S - lse): dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
// dQ = dS K * scale, dK = dS^T Q * scale, dBias = dS summed to the bias's shape.
std::vector<Value> scaled_dot_product_fused_attention_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  check_no_dropout(ctx, 12);
  Float16InputPrecision precision(ctx, ctx.tensor(1).dtype());  // products in float32
  const ElementType acc = accumulation_type(ctx.out_types.at(0).dtype);
  const Value q = b.convert(ctx.tensor(1), acc), k = b.convert(ctx.tensor(2), acc), v = b.convert(ctx.tensor(3), acc);
  const Value g = b.convert(ctx.tensor(0), acc), out = b.convert(ctx.tensor(6), acc);
  const AttentionDims a = attention_dims(q, k, v);
  const int64_t last = a.rank - 1, seq = a.rank - 2;
  const double scale = softmax_scale(ctx, 16, a.d);
  Value s = masked_scores(ctx, a, q, k, 4, ctx.bool_arg(13), scale);

  // The meta kernel saves logsumexp as float32 whatever the inputs' dtype:
  // P = exp(S - lse) from it would carry float32 rounding (1e-7 of each
  // probability) into a float64 backward, so a wider accumulation recomputes
  // it from the scores.
  Value lse = ctx.tensor(7).dtype() == acc ? b.reshape(b.convert(ctx.tensor(7), acc), a.rows)
                                           : row_logsumexp(b, row_softmax(b, a, s));
  lse = b.select(is_minus_inf(b, lse), b.splat(0, lse.type), lse);  // fully masked rows: P = 0
  Value p = b.unary("exponential", b.binary("subtract", s, over_rows(b, lse, a, a.scores)));

  Value grad_v = product(ctx, a, p, g, seq, seq);
  Value dp = product(ctx, a, g, v, last, last);
  Value delta = b.reduce(b.binary("multiply", g, out), b.constant(0, acc), {last}, "add");
  Value ds = b.binary("multiply", p, b.binary("subtract", dp, over_rows(b, delta, a, a.scores)));
  Value grad_q = product(ctx, a, ds, k, last, seq);
  Value grad_k = product(ctx, a, ds, q, seq, seq);
  grad_q = b.binary("multiply", grad_q, b.splat(scale, grad_q.type));
  grad_k = b.binary("multiply", grad_k, b.splat(scale, grad_k.type));

  std::vector<Value> results = {b.convert(grad_q, ctx.out_types.at(0).dtype),
                                b.convert(grad_k, ctx.out_types.at(1).dtype),
                                b.convert(grad_v, ctx.out_types.at(2).dtype)};
  if (ctx.out_types.size() > 3) {
    // The bias broadcast over the scores: its gradient is dS summed over the
    // dims it was broadcast along (leading dims it lacks, and size-1 dims).
    const TensorType& bias_t = ctx.out_types.at(3);
    const std::vector<int64_t>& mask = ctx.ints(5);
    if (bias_t.dtype == ElementType::Pred || (mask.size() > 3 && mask[3] == 0)) {
      results.push_back(zeros(b, bias_t));  // a bool mask has no gradient
      return results;
    }
    const int64_t offset = a.rank - static_cast<int64_t>(bias_t.shape.size());
    std::vector<int64_t> summed;
    for (int64_t i = 0; i < a.rank; ++i) {
      if (i < offset || (bias_t.shape[i - offset] == 1 && a.scores[i] != 1)) summed.push_back(i);
    }
    Value grad_bias = summed.empty() ? ds : b.reduce(ds, b.constant(0, acc), summed, "add");
    results.push_back(b.convert(b.reshape(grad_bias, bias_t.shape), bias_t.dtype));
  }
  return results;
}

}  // namespace torch_tpu::lower
