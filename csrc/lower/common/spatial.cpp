// Static-index helpers for the spatial lowerings (declared in
// lower/common/spatial.h).
#include "lower/common/spatial.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace torch_tpu::lower {

namespace spatial {

Value constant_vector(Builder& b, const std::vector<double>& values, ElementType dtype) {
  TensorType t{dtype, {static_cast<int64_t>(values.size())}};
  std::string lit = "dense<[";
  char buf[64];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.17g", values[i]);
    std::string s(buf);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    lit += (i ? ", " : "") + s;
  }
  return b.op("constant", {}, t, "value = " + lit + "]> : " + t.str());
}

Value constant_indices(Builder& b, const std::vector<int64_t>& values) {
  TensorType t{ElementType::S64, {static_cast<int64_t>(values.size())}};
  std::string lit = "dense<[";
  for (size_t i = 0; i < values.size(); ++i) lit += (i ? ", " : "") + std::to_string(values[i]);
  return b.op("constant", {}, t, "value = " + lit + "]> : " + t.str());
}

Value take_along(Builder& b, const Value& x, int64_t d, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  Shape shape = x.shape();
  shape[d] = n;
  if (n == 0 || x.type.numel() == 0) return b.splat(0, {x.dtype(), shape});
  return b.gather_slices(x, d, b.reshape(constant_indices(b, idx), {n, 1}));
}

Value contract_along(Builder& b, const Value& x, const std::vector<double>& m, int64_t rows, int64_t cols, int64_t d,
                     int64_t contract, std::optional<ElementType> weight_dtype) {
  const int64_t kept_size = contract == 1 ? rows : cols;
  Shape out_shape = x.shape();
  out_shape[d] = kept_size;
  if (x.type.numel() == 0 || kept_size == 0 || x.shape()[d] == 0) return b.splat(0, {x.dtype(), out_shape});
  Value mat = b.reshape(b.convert(constant_vector(b, m, weight_dtype.value_or(x.dtype())), x.dtype()), {rows, cols});
  // dot_general puts x's free dims first, then the matrix's kept dim.
  Shape shape;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != d) shape.push_back(x.shape()[i]);
  }
  shape.push_back(kept_size);
  Value r = b.dot_general(x, mat, {}, {}, {d}, {contract}, {x.dtype(), shape}, "HIGHEST");
  for (int64_t i = 0, free = 0; i < x.rank(); ++i) perm.push_back(i == d ? x.rank() - 1 : free++);
  return b.transpose(r, perm);
}

namespace {

// Matrices up to this many entries are applied densely (one dot_general, the
// fastest form on XLA); larger ones as one gather (or scatter-add) per tap.
constexpr int64_t kDenseLimit = int64_t{1} << 16;

std::vector<double> dense(const Rows& rows, int64_t in) {
  std::vector<double> m(rows.size() * static_cast<size_t>(in), 0.0);
  for (size_t o = 0; o < rows.size(); ++o) {
    for (const auto& [i, w] : rows[o]) m[o * in + i] += w;
  }
  return m;
}

// Tap k of every row (index, weight); rows with fewer taps add weight 0.
void tap(const Rows& rows, size_t k, std::vector<int64_t>& idx, std::vector<double>& w) {
  idx.clear();
  w.clear();
  for (const auto& row : rows) {
    idx.push_back(k < row.size() ? row[k].first : 0);
    w.push_back(k < row.size() ? row[k].second : 0.0);
  }
}

size_t widest(const Rows& rows) {
  size_t k = 0;
  for (const auto& row : rows) k = std::max(k, row.size());
  return k;
}

Value weights_along(Builder& b, const std::vector<double>& w, ElementType dtype, ElementType compute,
                    const Shape& shape, int64_t d) {
  return b.broadcast_in_dim(b.convert(constant_vector(b, w, dtype), compute), shape, {d});
}

}  // namespace

Value apply_rows(Builder& b, const Value& x, int64_t d, const Rows& rows, std::optional<ElementType> weight_dtype) {
  const int64_t out = static_cast<int64_t>(rows.size()), in = x.shape()[d];
  if (out * in <= kDenseLimit) return contract_along(b, x, dense(rows, in), out, in, d, 1, weight_dtype);
  Shape shape = x.shape();
  shape[d] = out;
  Value sum = b.splat(0, {x.dtype(), shape});
  std::vector<int64_t> idx;
  std::vector<double> w;
  for (size_t k = 0; k < widest(rows); ++k) {
    tap(rows, k, idx, w);
    Value term = b.binary("multiply", take_along(b, x, d, idx),
                          weights_along(b, w, weight_dtype.value_or(x.dtype()), x.dtype(), shape, d));
    sum = b.binary("add", sum, term);
  }
  return sum;
}

Value apply_rows_transposed(Builder& b, const Value& g, int64_t d, const Rows& rows, int64_t in) {
  const int64_t out = static_cast<int64_t>(rows.size());
  if (out * in <= kDenseLimit) return contract_along(b, g, dense(rows, in), out, in, d, 0);
  Shape shape = g.shape();
  shape[d] = in;
  Value sum = b.splat(0, {g.dtype(), shape});
  if (g.type.numel() == 0 || out == 0) return sum;
  std::vector<int64_t> idx;
  std::vector<double> w;
  for (size_t k = 0; k < widest(rows); ++k) {
    tap(rows, k, idx, w);
    Value upd = b.binary("multiply", g, weights_along(b, w, g.dtype(), g.dtype(), g.shape(), d));
    Value indices = b.reshape(constant_indices(b, idx), {out, 1});
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
