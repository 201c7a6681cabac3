// logspace, nonzero_static and hash_tensor. logspace follows PyTorch's CPU kernel
// (ATen/native/RangeFactories.cpp, logspace_out) operation by operation, in
// double where it works in double, so integer results truncate the same
// values CPU truncates.
#include "lower/creation_extra.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "lower/elementwise.h"
#include "lower/scan.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

ScalarArg float_scalar(double v) {
  ScalarArg s;
  s.kind = ScalarArg::Kind::Float;
  s.f = v;
  return s;
}

// A double computed in the kernel, stored into a `dtype` element: C++'s
// conversion, which for bf16/f16 goes through float (c10's constructors).
// Narrow integers take the low bits of the int64 value, as x86's
// double -> int conversion does (XLA's direct convert would saturate).
Value store_as(Builder& b, const Value& v, ElementType dtype) {
  if (dtype == ElementType::BF16 || dtype == ElementType::F16) return b.convert(b.convert(v, ElementType::F32), dtype);
  if (hlo::is_integer(dtype)) return b.convert(b.convert(v, ElementType::S64), dtype);
  return b.convert(v, dtype);
}

// Scalar::to<scalar_t>() for an integer result: floats truncate.
int64_t scalar_to_int(const ScalarArg& s) { return s.kind == ScalarArg::Kind::Float ? static_cast<int64_t>(s.f) : s.i; }

// start.to<scalar_t>() widened back to double, as `scalar_start + step * i`
// does; and scalar_end - scalar_start, which C++ computes in scalar_t for
// floats (bf16 rounds) and in int/int64 for integers.
struct Endpoints {
  Value start, end, diff;  // 0-d f64
};

Endpoints endpoints(LowerContext& ctx, ElementType dtype) {
  Builder& b = ctx.b;
  const ScalarArg& s = ctx.args.at(0).scalar;
  const ScalarArg& e = ctx.args.at(1).scalar;
  check_scalar_fits(s, dtype);
  check_scalar_fits(e, dtype);
  if (!hlo::is_float(dtype)) {
    Value si = b.convert(b.constant_int(scalar_to_int(s), ElementType::S64), dtype);
    Value ei = b.convert(b.constant_int(scalar_to_int(e), ElementType::S64), dtype);
    Value wide_s = b.convert(si, ElementType::S64), wide_e = b.convert(ei, ElementType::S64);
    Value diff = b.binary("subtract", wide_e, wide_s);
    return {b.convert(wide_s, ElementType::F64), b.convert(wide_e, ElementType::F64), b.convert(diff, ElementType::F64)};
  }
  Value st = b.convert(ctx.scalar(s, ElementType::F64), dtype);
  Value et = b.convert(ctx.scalar(e, ElementType::F64), dtype);
  if (dtype == ElementType::BF16 || dtype == ElementType::F16) {
    // c10::BFloat16/Half: widen to float, operate, round back.
    st = b.convert(ctx.scalar(s, ElementType::F32), dtype);
    et = b.convert(ctx.scalar(e, ElementType::F32), dtype);
    Value d = b.binary("subtract", b.convert(et, ElementType::F32), b.convert(st, ElementType::F32));
    return {b.convert(st, ElementType::F64), b.convert(et, ElementType::F64),
            b.convert(b.convert(d, dtype), ElementType::F64)};
  }
  return {b.convert(st, ElementType::F64), b.convert(et, ElementType::F64),
          b.convert(b.binary("subtract", et, st), ElementType::F64)};
}

// Coordinates of every element of `shape`, row-major, as [n, rank] int64.
Value coordinates(Builder& b, const Shape& shape, int64_t n) {
  std::vector<Value> cols;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    cols.push_back(b.reshape(b.iota({ElementType::S64, shape}, d), {n, 1}));
  }
  return b.concatenate(cols, 1);
}

}  // namespace

// logspace.out(start, end, steps, base, out): base ** (start + step * i) for
// the first half, base ** (end - step * (steps - 1 - i)) for the second, with
// step = double(end - start) / (steps - 1), pow in double, then stored in
// the result type. steps == 1 fills base ** start.
std::vector<Value> logspace(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType out = ctx.out_types.at(0);
  const int64_t steps = out.numel();
  const double base = ctx.double_arg(3, 10.0);
  if (hlo::is_complex(out.dtype)) throw NotImplementedForDtype("tpu: complex logspace is not supported");
  if (steps == 0) return {b.splat(0, out)};
  const Shape shape{steps};
  Value base_v = b.broadcast_to(ctx.cast_scalar(float_scalar(base), ElementType::F64), shape);
  if (steps == 1) {
    const double v = std::pow(base, ctx.args.at(0).scalar.as_double());
    return {b.reshape(store_as(b, ctx.cast_scalar(float_scalar(v), ElementType::F64), out.dtype), out.shape)};
  }
  Endpoints ep = endpoints(ctx, out.dtype);
  Value step = b.binary("divide", ep.diff, b.constant(static_cast<double>(steps - 1), ElementType::F64));
  Value i = b.iota({ElementType::S64, shape}, 0);
  Value from_end = b.binary("subtract", b.broadcast_to(b.constant_int(steps - 1, ElementType::S64), shape), i);
  Value d = b.broadcast_to(step, shape);
  Value head = b.binary("add", b.broadcast_to(ep.start, shape), b.binary("multiply", d, b.convert(i, ElementType::F64)));
  Value tail = b.binary("subtract", b.broadcast_to(ep.end, shape),
                        b.binary("multiply", d, b.convert(from_end, ElementType::F64)));
  Value halfway = b.broadcast_to(b.constant_int(steps / 2, ElementType::S64), shape);
  Value exponent = b.select(b.compare(i, halfway, CompareDirection::LT), head, tail);
  return {b.reshape(store_as(b, b.binary("power", base_v, exponent), out.dtype), out.shape)};
}

// nonzero_static(self, *, size, fill_value): the first `size` rows of
// nonzero(self), padded with fill_value. Each true element's rank among the
// true elements (an inclusive prefix count) is its row; its coordinates are
// scattered there. Elements past `size` go to one spare row that is cut off.
std::vector<Value> nonzero_static(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  const int64_t fill = ctx.int_arg(2, -1);
  const int64_t n = x.type.numel();
  if (out.numel() == 0) return {b.splat(0, out)};
  const int64_t size = out.shape.at(0), rank = out.shape.at(1);
  const TensorType padded{ElementType::S64, {size + 1, rank}};
  Value base = b.broadcast_to(b.constant_int(fill, ElementType::S64), padded.shape);
  if (n == 0) return {b.convert(b.slice(base, {0, 0}, {size, rank}, {1, 1}), out.dtype)};
  Value nz = b.reshape(b.convert(x, ElementType::Pred), {n});
  Value count = b.convert(nz, ElementType::S64);
  auto add = [](Builder& rb, const std::vector<Value>& a, const std::vector<Value>& c) {
    return std::vector<Value>{rb.binary("add", a[0], c[0])};
  };
  Value rank_of = inclusive_scan(b, {count}, 0, {b.constant_int(0, ElementType::S64)}, add)[0];
  Value row = b.binary("subtract", rank_of, b.broadcast_to(b.constant_int(1, ElementType::S64), {n}));
  Value spare = b.broadcast_to(b.constant_int(size, ElementType::S64), {n});
  Value keep = b.binary("and", nz, b.compare(row, spare, CompareDirection::LT));
  Value index = b.reshape(b.select(keep, row, spare), {n, 1});
  Value rows = b.scatter_slices(base, 0, index, coordinates(b, x.shape(), n), hlo::overwrite);
  return {b.convert(b.slice(rows, {0, 0}, {size, rank}, {1, 1}), out.dtype)};
}

// hash_tensor(self, dim, *, keepdim, mode): mode 0 xors the elements over
// `dim` (empty: every dim) after widening each to 64 bits (floats to double,
// integers and bool to int64) and reading the bits as uint64.
std::vector<Value> hash_tensor(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType out = ctx.out_types.at(0);
  const Value& x = ctx.tensor(0);
  if (ctx.int_arg(3, 0) != 0) throw std::invalid_argument("hash_tensor: only mode=0 (xor_sum) is supported");
  if (out.numel() == 0) return {b.splat(0, out)};
  const ElementType wide = hlo::is_float(x.dtype()) ? ElementType::F64 : ElementType::S64;
  if (hlo::is_complex(x.dtype())) throw NotImplementedForDtype("\"hash_tensor\" not implemented for 'ComplexFloat'");
  Value bits = b.bitcast_convert(b.convert(x, wide), {ElementType::U64, x.shape()});
  std::vector<int64_t> dims;
  if (ctx.has(1)) for (int64_t d : ctx.ints(1)) dims.push_back(wrap_dim(d, x.rank()));
  if (dims.empty()) for (int64_t d = 0; d < x.rank(); ++d) dims.push_back(d);
  if (x.rank() == 0) dims.clear();  // a 0-d tensor has nothing to reduce
  Value h = dims.empty() ? bits : b.reduce(bits, b.constant_int(0, ElementType::U64), dims, "xor");
  return {b.reshape(h, out.shape)};
}

}  // namespace torch_tpu::lower
