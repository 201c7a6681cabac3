// Matrix helpers the linalg lowerings share (declared in lower/linalg/common.h).
#include "lower/linalg/common.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "lower/common/reduction.h"

namespace torch_tpu::lower::linalg {

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ElementType factor_type(ElementType t) {
  switch (t) {
    case ElementType::F64:
    case ElementType::C64:
    case ElementType::C128:
      return t;
    default:
      return ElementType::F32;
  }
}

Value flatten_batch(Builder& b, const Value& v, Complex complex) {
  const bool is_complex = hlo::is_complex(v.dtype());
  if (is_complex && complex == Complex::Raises)  // never drop an imaginary part
    throw NotImplementedForDtype("linalg on tpu: complex matrices are not supported");
  const int64_t m = v.shape()[v.rank() - 2], n = v.shape()[v.rank() - 1];
  return b.reshape(b.convert(v, factor_type(v.dtype())), {product(batch_of(v.shape())), m, n});
}

ElementType real_type(const Value& v) { return hlo::complex_part_type(v.dtype()); }

bool is_double(const Value& v) { return real_type(v) == ElementType::F64; }

Value batched_to(Builder& b, const Value& v, const Shape& batch, Complex complex) {
  const int64_t m = v.shape()[v.rank() - 2], n = v.shape()[v.rank() - 1];
  return flatten_batch(b, b.broadcast_to(v, concat(batch, {m, n})), complex);
}

std::pair<Value, Value> batched_arguments(LowerContext& ctx, Complex complex) {
  const Shape batch = batch_of(ctx.out_types.at(0).shape);
  return {batched_to(ctx.b, ctx.tensor(0), batch, complex), batched_to(ctx.b, ctx.tensor(1), batch, complex)};
}

Value iota(Builder& b, const Shape& shape, int64_t dim) { return b.iota({ElementType::S64, shape}, dim); }

Value bcast(Builder& b, const Value& scalar, const Shape& shape) { return b.broadcast_in_dim(scalar, shape, {}); }

Value bcast_lead(Builder& b, const Value& v, const Shape& shape) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.rank(); ++i) dims.push_back(i);
  return b.broadcast_in_dim(v, shape, dims);
}

Value cmp(Builder& b, const Value& x, const Value& y, CompareDirection dir) { return b.compare(x, y, dir); }

Value both(Builder& b, const Value& x, const Value& y) { return b.binary("and", x, y); }

Value masked_sum(Builder& b, const Value& v, const Value& mask, int64_t dim) {
  return b.reduce(b.select(mask, v, zeros(b, v.type)), b.constant(0, v.dtype()), {dim}, "add");
}

Value squared_magnitude_sum(Builder& b, const Value& v, const std::vector<int64_t>& dims) {
  Value sq = squared_magnitude(b, v);
  return b.reduce(sq, b.constant(0, sq.dtype()), dims, "add");
}

Value mT(Builder& b, const Value& v) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < v.rank(); ++i) perm.push_back(i);
  std::swap(perm[v.rank() - 1], perm[v.rank() - 2]);
  return b.transpose(v, perm);
}

Value bmm(Builder& b, const Value& x, const Value& y) {
  return b.dot_general(x, y, {0}, {0}, {2}, {1}, {x.dtype(), {x.shape()[0], x.shape()[1], y.shape()[2]}}, kPrecision);
}

Value triangle(Builder& b, const Value& v, bool lower, int64_t diag) {
  const Shape& s = v.shape();
  Value offset = b.binary("subtract", iota(b, s, v.rank() - 1), iota(b, s, v.rank() - 2));
  Value d = b.splat(static_cast<double>(diag), offset.type);
  return b.select(cmp(b, offset, d, lower ? CompareDirection::LE : CompareDirection::GE), v, zeros(b, v.type));
}

Value eye(Builder& b, const Shape& shape, ElementType dtype) {
  const int64_t r = static_cast<int64_t>(shape.size());
  Value on = cmp(b, iota(b, shape, r - 2), iota(b, shape, r - 1), CompareDirection::EQ);
  return b.convert(on, dtype);
}

Value diagonal(Builder& b, const Value& v) {
  const int64_t k = std::min(v.shape()[1], v.shape()[2]);
  Value sq = b.slice(v, {0, 0, 0}, {v.shape()[0], k, k}, {1, 1, 1});
  Value on = cmp(b, iota(b, sq.shape(), 1), iota(b, sq.shape(), 2), CompareDirection::EQ);
  return masked_sum(b, sq, on, 2);
}

Value tri_solve(Builder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit, bool transpose) {
  return b.triangular_solve(a, rhs, left, lower, unit, transpose);
}

Value counter(Builder& b, const Value& k, const Shape& shape) { return bcast(b, k, shape); }

Value next_counter(Builder& b, const Value& k, int64_t step) {
  return b.binary("add", k, b.constant_int(step, ElementType::S64));
}

std::vector<Value> for_loop(Builder& b, int64_t from, int64_t to, int64_t step, std::vector<Value> state,
                            const std::function<std::vector<Value>(Builder&, const Value&, std::vector<Value>)>& body) {
  if ((step > 0 && from >= to) || (step < 0 && from <= to)) return state;
  state.insert(state.begin(), b.constant_int(from, ElementType::S64));
  std::vector<Value> out = b.while_loop(
      state,
      [&](Builder& rb, const std::vector<Value>& s) {
        return std::vector<Value>{rb.compare(s[0], rb.constant_int(to, ElementType::S64),
                                             step > 0 ? CompareDirection::LT : CompareDirection::GT)};
      },
      [&](Builder& rb, const std::vector<Value>& s) {
        std::vector<Value> next = body(rb, s[0], std::vector<Value>(s.begin() + 1, s.end()));
        next.insert(next.begin(), next_counter(rb, s[0], step));
        return next;
      });
  return std::vector<Value>(out.begin() + 1, out.end());
}

Value pivot_magnitude(Builder& b, const Value& x) {
  if (!hlo::is_complex(x.dtype())) return b.unary("abs", x);
  return b.binary("add", b.unary("abs", b.real(x)), b.unary("abs", b.imag(x)));
}

Value perm_rows(Builder& b, const Value& perm, ElementType dtype) {
  const int64_t bsz = perm.shape()[0], m = perm.shape()[1];
  Shape s{bsz, m, m};
  return b.convert(cmp(b, b.broadcast_in_dim(perm, s, {0, 1}), iota(b, s, 2), CompareDirection::EQ), dtype);
}

Value reshape_as(Builder& b, const Value& v, const TensorType& t) { return b.convert(b.reshape(v, t.shape), t.dtype); }

Value identity_of(Builder& b, const TensorType& t) {
  if (t.numel() == 0 || t.rank() < 2) return zeros(b, t);
  return coerce(b, eye(b, t.shape, ElementType::F32), t);
}

bool has_zero_size(const std::vector<TensorType>& types) {
  for (const auto& t : types) {
    if (t.numel() == 0) return true;
  }
  return false;
}

}  // namespace torch_tpu::lower::linalg
