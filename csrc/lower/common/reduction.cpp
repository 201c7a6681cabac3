// Reduction helpers shared by the lowerings (declared in
// lower/common/reduction.h).
#include "lower/common/reduction.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace torch_tpu::lower {

DimInput dim_input(const LowerContext& ctx, const Value& x, size_t dim_arg) {
  if (x.rank() == 0) return {ctx.b.reshape(x, {1}), 0};
  return {x, wrap_dim(ctx.int_arg(dim_arg), x.rank())};
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

// The dims argument `i` names: an int, an int list, or None. None, or an
// overload without a dim argument (`present` false) mean every dim. An empty
// list means every dim for sum/mean/amax/var ... (`empty_is_all`), but
// nothing for all.dims/any.dims (PyTorch 2.2+). A 0-d tensor accepts dim
// 0 / -1 and has nothing to reduce.
std::vector<int64_t> reduction_dims(const LowerContext& ctx, size_t i, int64_t rank, bool present, bool empty_is_all) {
  std::vector<int64_t> dims;
  if (rank == 0) return dims;
  const bool given =
      present && ctx.has(i) && (ctx.args[i].kind == Arg::Kind::Int || ctx.args[i].kind == Arg::Kind::IntList);
  if (!given || (ctx.args[i].kind == Arg::Kind::IntList && ctx.args[i].ints.empty() && empty_is_all)) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  if (ctx.args[i].kind == Arg::Kind::Int) {
    dims.push_back(wrap_dim(ctx.args[i].i, rank));
  } else {
    for (int64_t d : ctx.args[i].ints) dims.push_back(wrap_dim(d, rank));
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

int64_t reduced_count(const Value& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[d];
  return n;
}

// Dims of `x` that survive a reduction over `dims`, for broadcasting back.
std::vector<int64_t> kept_dims(int64_t rank, const std::vector<int64_t>& dims) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  }
  return kept;
}

Shape kept_shape(const Value& x, const std::vector<int64_t>& dims) {
  Shape shape;
  for (int64_t d : kept_dims(x.rank(), dims)) shape.push_back(x.shape()[d]);
  return shape;
}

namespace {

// Trailing reduced elements below which one reduce adds as accurately as
// PyTorch's CPU kernels do: its error grows with the count added in turn.
constexpr int64_t kBlockedSumMinimum = 4096;

// XLA:CPU's tree reduction rewrite fires on a reduced dim wider than this
// (TreeReductionRewriter's window size on CPU).
constexpr int64_t kXlaCpuTreeReductionWindow = 32;

// Block size for a sum of `count` trailing elements: the divisor of `count`
// nearest its square root (each element then passes through about
// 2 * sqrt(count) additions, not `count`), at least 16. 0 where none is.
int64_t sum_block(int64_t count) {
  const double root = std::sqrt(static_cast<double>(count));
  auto distance = [&](int64_t d) { return std::abs(std::log(static_cast<double>(d) / root)); };
  auto usable = [&](int64_t d) { return d >= 16 && d < count; };
  int64_t best = 0;
  for (int64_t d = 1; d * d <= count; ++d) {
    if (count % d != 0) continue;
    for (int64_t candidate : {d, count / d}) {
      if (usable(candidate) && (best == 0 || distance(candidate) < distance(best))) best = candidate;
    }
  }
  return best;
}

// The reduced dims that run to the last one, `first`..rank-1 (none: first
// is rank), and how many elements they hold.
struct TrailingReduced {
  int64_t first = 0;
  int64_t count = 1;
};

TrailingReduced trailing_reduced(const Value& x, const std::vector<int64_t>& dims) {
  TrailingReduced t{x.rank(), 1};
  while (t.first > 0 && std::find(dims.begin(), dims.end(), t.first - 1) != dims.end()) {
    --t.first;
    t.count *= x.shape()[t.first];
  }
  return t;
}

// A float sum: reduce_with adds it through blocked_sum.
bool is_float_sum(const Value& x, const std::string& combiner) { return combiner == "add" && hlo::is_float(x.dtype()); }

Value plain_sum(Builder& b, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(x, reduce_init(b, "add", x.dtype()), dims, "add");
}

// XLA:CPU adds a reduction whose input it fuses from other ops one element
// after another, so its error grows with the count: a BatchNorm3d channel of
// s3d (50,176 squares in the variance) came out 2.7e-6 off in float32, where
// PyTorch's CPU kernel is 1e-7 off, and 1.4e-6 in invstd moved activations
// past ReLU kinks that CPU kept; the mean square of 200,704 values (a loss)
// was 5.6e-6 off. Summing blocks first, then the blocks' sums, is as accurate
// as CPU (1.5e-7 and 8e-8). A standalone reduce of a buffer was already, and a
// TPU adds in a tree either way; the blocks' sums are a sliver of the input.
Value blocked_sum(Builder& b, const Value& x, const std::vector<int64_t>& dims) {
  const Shape& shape = x.shape();
  const auto [first, count] = trailing_reduced(x, dims);
  const int64_t block = count >= kBlockedSumMinimum ? sum_block(count) : 0;
  if (block == 0) return plain_sum(b, x, dims);
  Shape blocked(shape.begin(), shape.begin() + first);
  blocked.push_back(count / block);
  blocked.push_back(block);
  // The barrier keeps XLA's simplifier from folding the two reduces into one
  // (it does where every dim is reduced).
  Value partial = b.op("optimization_barrier", {plain_sum(b, b.reshape(x, blocked), {first + 1})},
                       TensorType{x.dtype(), Shape(blocked.begin(), blocked.end() - 1)});
  std::vector<int64_t> rest;
  for (int64_t d : dims) {
    if (d < first) rest.push_back(d);
  }
  rest.push_back(first);
  return plain_sum(b, partial, rest);
}

std::atomic<Platform> reduction_platform{Platform::Tpu};

// XLA:CPU rewrites a reduce with a reduced dim wider than 32 into a
// reduce_window of (at most) 32 along every reduced dim, then a reduce of
// the windows (its tree reduction). Where two reduced dims are adjacent, the
// window spans both: a Linear's bias gradient or a LayerNorm's weight
// gradient, the column sum of a [16, 64, C] gradient (or of its [1024, C]
// view, whose reshape XLA's simplifier folds back into the reduce), became
// one 16x32 window per column, a chain of 512 dependent scalar adds each.
// That left the fused GPT step's 24 column sums 3x slower than a [1024, C]
// one (C = 256: 256 us against 84 per call) and put 8.6% of the step's
// device time in reduce_windows. So on XLA:CPU adjacent reduced dims are
// merged into one, and a barrier keeps that shape as lowered: no window
// then holds more than 32 elements. Where the operand was already that
// shape the barrier costs nothing measurable (a fused [1024, 256] column
// sum: 69 us without, 65 with). Only on XLA:CPU: a TPU's compiler has no
// such rewrite, and there the barrier would only stop the producer fusing
// into the reduce. A reduce over the minor-most dim alone reads contiguous
// windows and keeps its fusion.
struct ReduceOperand {
  Value x;
  std::vector<int64_t> dims;
};

ReduceOperand shaped_for_cpu_tree_reduction(Builder& b, const Value& x, const std::vector<int64_t>& dims,
                                            const std::string& combiner) {
  if (reduction_platform.load(std::memory_order_relaxed) != Platform::Cpu) return {x, dims};
  // No reduced dim wider than a window: XLA does not rewrite the reduce, and
  // merging dims would make one that it does (a BatchNorm's sums over
  // [32, C, 32, 32] became 10% slower in a fused step that way).
  const bool rewritten =
      std::any_of(dims.begin(), dims.end(), [&](int64_t d) { return x.shape()[d] > kXlaCpuTreeReductionWindow; });
  if (!rewritten) return {x, dims};
  // A float sum of many trailing elements adds in blocks (blocked_sum), in
  // a shape XLA cannot fold back, and keeps its producer fused.
  if (is_float_sum(x, combiner) && trailing_reduced(x, dims).count >= kBlockedSumMinimum) {
    return {x, dims};
  }
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Shape merged;
  std::vector<int64_t> merged_dims;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (reduced(d) && d > 0 && reduced(d - 1)) {
      merged.back() *= x.shape()[d];
    } else {
      if (reduced(d)) merged_dims.push_back(static_cast<int64_t>(merged.size()));
      merged.push_back(x.shape()[d]);
    }
  }
  const bool merges = merged.size() != x.shape().size();
  const int64_t rank = static_cast<int64_t>(merged.size());
  const bool long_windows = std::any_of(merged_dims.begin(), merged_dims.end(), [&](int64_t d) {
    return merged[d] > kXlaCpuTreeReductionWindow && (merges || d + 1 < rank);
  });
  if (!long_windows) return {x, dims};
  const Value shaped = merges ? b.reshape(x, merged) : x;
  return {b.op("optimization_barrier", {shaped}, shaped.type), merged_dims};
}

}  // namespace

void set_reduction_platform(Platform platform) { reduction_platform.store(platform, std::memory_order_relaxed); }

Value reduce_with(Builder& b, const Value& operand, const std::vector<int64_t>& reduced_dims,
                  const std::string& combiner) {
  if (reduced_dims.empty()) return operand;
  const auto [x, dims] = shaped_for_cpu_tree_reduction(b, operand, reduced_dims, combiner);
  if (is_float_sum(x, combiner)) return blocked_sum(b, x, dims);
  return b.reduce(x, reduce_init(b, combiner, x.dtype()), dims, combiner);
}

// max/min that propagate NaN (PyTorch's amax, max, maximum): XLA's
// maximum/minimum is not guaranteed to on every backend.
Value nan_max_min(Builder& b, const Value& x, const std::vector<int64_t>& dims, bool is_max) {
  if (dims.empty()) return x;
  const ElementType t = x.dtype();
  if (t == ElementType::Pred) return reduce_with(b, x, dims, is_max ? "or" : "and");
  const std::string comb = is_max ? "maximum" : "minimum";
  if (!hlo::is_float(t)) return reduce_with(b, x, dims, comb);
  return b.reduce({x}, {reduce_init(b, comb, t)}, dims, [&](Builder& rb, const std::vector<Value>& a) {
    Value m = rb.binary(comb, a[0], a[1]);
    m = rb.select(is_nan(rb, a[1]), a[1], m);
    return std::vector<Value>{rb.select(is_nan(rb, a[0]), a[0], m)};
  })[0];
}

// Sum in the accumulation type of `out`, converted to `out` (a bf16 sum
// adds in f32; a bool or int sum arrives with an int64 `out`).
Value sum_to(Builder& b, const Value& x, const std::vector<int64_t>& dims, const TensorType& out) {
  const ElementType acc = accumulation_type(out.dtype);
  Value s = reduce_with(b, b.convert(x, acc), dims, acc == ElementType::Pred ? "or" : "add");
  return b.reshape(b.convert(s, out.dtype), out.shape);
}

// Broadcast a reduced value (the reduce's own shape or keepdim shape) back
// over `like`'s shape.
Value expand_back(Builder& b, const Value& reduced, const Value& like, const std::vector<int64_t>& dims) {
  return b.broadcast_in_dim(b.reshape(reduced, kept_shape(like, dims)), like.shape(), kept_dims(like.rank(), dims));
}

Value vector_norm(Builder& b, const Value& x, const std::vector<int64_t>& dims, double ord) {
  Value a = x.dtype() == ElementType::Pred || hlo::is_unsigned(x.dtype()) ? x : b.unary("abs", x);
  if (std::isinf(ord)) return nan_max_min(b, a, dims, ord > 0);
  // (a complex x's norms are its magnitudes' norms, real)
  if (ord == 0) {
    Value nonzero = b.compare(a, zeros(b, a.type), hlo::CompareDirection::NE);
    return reduce_with(b, b.convert(nonzero, a.dtype()), dims, "add");
  }
  if (ord == 1) return reduce_with(b, a, dims, "add");
  if (ord == 2) return b.unary("sqrt", reduce_with(b, squared_magnitude(b, x), dims, "add"));
  Value s = reduce_with(b, b.binary("power", a, b.splat(ord, a.type)), dims, "add");
  return b.binary("power", s, b.splat(1.0 / ord, s.type));
}

Value sum_all(Builder& b, const Value& x) { return reduce_with(b, x, all_dims(x.rank()), "add"); }

Value any_true(Builder& b, const Value& pred) { return reduce_with(b, pred, all_dims(pred.rank()), "or"); }

Value squared_magnitude(Builder& b, const Value& d) {
  if (!hlo::is_complex(d.dtype())) return b.binary("multiply", d, d);
  Value re = b.real(d), im = b.imag(d);
  return b.binary("add", b.binary("multiply", re, re), b.binary("multiply", im, im));
}

}  // namespace torch_tpu::lower
