// Reductions: sum/mean/prod, all/any, amax/amin, max/min (with indices),
// argmax/argmin, var/std and var_mean/std_mean, norms, logsumexp,
// softmax/log_softmax and their backward formulas, cumsum.
// Result shapes and dtypes are PyTorch's (ctx.out_types): a lowering reduces
// over the dims it was given and reshapes to the result shape, which is how
// keepdim is honoured. Low-precision floats accumulate in float32, as
// PyTorch's CPU and CUDA kernels do (at::acc_type).
#include "lower/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "lower/common/reduction.h"
#include "lower/common/result_types.h"

namespace torch_tpu::lower {

namespace {

using hlo::CompareDirection;

// Value and index of the first max (or min) along `dims` (a single dim, or
// every dim of a flattened input). NaN counts as larger (and smaller) than
// everything, so the first NaN wins, as in PyTorch.
std::vector<Value> arg_reduce(Builder& b, const Value& x, int64_t dim, bool is_max) {
  const ElementType t = x.dtype();
  Value index = b.iota({ElementType::S64, x.shape()}, dim);
  Value init_v = reduce_init(b, is_max ? "maximum" : "minimum", t);
  // Ties with the init keep the element: the init's index is the largest.
  Value init_i = b.constant_int(std::numeric_limits<int64_t>::max(), ElementType::S64);
  auto body = [&](Builder& rb, const std::vector<Value>& a) {
    const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
    Value better = rb.compare(av, bv, is_max ? CompareDirection::GT : CompareDirection::LT);
    Value equal = rb.compare(av, bv, CompareDirection::EQ);
    if (hlo::is_float(t)) {
      Value an = is_nan(rb, av), bn = is_nan(rb, bv);
      better = rb.binary("or", better, rb.binary("and", an, rb.unary("not", bn)));
      equal = rb.binary("or", equal, rb.binary("and", an, bn));
    }
    Value first = rb.compare(ai, bi, CompareDirection::LT);
    Value pick_a = rb.binary("or", better, rb.binary("and", equal, first));
    return std::vector<Value>{rb.select(pick_a, av, bv), rb.select(pick_a, ai, bi)};
  };
  return b.reduce({x, index}, {init_v, init_i}, {dim}, body);
}

// argmax/argmin(self, dim?, keepdim): dim None flattens.
std::vector<Value> arg_index(LowerContext& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  TensorType out = out_type(ctx);
  int64_t dim = 0;
  if (!ctx.has(1) || x.rank() == 0) {
    x = b.reshape(x, {x.type.numel()});
  } else {
    dim = wrap_dim(ctx.int_arg(1), x.rank());
  }
  return {b.reshape(arg_reduce(b, x, dim, is_max)[1], out.shape)};
}

// max.dim / min.dim (self, dim, keepdim) -> (values, indices).
std::vector<Value> value_and_index(LowerContext& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (x.rank() == 0) x = b.reshape(x, {1});
  const int64_t dim = wrap_dim(ctx.int_arg(1), x.rank());
  // PyTorch's meta kernel does not check this; its CPU kernel raises IndexError.
  if (x.shape()[dim] == 0) {
    throw std::out_of_range(std::string(is_max ? "max" : "min") + "(): Expected reduction dim " + std::to_string(dim) +
                            " to have non-zero size.");
  }
  std::vector<Value> r = arg_reduce(b, x, dim, is_max);
  return {b.reshape(r[0], ctx.out_types.at(0).shape), b.reshape(r[1], ctx.out_types.at(1).shape)};
}

// amax/amin(self, dim[], keepdim) and max()/min() of everything.
std::vector<Value> extreme(LowerContext& ctx, bool is_max, bool has_dims) {
  Value x = ctx.tensor(0);
  // max()/min() of nothing: PyTorch's meta kernel does not check, CPU raises.
  if (!has_dims && x.type.numel() == 0) {
    throw std::runtime_error(std::string(is_max ? "max" : "min") +
                             "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                             "reduction dim with the 'dim' argument.");
  }
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank(), has_dims);
  return {ctx.b.reshape(nan_max_min(ctx.b, x, dims, is_max), out_type(ctx).shape)};
}

// all/any: overloads with three or more arguments carry a dim (int or int[]?).
std::vector<Value> logical_reduce(LowerContext& ctx, const char* combiner) {
  Builder& b = ctx.b;
  Value x = b.convert(ctx.tensor(0), ElementType::Pred);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank(), ctx.args.size() >= 3, false);
  TensorType out = out_type(ctx);
  return {b.reshape(b.convert(reduce_with(b, x, dims, combiner), out.dtype), out.shape)};
}

// (variance, mean) of the input over the dims argument, in the accumulation
// type of the first result; a complex input stays complex (its variance is
// real, its deviations are not). The divisor is max(N - correction, 0),
// correction None meaning 1 (Bessel). Two-pass, exact enough in the
// accumulation type (PyTorch uses Welford).
std::pair<Value, Value> variance_and_mean(LowerContext& ctx) {
  Builder& b = ctx.b;
  const ElementType acc = accumulation_type(out_type(ctx).dtype);
  const ElementType in = ctx.tensor(0).dtype();
  Value x = b.convert(ctx.tensor(0), hlo::is_complex(in) ? in : acc);  // never a complex input's real part alone
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank());
  const double n = static_cast<double>(reduced_count(x, dims));
  const double correction = ctx.has(2) ? ctx.double_arg(2) : 1.0;
  Value s = reduce_with(b, x, dims, "add");
  Value mean = b.binary("divide", s, b.splat(n, s.type));
  Value d = b.binary("subtract", x, expand_back(b, mean, x, dims));
  Value ss = reduce_with(b, squared_magnitude(b, d), dims, "add");
  return {b.binary("divide", ss, b.splat(std::max(n - correction, 0.0), ss.type)), mean};
}

// var/std(self, dim?, *, correction?, keepdim), and with `with_mean`
// var_mean/std_mean, whose second result is the mean.
std::vector<Value> moments(LowerContext& ctx, bool sqrt_of_var, bool with_mean) {
  Builder& b = ctx.b;
  auto [var, mean] = variance_and_mean(ctx);
  if (sqrt_of_var) var = b.unary("sqrt", var);
  const TensorType& t0 = ctx.out_types.at(0);
  std::vector<Value> results{b.reshape(b.convert(var, t0.dtype), t0.shape)};
  if (with_mean) {
    const TensorType& t1 = ctx.out_types.at(1);
    results.push_back(b.reshape(b.convert(mean, t1.dtype), t1.shape));
  }
  return results;
}

// x - max(x) along `dim`, where an infinite max is replaced by 0 so that a
// slice of all -inf gives exp() == 0 rather than NaN (PyTorch's logsumexp).
// A complex x shifts by the max of its real parts, as PyTorch's logsumexp.
Value shifted(Builder& b, const Value& x, const std::vector<int64_t>& dims, Value* shift) {
  Value m =
      hlo::is_complex(x.dtype()) ? reduce_with(b, b.real(x), dims, "maximum") : reduce_with(b, x, dims, "maximum");
  Value inf = b.splat(std::numeric_limits<double>::infinity(), m.type);
  Value finite = b.compare(b.unary("abs", m), inf, CompareDirection::NE);
  m = b.convert(b.select(finite, m, b.splat(0, m.type)), x.dtype());
  if (shift) *shift = m;
  return b.binary("subtract", x, expand_back(b, m, x, dims));
}

// Softmax pieces along one dim of `x` (already in the compute type).
struct SoftmaxParts {
  Value shifted;  // x - max
  Value sum_exp;  // sum(exp(x - max)), broadcast back over x
};

SoftmaxParts softmax_parts(Builder& b, const Value& x, int64_t dim) {
  std::vector<int64_t> dims;
  if (x.rank() > 0) dims.push_back(wrap_dim(dim, x.rank()));
  // Unlike logsumexp, softmax keeps the raw max: a slice of all -inf is NaN
  // in PyTorch too.
  Value m = reduce_with(b, x, dims, "maximum");
  Value s = b.binary("subtract", x, expand_back(b, m, x, dims));
  Value e = reduce_with(b, b.unary("exponential", s), dims, "add");
  return {s, expand_back(b, e, x, dims)};
}

// The type softmax math runs in: the result's accumulation type.
Value softmax_input(LowerContext& ctx, size_t i) {
  return ctx.b.convert(ctx.tensor(i), accumulation_type(out_type(ctx).dtype));
}

int64_t softmax_dim(LowerContext& ctx, size_t i, const Value& x) {
  return x.rank() == 0 ? 0 : wrap_dim(ctx.int_arg(i), x.rank());
}

std::vector<int64_t> one_dim(const Value& x, int64_t dim) {
  return x.rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim};
}

}  // namespace

// ---- sum, mean, prod ----------------------------------------------------------
// sum(self, dtype) / sum.dim_IntList(self, dim?, keepdim, dtype): only the
// latter (four or more arguments) has dims; its arg 1 is never a dtype.
std::vector<Value> sum(LowerContext& ctx) {
  Value x = ctx.tensor(0);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank(), ctx.args.size() >= 4);
  return {sum_to(ctx.b, x, dims, out_type(ctx))};
}

std::vector<Value> mean(LowerContext& ctx) {  // mean(self, dtype) / mean.dim(self, dim?, keepdim, dtype)
  Builder& b = ctx.b;
  TensorType out = out_type(ctx);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank(), ctx.args.size() >= 4);
  Value s = reduce_with(b, x, dims, "add");
  Value m = b.binary("divide", s, b.splat(static_cast<double>(reduced_count(x, dims)), s.type));
  return {b.reshape(b.convert(m, out.dtype), out.shape)};
}

std::vector<Value> prod(LowerContext& ctx) {  // prod(self, dtype) / prod.dim_int(self, dim, keepdim, dtype)
  Builder& b = ctx.b;
  TensorType out = out_type(ctx);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank(), ctx.args.size() >= 4);
  Value p = reduce_with(b, x, dims, acc == ElementType::Pred ? "and" : "multiply");
  return {b.reshape(b.convert(p, out.dtype), out.shape)};
}

// ---- logical --------------------------------------------------------------------
std::vector<Value> all(LowerContext& ctx) { return logical_reduce(ctx, "and"); }
std::vector<Value> any(LowerContext& ctx) { return logical_reduce(ctx, "or"); }

// _assert_async(self) / _assert_async.msg(self, assert_msg): the one value
// must be nonzero. CUDA's kernel checks it on the device without waiting;
// here the check is a program output that raises at the next
// synchronization, as an out-of-range index does, with CPU's messages.
// (The element count is checked at the call: argument_checks.cpp.)
std::vector<Value> assert_async(LowerContext& ctx) {
  std::string message = "Expected Tensor with single nonzero value, but got zero";
  if (ctx.args.size() >= 2 && ctx.args[1].kind == Arg::Kind::String) {
    message = ctx.args[1].s.empty() ? "Assertion is failed" : ctx.args[1].s;
  }
  ctx.assert_all(ctx.b.convert(ctx.tensor(0), ElementType::Pred), message);
  return {};
}

// ---- extremes -------------------------------------------------------------------
std::vector<Value> amax(LowerContext& ctx) { return extreme(ctx, true, true); }
std::vector<Value> amin(LowerContext& ctx) { return extreme(ctx, false, true); }
std::vector<Value> max_all(LowerContext& ctx) { return extreme(ctx, true, false); }
std::vector<Value> min_all(LowerContext& ctx) { return extreme(ctx, false, false); }
std::vector<Value> max_dim(LowerContext& ctx) { return value_and_index(ctx, true); }
std::vector<Value> min_dim(LowerContext& ctx) { return value_and_index(ctx, false); }
std::vector<Value> argmax(LowerContext& ctx) { return arg_index(ctx, true); }
std::vector<Value> argmin(LowerContext& ctx) { return arg_index(ctx, false); }

// ---- statistics -----------------------------------------------------------------
// var.correction / std.correction and var_mean.correction /
// std_mean.correction (self, dim?, *, correction?, keepdim)
std::vector<Value> var(LowerContext& ctx) { return moments(ctx, false, false); }
std::vector<Value> std(LowerContext& ctx) { return moments(ctx, true, false); }
std::vector<Value> var_mean(LowerContext& ctx) { return moments(ctx, false, true); }
std::vector<Value> std_mean(LowerContext& ctx) { return moments(ctx, true, true); }

// linalg_vector_norm(self, ord, dim?, keepdim, *, dtype?): the input is first
// converted to the result dtype (PyTorch converts to `dtype` when given).
std::vector<Value> linalg_vector_norm(LowerContext& ctx) {
  Builder& b = ctx.b;
  TensorType out = out_type(ctx);
  const ElementType acc = accumulation_type(out.dtype);
  // A complex input's norm is the norm of its magnitudes (the result is real).
  const Value& in = ctx.tensor(0);
  Value magnitude = hlo::is_complex(in.dtype()) ? b.unary("abs", in) : in;
  Value x = b.convert(b.convert(magnitude, out.dtype), acc);
  std::vector<int64_t> dims = reduction_dims(ctx, 2, x.rank());
  Value r = vector_norm(b, x, dims, ctx.has(1) ? ctx.double_arg(1) : 2.0);
  return {b.reshape(b.convert(r, out.dtype), out.shape)};
}

// logsumexp(self, dim[], keepdim): max-shifted; an all -inf slice gives -inf.
std::vector<Value> logsumexp(LowerContext& ctx) {
  Builder& b = ctx.b;
  TensorType out = out_type(ctx);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  std::vector<int64_t> dims = reduction_dims(ctx, 1, x.rank());
  Value m;
  Value s = shifted(b, x, dims, &m);
  Value r = b.binary("add", b.unary("log", reduce_with(b, b.unary("exponential", s), dims, "add")), m);
  return {b.reshape(b.convert(r, out.dtype), out.shape)};
}

// ---- softmax ----------------------------------------------------------------------
// _softmax(self, dim, half_to_float): the result type (float32 when
// half_to_float) is out_types'; the math runs in its accumulation type.
std::vector<Value> softmax(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value x = softmax_input(ctx, 0);
  SoftmaxParts p = softmax_parts(b, x, softmax_dim(ctx, 1, x));
  return {b.convert(b.binary("divide", b.unary("exponential", p.shifted), p.sum_exp), out_type(ctx).dtype)};
}

std::vector<Value> log_softmax(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value x = softmax_input(ctx, 0);
  SoftmaxParts p = softmax_parts(b, x, softmax_dim(ctx, 1, x));
  return {b.convert(b.binary("subtract", p.shifted, b.unary("log", p.sum_exp)), out_type(ctx).dtype)};
}

// _softmax_backward_data(grad_output, output, dim, input_dtype):
// grad_input = y * (g - sum(g * y, dim)).
std::vector<Value> softmax_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = softmax_input(ctx, 0), y = softmax_input(ctx, 1);
  std::vector<int64_t> dims = one_dim(y, softmax_dim(ctx, 2, y));
  Value gy = b.binary("multiply", g, y);
  Value s = expand_back(b, reduce_with(b, gy, dims, "add"), y, dims);
  return {b.convert(b.binary("subtract", gy, b.binary("multiply", y, s)), out_type(ctx).dtype)};
}

// _log_softmax_backward_data(grad_output, output, dim, input_dtype):
// grad_input = g - exp(y) * sum(g, dim).
std::vector<Value> log_softmax_backward(LowerContext& ctx) {
  Builder& b = ctx.b;
  Value g = softmax_input(ctx, 0), y = softmax_input(ctx, 1);
  std::vector<int64_t> dims = one_dim(y, softmax_dim(ctx, 2, y));
  Value s = expand_back(b, reduce_with(b, g, dims, "add"), y, dims);
  return {b.convert(b.binary("subtract", g, b.binary("multiply", b.unary("exponential", y), s)), out_type(ctx).dtype)};
}

// ---- scans ------------------------------------------------------------------------
// cumsum(self, dim, *, dtype?): a window of the whole dim, padded below by
// size - 1, so output i sums inputs 0..i. Accumulates in the result's
// accumulation type (int and bool inputs arrive with an int64 result).
std::vector<Value> cumsum(LowerContext& ctx) {
  Builder& b = ctx.b;
  TensorType out = out_type(ctx);
  const ElementType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  if (x.rank() == 0 || x.type.numel() == 0) return {b.convert(x, out.dtype)};
  const int64_t dim = wrap_dim(ctx.int_arg(1), x.rank());
  const int64_t n = x.shape()[dim];
  hlo::Window window{std::vector<int64_t>(x.rank(), 1),
                     std::vector<int64_t>(x.rank(), 1),
                     {},
                     std::vector<int64_t>(x.rank(), 0),
                     std::vector<int64_t>(x.rank(), 0)};
  window.dimensions[dim] = n;
  window.pad_lo[dim] = n - 1;
  const std::string combiner = acc == ElementType::Pred ? "or" : "add";
  Value r = b.reduce_window(
      {x}, {reduce_init(b, combiner, acc)}, window,
      [&](Builder& rb, const std::vector<Value>& a) { return std::vector<Value>{rb.binary(combiner, a[0], a[1])}; })[0];
  return {b.convert(r, out.dtype)};
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
  if (ctx.has(1))
    for (int64_t d : ctx.ints(1)) dims.push_back(wrap_dim(d, x.rank()));
  if (dims.empty())
    for (int64_t d = 0; d < x.rank(); ++d) dims.push_back(d);
  if (x.rank() == 0) dims.clear();  // a 0-d tensor has nothing to reduce
  Value h = dims.empty() ? bits : b.reduce(bits, b.constant_int(0, ElementType::U64), dims, "xor");
  return {b.reshape(h, out.shape)};
}

}  // namespace torch_tpu::lower
