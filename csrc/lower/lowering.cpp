#include "lower/lowering.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace torch_tpu::lower {

const Value& LowerContext::tensor(size_t i) const {
  if (i >= args.size() || !args[i].tensor) throw std::invalid_argument("lowering: argument " + std::to_string(i) + " is not a tensor");
  return *args[i].tensor;
}

int64_t LowerContext::int_arg(size_t i, int64_t fallback) const {
  if (!has(i)) return fallback;
  const Arg& a = args[i];
  if (a.kind == Arg::Kind::Scalar) return a.scalar.kind == ScalarArg::Kind::Float ? static_cast<int64_t>(a.scalar.f) : a.scalar.i;
  if (a.kind == Arg::Kind::Bool) return a.b;
  return a.i;
}

double LowerContext::double_arg(size_t i, double fallback) const {
  if (!has(i)) return fallback;
  const Arg& a = args[i];
  if (a.kind == Arg::Kind::Scalar) return a.scalar.as_double();
  if (a.kind == Arg::Kind::Int) return static_cast<double>(a.i);
  return a.d;
}

bool LowerContext::bool_arg(size_t i, bool fallback) const {
  if (!has(i)) return fallback;
  return args[i].kind == Arg::Kind::Bool ? args[i].b : args[i].i != 0;
}

const std::vector<int64_t>& LowerContext::ints(size_t i) const {
  static const std::vector<int64_t> empty;
  if (!has(i)) return empty;
  return args[i].ints;
}

Value all_true(Builder& b, const Value& pred) {
  std::vector<int64_t> all_dims;
  for (int64_t d = 0; d < pred.rank(); ++d) all_dims.push_back(d);
  return all_dims.empty() ? pred : b.reduce(pred, b.constant(1, ElementType::Pred), all_dims, "and");
}

bool is_special_scalar(double v) {
  return !std::isfinite(v) || v == 0.0 || v == 1.0 || v == -1.0 || v == 2.0 || v == 3.0 || v == 0.5 || v == -0.5 ||
         v == -2.0;
}

Value LowerContext::scalar(const ScalarArg& s, ElementType dtype) {
  if (s.kind == ScalarArg::Kind::Complex || hlo::is_complex(dtype)) {
    // complex64 from its parts (a real number has no imaginary part), kept
    // in the program text: complex scalars are rare enough not to matter
    // for recompiles. A complex number reaching a real dtype (PyTorch's meta
    // kernels refuse that first) keeps its real part.
    if (!hlo::is_complex(dtype)) return b.constant(s.as_double(), dtype);
    const double im = s.kind == ScalarArg::Kind::Complex ? s.imag : 0.0;
    return b.op("complex", {b.constant(s.as_double(), ElementType::F32), b.constant(im, ElementType::F32)}, {dtype, {}});
  }
  if (s.kind != ScalarArg::Kind::Float) {
    if (hlo::is_integer(dtype) || dtype == ElementType::Pred) return b.constant_int(s.i, dtype);
    return b.constant(static_cast<double>(s.i), dtype);
  }
  const double v = s.f;
  // Values that are part of an op's meaning stay constants (like TorchTPU:
  // 0, 1, -1); everything else is an input so that changing it (a learning
  // rate, a step count) reuses the compiled program.
  if (v == 0.0 || v == 1.0 || v == -1.0 || !std::isfinite(v) || !hlo::is_float(dtype)) return b.constant(v, dtype);
  // One input per distinct value: a _foreach_ op over 100 tensors reads its
  // lr once, not 100 times.
  auto note_origin = [&](HostScalar& hs) {
    if (s.origin >= 0) {
      hs.origins.push_back(s.origin);
    } else {
      hs.fixed = true;
    }
  };
  for (size_t k = 0; k < host_scalars_.size(); ++k) {
    if (host_scalars_[k].is_float && host_scalars_[k].dtype == dtype && host_scalars_[k].f == v) {
      note_origin(host_scalars_[k]);
      return host_scalar_params_[k];
    }
  }
  Value p = b.parameter({dtype, {}});
  HostScalar hs;
  hs.dtype = dtype;
  hs.f = v;
  hs.is_float = true;
  note_origin(hs);
  host_scalars_.push_back(hs);
  host_scalar_params_.push_back(p);
  return p;
}

Value LowerContext::rng_state() {
  Value p = b.parameter({ElementType::U64, {2}});
  rng_params_.push_back(p);
  ++rng_requests_;
  return p;
}

void LowerContext::check_in_range(const Value& index, int64_t lo, int64_t hi, const std::string& message,
                                  bool runtime_error) {
  if (index.type.numel() == 0) return;
  Value idx = b.convert(index, ElementType::S64);
  Value ok = b.binary("and", b.compare(idx, b.splat(static_cast<double>(lo), idx.type), hlo::CompareDirection::GE),
                      b.compare(idx, b.splat(static_cast<double>(hi), idx.type), hlo::CompareDirection::LT));
  range_checks_.push_back({all_true(b, ok), message, runtime_error});
}

void LowerContext::check_all(const Value& ok, const std::string& message, bool runtime_error) {
  if (ok.type.numel() == 0) return;
  range_checks_.push_back({all_true(b, ok), message, runtime_error});
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  return dim < 0 ? dim + r : dim;
}

Value coerce(Builder& b, const Value& v, const TensorType& type) {
  Value c = b.convert(v, type.dtype);
  return b.broadcast_to(c, type.shape);
}

Value zeros(Builder& b, const TensorType& type) { return b.splat(0, type); }

Value full(Builder& b, double value, const TensorType& type) { return b.splat(value, type); }

Value reduce_init(Builder& b, const std::string& combiner, ElementType dtype) {
  const bool fl = hlo::is_float(dtype);
  if (combiner == "add" || combiner == "or") return b.constant(0, dtype);
  if (combiner == "multiply" || combiner == "and") return b.constant(1, dtype);
  if (combiner == "maximum") {
    if (fl) return b.constant(-std::numeric_limits<double>::infinity(), dtype);
    if (dtype == ElementType::Pred) return b.constant(0, dtype);
    if (hlo::is_unsigned(dtype)) return b.constant_int(0, dtype);
    return b.constant_int(dtype == ElementType::S64 ? std::numeric_limits<int64_t>::min()
                                                    : -(int64_t{1} << (hlo::byte_size(dtype) * 8 - 1)),
                          dtype);
  }
  if (combiner == "minimum") {
    if (fl) return b.constant(std::numeric_limits<double>::infinity(), dtype);
    if (dtype == ElementType::Pred) return b.constant(1, dtype);
    if (hlo::is_unsigned(dtype)) return b.constant_int(dtype == ElementType::U64 ? -1 : (int64_t{1} << (hlo::byte_size(dtype) * 8)) - 1, dtype);
    return b.constant_int(dtype == ElementType::S64 ? std::numeric_limits<int64_t>::max()
                                                    : (int64_t{1} << (hlo::byte_size(dtype) * 8 - 1)) - 1,
                          dtype);
  }
  throw std::invalid_argument("reduce_init: unknown combiner " + combiner);
}

Value is_nan(Builder& b, const Value& v) { return b.compare(v, v, hlo::CompareDirection::NE); }

ElementType accumulation_type(ElementType dtype) {
  return (dtype == ElementType::BF16 || dtype == ElementType::F16) ? ElementType::F32 : dtype;
}

Value at_matmul_precision(const LowerContext& ctx, const Value& operand) {
  if (ctx.matmul_precision != "DEFAULT" || operand.dtype() != ElementType::F32) return operand;
  return ctx.b.convert(operand, ElementType::BF16);
}

Float16InputPrecision::Float16InputPrecision(LowerContext& ctx, ElementType input)
    : ctx_(ctx), saved_(ctx.matmul_precision) {
  if (input == ElementType::F16 && ctx.matmul_precision == "DEFAULT") ctx.matmul_precision = "HIGH";
}

Float16InputPrecision::~Float16InputPrecision() { ctx_.matmul_precision = saved_; }

}  // namespace torch_tpu::lower
