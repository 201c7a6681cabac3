// fbgemm's jagged operators as gathers and scatters over positions computed
// on the device. A jagged tensor is `values` [L, inner...] cut into rows by
// `offsets` (one offsets vector per jagged dim, B + 1 entries at the top); its
// padded dense form is [B, max_lengths..., inner...], where element (b, j0,
// j1, ...) is the value at row offsets_k[...offsets_0[b] + j0 ...] + j_k when
// every j is within its row's length, padding elsewhere, and rows longer
// than max_length are cut. Scatters write through one spare slot past the
// end: positions with nothing to write (padding, cut rows) go there.
#include "lower/jagged.h"

#include <stdexcept>
#include <string>

#include "lower/common/indexing.h"
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

Value s64_splat(Builder& b, int64_t v, const Shape& shape) {
  return b.splat(static_cast<double>(v), {ElementType::S64, shape});
}

// operand[positions] of a 1-d operand, for positions of any shape (clamped
// into range, as stablehlo.gather clamps).
Value take(Builder& b, const Value& operand, const Value& positions) {
  return b.gather(operand, positions, hlo::GatherDims::points(1, positions.rank()), positions.shape());
}

int64_t product(const Shape& s, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < s.size(); ++i) n *= s[i];
  return n;
}

// For each position p in [0, n): how many of `ends` (s64 [S]) are <= p,
// which, for the inclusive prefix sums of segment lengths, is the segment
// holding p (empty segments ending at p come before it). A 1 is scattered at
// every end and summed up; ends at or past n land in the spare slot.
Value segment_of_position(Builder& b, const Value& ends, int64_t n) {
  if (ends.type.numel() == 0) return s64_splat(b, 0, {n});
  Value at = b.clamp(s64_splat(b, 0, ends.shape()), ends, s64_splat(b, n, ends.shape()));
  Value marks = b.scatter_points(s64_splat(b, 0, {n + 1}), at, s64_splat(b, 1, ends.shape()), hlo::accumulate);
  return b.slice(prefix_sum(b, marks, 0), {0}, {n}, {1});
}

// Rows of the jagged values behind every position of the padded shape
// [B, max_lengths...], and whether the position holds one.
struct PaddedLayout {
  Value row;    // s64
  Value valid;  // i1
};

// The layout of `padded` over jagged values cut by `offsets`. Each inner
// offsets vector must have one entry per row of the level above, plus one:
// fbgemm's CPU kernels check it (RuntimeError); here the check raises by the
// next synchronization, since the count above is a value.
PaddedLayout padded_layout(LowerContext& ctx, const std::vector<std::optional<Value>>& offsets, const Shape& padded) {
  Builder& b = ctx.b;
  const TensorType index{ElementType::S64, padded};
  for (size_t level = 1; level < offsets.size(); ++level) {
    const Value& above = offsets[level - 1].value();
    const int64_t rows = offsets[level]->shape().at(0), n = above.shape().at(0);
    if (n == 0) continue;
    Value last = b.reshape(as_index(b, b.slice(above, {n - 1}, {n}, {1})), {});
    ctx.check_all(
        b.compare(b.binary("add", last, b.constant_int(1, ElementType::S64)), b.constant_int(rows, ElementType::S64),
                  CompareDirection::EQ),
        "x_offsets[" + std::to_string(level) + "].numel(), " + std::to_string(rows) + " != num_lengths_expected + 1");
  }
  PaddedLayout layout{b.iota(index, 0), b.splat(1, {ElementType::Pred, padded})};
  for (size_t level = 0; level < offsets.size(); ++level) {
    Value off = as_index(b, offsets[level].value());
    Value begin = take(b, off, layout.row);
    Value end = take(b, off, b.binary("add", layout.row, s64_splat(b, 1, padded)));
    Value j = b.iota(index, static_cast<int64_t>(level) + 1);
    layout.valid = b.binary("and", layout.valid, b.compare(j, b.binary("subtract", end, begin), CompareDirection::LT));
    layout.row = b.binary("add", begin, j);
  }
  return layout;
}

// Flat positions [rows' shape..., inner] of the elements of rows `row` (s64)
// in values reshaped to [L * inner].
Value element_positions(Builder& b, const Value& row_of, const Shape& padded, int64_t inner) {
  Shape shape = padded;
  shape.push_back(inner);
  std::vector<int64_t> lead(padded.size());
  for (size_t d = 0; d < padded.size(); ++d) lead[d] = static_cast<int64_t>(d);
  Value row = b.broadcast_in_dim(row_of, shape, lead);
  return b.binary("add", b.binary("multiply", row, s64_splat(b, inner, shape)),
                  b.iota({ElementType::S64, shape}, static_cast<int64_t>(padded.size())));
}

Value broadcast_valid(Builder& b, const PaddedLayout& layout, const Shape& padded, int64_t inner) {
  Shape shape = padded;
  shape.push_back(inner);
  std::vector<int64_t> lead(padded.size());
  for (size_t d = 0; d < padded.size(); ++d) lead[d] = static_cast<int64_t>(d);
  return b.broadcast_in_dim(layout.valid, shape, lead);
}

// The padded dense tensor `out` of jagged `values`, `padding` where no value is.
Value padded_from_jagged(LowerContext& ctx, const Value& values, const std::vector<std::optional<Value>>& offsets,
                         const TensorType& out, const Value& padding) {
  Builder& b = ctx.b;
  const Value fill = b.broadcast_in_dim(padding, out.shape, {});
  const int64_t inner = values.rank() > 1 ? product(values.shape(), 1) : 1;
  if (out.numel() == 0 || values.type.numel() == 0) return fill;
  const Shape padded(out.shape.begin(), out.shape.begin() + 1 + static_cast<int64_t>(offsets.size()));
  const PaddedLayout layout = padded_layout(ctx, offsets, padded);
  Value flat = b.reshape(values, {values.type.numel()});
  Value gathered = take(b, flat, element_positions(b, layout.row, padded, inner));
  Value valid = b.reshape(broadcast_valid(b, layout, padded, inner), out.shape);
  return b.select(valid, b.reshape(gathered, out.shape), fill);
}

// The jagged values `out` [L, inner...] of the padded dense tensor `dense`:
// zero where no dense element maps (rows cut by max_length).
Value jagged_from_padded(LowerContext& ctx, const Value& dense, const std::vector<std::optional<Value>>& offsets,
                         const TensorType& out) {
  // As fbgemm's CPU kernel checks; std::runtime_error reaches Python as RuntimeError.
  const int64_t outer = dense.shape().at(0), rows = offsets.at(0)->shape().at(0) - 1;
  if (outer != rows) {
    throw std::runtime_error("outer_dense_size, " + std::to_string(outer) + " != x_offsets[0].numel() - 1, " +
                             std::to_string(rows));
  }
  Builder& b = ctx.b;
  const Value zero = b.splat(0, out);
  const int64_t total = out.shape.at(0), inner = product(out.shape, 1);
  if (out.numel() == 0 || dense.type.numel() == 0) return zero;
  const Shape padded(dense.shape().begin(), dense.shape().begin() + 1 + static_cast<int64_t>(offsets.size()));
  const PaddedLayout layout = padded_layout(ctx, offsets, padded);
  Shape shape = padded;
  shape.push_back(inner);
  const Value spare = s64_splat(b, total * inner, shape);
  Value positions = element_positions(b, layout.row, padded, inner);
  Value in_range =
      b.binary("and", broadcast_valid(b, layout, padded, inner), b.compare(positions, spare, CompareDirection::LT));
  positions = b.select(in_range, positions, spare);
  Value flat = b.scatter_points(b.splat(0, {out.dtype, {total * inner + 1}}), positions, b.reshape(dense, shape),
                                hlo::accumulate);
  return b.reshape(b.slice(flat, {0}, {total * inner}, {1}), out.shape);
}

// Cumulative sums along the last dim; fbgemm's "complete" one starts at 0 and
// has one more element, its exclusive one starts at 0 and drops the last sum.
enum class Cumsum { Complete, Exclusive, Inclusive };

std::vector<Value> cumsum_of_lengths(LowerContext& ctx, Cumsum kind) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const TensorType& out = ctx.out_types.at(0);
  if (out.numel() == 0) return {b.splat(0, out)};
  const int64_t last = x.rank() - 1;
  if (kind == Cumsum::Inclusive) return {prefix_sum(b, x, last)};
  Shape low(x.rank(), 0), high(x.rank(), 0), interior(x.rank(), 0);
  low[last] = 1;
  if (kind == Cumsum::Exclusive) high[last] = -1;
  return {prefix_sum(b, b.pad(x, b.constant(0, x.dtype()), low, high, interior), last)};
}

// permute_{1,2}D_sparse_data(permute, lengths, values, weights?,
// permuted_lengths_sum): the features (rows of lengths [T, B], or the
// entries of lengths [T]) in `permute`'s order, which may repeat or drop
// some, with their segments of values and weights moved along.
std::vector<Value> permute_sparse_data(LowerContext& ctx, bool two_d) {
  Builder& b = ctx.b;
  Value permute = as_index(b, ctx.tensor(0));
  Value lengths = ctx.tensor(1);
  const int64_t features = lengths.shape().at(0), batch = two_d ? lengths.shape().at(1) : 1;
  const int64_t permuted = permute.shape().at(0);
  Value rows = b.reshape(lengths, {features, batch});
  std::vector<Value> results;
  Value permuted_rows = permuted * batch == 0 || features == 0
                            ? b.splat(0, {lengths.dtype(), {permuted, batch}})
                            : b.gather_slices(rows, 0, b.reshape(permute, {permuted, 1}));
  results.push_back(b.reshape(permuted_rows, ctx.out_types.at(0).shape));

  std::vector<Value> moved{ctx.tensor(2)};
  if (ctx.has(3)) moved.push_back(ctx.tensor(3));
  const int64_t total = ctx.out_types.at(1).shape.at(0);
  if (total == 0 || features == 0) {
    for (size_t i = 0; i < moved.size(); ++i) results.push_back(b.splat(0, ctx.out_types.at(1 + i)));
    return results;
  }
  Value in_lengths = b.reshape(as_index(b, rows), {features * batch});
  Value in_starts = b.binary("subtract", prefix_sum(b, in_lengths, 0), in_lengths);
  Value out_lengths = b.reshape(as_index(b, permuted_rows), {permuted * batch});
  Value out_ends = prefix_sum(b, out_lengths, 0);
  Value out_starts = b.binary("subtract", out_ends, out_lengths);

  const Shape n{total};
  Value segment = segment_of_position(b, out_ends, total);
  Value feature = take(b, permute, b.binary("divide", segment, s64_splat(b, batch, n)));
  Value in_segment = b.binary("add", b.binary("multiply", feature, s64_splat(b, batch, n)),
                              b.binary("remainder", segment, s64_splat(b, batch, n)));
  Value within = b.binary("subtract", b.iota({ElementType::S64, n}, 0), take(b, out_starts, segment));
  Value source = b.binary("add", take(b, in_starts, in_segment), within);
  for (size_t i = 0; i < moved.size(); ++i) {
    const Value& v = moved[i];
    const TensorType& out = ctx.out_types.at(1 + i);
    if (v.type.numel() == 0) {
      results.push_back(b.splat(0, out));
      continue;
    }
    const int64_t inner = product(v.shape(), 1);
    Value positions = element_positions(b, source, n, inner);
    results.push_back(b.reshape(take(b, b.reshape(v, {v.type.numel()}), positions), out.shape));
  }
  return results;
}

}  // namespace

// asynchronous_complete_cumsum(t_in): [0, t0, t0 + t1, ...] along the last dim.
std::vector<Value> asynchronous_complete_cumsum(LowerContext& ctx) { return cumsum_of_lengths(ctx, Cumsum::Complete); }

// asynchronous_exclusive_cumsum(t_in): [0, t0, ..., t0 + ... + t_{n-2}].
std::vector<Value> asynchronous_exclusive_cumsum(LowerContext& ctx) {
  return cumsum_of_lengths(ctx, Cumsum::Exclusive);
}

// asynchronous_inclusive_cumsum(t_in): [t0, t0 + t1, ...].
std::vector<Value> asynchronous_inclusive_cumsum(LowerContext& ctx) {
  return cumsum_of_lengths(ctx, Cumsum::Inclusive);
}

// jagged_to_padded_dense_forward(values, offsets[], max_lengths, padding_value):
// padding_value converted to the values' dtype, as the CPU kernel's
// static_cast<scalar_t> does.
std::vector<Value> jagged_to_padded_dense_forward(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  return {padded_from_jagged(ctx, ctx.tensor(0), ctx.args.at(1).tensors, out,
                             b.convert(b.constant(ctx.double_arg(3), ElementType::F64), out.dtype))};
}

// jagged_to_padded_dense_backward(grad_output, offsets[], total_L): the
// padded gradient's elements back at their values' rows, 0 for values cut
// by max_length.
std::vector<Value> jagged_to_padded_dense_backward(LowerContext& ctx) {
  return {jagged_from_padded(ctx, ctx.tensor(0), ctx.args.at(1).tensors, ctx.out_types.at(0))};
}

// dense_to_jagged_forward(dense, x_offsets[], total_L): the dense elements
// that sit inside the jagged rows.
std::vector<Value> dense_to_jagged_forward(LowerContext& ctx) {
  return {jagged_from_padded(ctx, ctx.tensor(0), ctx.args.at(1).tensors, ctx.out_types.at(0))};
}

// jagged_1d_to_dense(values, offsets, max_sequence_length, padding_value).
std::vector<Value> jagged_1d_to_dense(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  return {padded_from_jagged(ctx, ctx.tensor(0), {ctx.tensor(1)}, out, b.constant_int(ctx.int_arg(3), out.dtype))};
}

// jagged_2d_to_dense(values, offsets, max_sequence_length): zero padding.
std::vector<Value> jagged_2d_to_dense(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  return {padded_from_jagged(ctx, ctx.tensor(0), {ctx.tensor(1)}, out, b.constant(0, out.dtype))};
}

std::vector<Value> permute_1D_sparse_data(LowerContext& ctx) { return permute_sparse_data(ctx, false); }
std::vector<Value> permute_2D_sparse_data(LowerContext& ctx) { return permute_sparse_data(ctx, true); }

// offsets_range(offsets, range_size): position p's distance from the start of
// its segment; segment i spans [offsets[i], offsets[i + 1]) and the last one
// ends at range_size.
std::vector<Value> offsets_range(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value offsets = as_index(b, ctx.tensor(0));
  const int64_t n = offsets.shape().at(0), range = out.shape.at(0);
  if (range == 0 || n == 0) return {b.splat(0, out)};
  Value segment = segment_of_position(b, b.slice(offsets, {1}, {n}, {1}), range);
  Value distance = b.binary("subtract", b.iota({ElementType::S64, {range}}, 0), take(b, offsets, segment));
  return {b.convert(distance, out.dtype)};
}

// segment_sum_csr(batch_size, csr_seg, values): segment i sums
// values[csr_seg[i] * batch_size, csr_seg[i + 1] * batch_size).
std::vector<Value> segment_sum_csr(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  const int64_t segments = out.shape.at(0);
  Value values = ctx.tensor(2);
  const int64_t n = values.type.numel();
  if (segments == 0 || n == 0) return {b.splat(0, out)};
  Value bounds = b.binary("multiply", as_index(b, ctx.tensor(1)), s64_splat(b, ctx.int_arg(0), {segments + 1}));
  Value segment = segment_of_position(b, b.slice(bounds, {1}, {segments + 1}, {1}), n);
  Value first = b.broadcast_in_dim(b.reshape(b.slice(bounds, {0}, {1}, {1}), {}), {n}, {});
  Value before = b.compare(b.iota({ElementType::S64, {n}}, 0), first, CompareDirection::LT);
  Value target = b.select(before, s64_splat(b, segments, {n}), segment);
  Value sums = b.scatter_points(b.splat(0, {out.dtype, {segments + 1}}), target,
                                b.convert(b.reshape(values, {n}), out.dtype), hlo::accumulate);
  return {b.slice(sums, {0}, {segments}, {1})};
}

// permute_pooled_embs(pooled_embs, offset_dim_list, permute_list,
// inv_offset_dim_list, inv_permute_list): the columns of pooled embeddings
// [B, dims...] regrouped by feature, feature i of the result being feature
// permute_list[i] of the input (columns offset_dim_list[p] to [p + 1]).
std::vector<Value> permute_pooled_embs(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value pooled = ctx.tensor(0);
  const TensorType& out = ctx.out_types.at(0);
  const int64_t columns = out.shape.at(1);
  Value offsets = as_index(b, ctx.tensor(1)), permute = as_index(b, ctx.tensor(2));
  const int64_t features = offsets.shape().at(0) - 1, permuted = permute.shape().at(0);
  if (out.numel() == 0 || features <= 0 || permuted == 0) return {b.convert(pooled, out.dtype)};
  Value widths =
      b.binary("subtract", b.slice(offsets, {1}, {features + 1}, {1}), b.slice(offsets, {0}, {features}, {1}));
  Value permuted_widths = take(b, widths, permute);
  Value ends = prefix_sum(b, permuted_widths, 0);
  Value starts = b.binary("subtract", ends, permuted_widths);
  Value feature = segment_of_position(b, ends, columns);
  Value within = b.binary("subtract", b.iota({ElementType::S64, {columns}}, 0), take(b, starts, feature));
  Value source = b.binary("add", take(b, offsets, take(b, permute, feature)), within);
  return {b.gather_slices(pooled, 1, b.reshape(source, {columns, 1}))};
}

}  // namespace torch_tpu::lower
