// Static-index helpers for the spatial lowerings (declared in
// lower/common/spatial.h).
#include "lower/common/spatial.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace torch_tpu::lower {

namespace spatial {

Value take_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  Shape shape = x.shape();
  shape[d] = n;
  if (n == 0 || x.type.numel() == 0) return b.splat(0, {x.dtype(), shape});
  return b.gather_slices(x, d, b.reshape(b.constant_indices(idx), {n, 1}));
}

namespace {

// Tap k of every row: its index and weight, and whether the row has a k-th
// tap at all (a row with fewer taps reads nothing there).
struct Tap {
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<double> present;  // 1 or 0
  bool all_present = true;
};

Tap tap(const Rows& rows, size_t k) {
  Tap t;
  for (const auto& row : rows) {
    const bool has = k < row.size();
    t.idx.push_back(has ? row[k].first : 0);
    t.w.push_back(has ? row[k].second : 0.0);
    t.present.push_back(has ? 1.0 : 0.0);
    t.all_present = t.all_present && has;
  }
  return t;
}

size_t widest(const Rows& rows) {
  size_t k = 0;
  for (const auto& row : rows) k = std::max(k, row.size());
  return k;
}

Value along(Builder& b, const std::vector<double>& v, ElementType dtype, const Shape& shape, int64_t d) {
  return b.broadcast_in_dim(b.constant_vector(v, dtype), shape, {d});
}

// `term` where the row has tap k, else 0: a row never reads (or, transposed,
// writes) a position that is not one of its taps, so a NaN or an infinity
// reaches only the outputs whose taps read it, as in PyTorch's kernels.
Value where_present(Builder& b, const Tap& t, const Value& term, int64_t d) {
  if (t.all_present) return term;
  Value present =
      b.compare(along(b, t.present, term.dtype(), term.shape(), d), b.splat(0, term.type), hlo::CompareDirection::NE);
  return b.select(present, term, b.splat(0, term.type));
}

}  // namespace

// Applied one tap at a time (a gather and a multiply-add), never as a dense
// [out, in] matrix: the matrix's zeros would multiply every input, and
// 0 * inf or 0 * NaN would spread a non-finite value to every output.
Value apply_rows(Builder& b, const Value& x, int64_t d, const Rows& rows, std::optional<ElementType> weight_dtype) {
  const int64_t out = static_cast<int64_t>(rows.size());
  Shape shape = x.shape();
  shape[d] = out;
  Value sum = b.splat(0, {x.dtype(), shape});
  if (x.type.numel() == 0 || out == 0) return sum;
  for (size_t k = 0; k < widest(rows); ++k) {
    const Tap t = tap(rows, k);
    Value w = b.convert(along(b, t.w, weight_dtype.value_or(x.dtype()), shape, d), x.dtype());
    sum = b.binary("add", sum, where_present(b, t, b.binary("multiply", take_along(b, x, d, t.idx), w), d));
  }
  return sum;
}

Value apply_rows_transposed(Builder& b, const Value& g, int64_t d, const Rows& rows, int64_t in) {
  const int64_t out = static_cast<int64_t>(rows.size());
  Shape shape = g.shape();
  shape[d] = in;
  Value sum = b.splat(0, {g.dtype(), shape});
  if (g.type.numel() == 0 || out == 0 || in == 0) return sum;
  for (size_t k = 0; k < widest(rows); ++k) {
    const Tap t = tap(rows, k);
    Value upd = where_present(b, t, b.binary("multiply", g, along(b, t.w, g.dtype(), g.shape(), d)), d);
    Value indices = b.reshape(b.constant_indices(t.idx), {out, 1});
    sum = b.scatter_slices(sum, d, indices, upd, hlo::accumulate);
  }
  return sum;
}

Value scatter_add_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx, int64_t size) {
  Rows rows;
  for (int64_t i : idx) rows.push_back({{i, 1.0}});
  return apply_rows_transposed(b, x, d, rows, size);
}

}  // namespace spatial

}  // namespace torch_tpu::lower
