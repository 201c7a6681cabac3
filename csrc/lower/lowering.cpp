#include "lower/lowering.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace torch_tpu::lower {

const Value& LowerContext::tensor(size_t i) const {
  if (i >= args.size() || !args[i].tensor)
    throw std::invalid_argument("lowering: argument " + std::to_string(i) + " is not a tensor");
  return *args[i].tensor;
}

int64_t LowerContext::int_arg(size_t i, int64_t fallback) const {
  if (!has(i)) return fallback;
  const Arg& a = args[i];
  if (a.kind == Arg::Kind::Scalar)
    return a.scalar.kind == ScalarArg::Kind::Float ? static_cast<int64_t>(a.scalar.f) : a.scalar.i;
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

namespace {

// The C++ type c10's overflow message names (its scalar type macros' spelling).
const char* cpp_type_name(ElementType t) {
  switch (t) {
    case ElementType::Pred:
      return "bool";
    case ElementType::S8:
      return "int8_t";
    case ElementType::S16:
      return "int16_t";
    case ElementType::S32:
      return "int";
    case ElementType::S64:
      return "int64_t";
    case ElementType::U8:
      return "uint8_t";
    case ElementType::U16:
      return "uint16_t";
    case ElementType::U32:
      return "uint32_t";
    case ElementType::U64:
      return "uint64_t";
    case ElementType::F16:
      return "c10::Half";
    case ElementType::BF16:
      return "c10::BFloat16";
    case ElementType::F32:
      return "float";
    case ElementType::F64:
      return "double";
    case ElementType::C64:
      return "c10::complex<float>";
    case ElementType::C128:
      return "c10::complex<double>";
  }
  return "?";
}

// The largest finite value of a floating dtype (of a complex dtype's parts).
double float_max(ElementType t) {
  switch (t) {
    case ElementType::C128:
    case ElementType::F16:
      return 65504.0;
    case ElementType::BF16:
      return std::ldexp(255.0, 120);
    case ElementType::F64:
      return std::numeric_limits<double>::max();
    default:
      return std::numeric_limits<float>::max();
  }
}

int64_t integer_lowest(ElementType t) {
  const int bits = static_cast<int>(8 * hlo::byte_size(t));
  return hlo::is_unsigned(t) ? 0 : (bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)));
}

uint64_t integer_max(ElementType t) {
  const int bits = static_cast<int>(8 * hlo::byte_size(t)) - (hlo::is_unsigned(t) ? 0 : 1);
  return bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
}

FloatIntoIntegerOverflows float_into_integer_overflows = nullptr;  // the device layer's torch's rule

// c10::overflows<To, double>: comparisons in double, so NaN fails only the
// dtypes without it.
bool double_overflows(double v, ElementType t) {
  if (hlo::is_float(t) || hlo::is_complex(t)) return std::isfinite(v) && std::abs(v) > float_max(t);
  if (float_into_integer_overflows) return float_into_integer_overflows(v, t);
  return std::isnan(v) || v < static_cast<double>(integer_lowest(t)) || v > static_cast<double>(integer_max(t));
}

// The bits of `s` in an integer dtype, as a C++ cast makes them: a float is
// truncated (one past int64, inf or NaN becomes int64's lowest, as x86
// converts it), then the low bits are kept (1000 in int8 is -24, -1 in
// uint8 is 255).
int64_t integer_bits(const ScalarArg& s, ElementType dtype) {
  int64_t v = s.i;
  if (s.kind == ScalarArg::Kind::Float || s.kind == ScalarArg::Kind::Complex) {
    constexpr double k2to63 = 9223372036854775808.0;
    if (s.f >= -k2to63 && s.f < k2to63) {
      v = static_cast<int64_t>(s.f);
    } else if (hlo::is_unsigned(dtype) && s.f >= k2to63 && s.f < 2 * k2to63) {
      v = static_cast<int64_t>(static_cast<uint64_t>(s.f));
    } else {
      v = std::numeric_limits<int64_t>::min();
    }
  }
  const int bits = static_cast<int>(8 * hlo::byte_size(dtype));
  if (bits == 64) return v;
  const uint64_t low = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  const bool negative = !hlo::is_unsigned(dtype) && (low >> (bits - 1)) != 0;
  return negative ? static_cast<int64_t>(low) - (int64_t{1} << bits) : static_cast<int64_t>(low);
}

}  // namespace

bool scalar_overflows(const ScalarArg& s, ElementType dtype) {
  if (dtype == ElementType::Pred || s.kind == ScalarArg::Kind::Bool) return false;
  switch (s.kind) {
    case ScalarArg::Kind::Float:
      return double_overflows(s.f, dtype);
    case ScalarArg::Kind::Complex:
      if (!hlo::is_complex(dtype) && s.imag != 0) return true;
      return double_overflows(s.f, dtype) || double_overflows(s.imag, dtype);
    case ScalarArg::Kind::UInt:
      if (!hlo::is_integer(dtype)) return double_overflows(s.as_double(), dtype);
      return static_cast<uint64_t>(s.i) > integer_max(dtype);
    default:  // Int
      if (!hlo::is_integer(dtype)) return double_overflows(s.as_double(), dtype);
      if (s.i > 0) return static_cast<uint64_t>(s.i) > integer_max(dtype);
      // Unsigned dtypes take negative numbers as two's complement wraps.
      if (hlo::is_unsigned(dtype)) return -static_cast<uint64_t>(s.i) > integer_max(dtype);
      return s.i < integer_lowest(dtype);
  }
}

void set_float_into_integer_overflows(FloatIntoIntegerOverflows rule) { float_into_integer_overflows = rule; }

namespace {
bool (*ask_half_linspace_rounds_once)() = nullptr;
}  // namespace

void set_half_linspace_rounds_once(bool (*ask_torch)()) { ask_half_linspace_rounds_once = ask_torch; }

bool half_linspace_rounds_once() { return ask_half_linspace_rounds_once && ask_half_linspace_rounds_once(); }

void check_scalar_fits(const ScalarArg& s, ElementType dtype) {
  if (scalar_overflows(s, dtype)) {
    throw ScalarOverflow(std::string("value cannot be converted to type ") + cpp_type_name(dtype) +
                         " without overflow");
  }
}

Value LowerContext::scalar(const ScalarArg& s, ElementType dtype) {
  check_scalar_fits(s, dtype);
  return scalar_value(s, dtype, /*range_checked=*/true);
}

Value LowerContext::cast_scalar(const ScalarArg& s, ElementType dtype) {
  return scalar_value(s, dtype, /*range_checked=*/false);
}

Value LowerContext::fill_scalar(const ScalarArg& s, const TensorType& type) {
  const bool unchecked = type.numel() == 1 && (type.dtype == ElementType::F16 || type.dtype == ElementType::BF16);
  return unchecked ? cast_scalar(s, type.dtype) : scalar(s, type.dtype);
}

Value LowerContext::scalar_value(const ScalarArg& s, ElementType dtype, bool range_checked) {
  if (s.kind == ScalarArg::Kind::Complex || hlo::is_complex(dtype)) {
    // complex from its parts (a real number has no imaginary part), kept
    // in the program text: complex scalars are rare enough not to matter
    // for recompiles. A complex number reaching a real dtype (PyTorch's meta
    // kernels refuse that first) keeps its real part.
    if (!hlo::is_complex(dtype)) return b.constant(s.as_double(), dtype);
    const double im = s.kind == ScalarArg::Kind::Complex ? s.imag : 0.0;
    const ElementType part = hlo::complex_part_type(dtype);
    return b.op("complex", {b.constant(s.as_double(), part), b.constant(im, part)}, {dtype, {}});
  }
  if (dtype == ElementType::Pred) return b.constant(s.as_double(), dtype);  // != 0, NaN included
  if (hlo::is_integer(dtype)) return b.constant_int(integer_bits(s, dtype), dtype);
  if (s.kind != ScalarArg::Kind::Float) {
    // An integer past float16's range rounds to inf, as a cast does; float32
    // holds every integer up to there exactly.
    if (double_overflows(s.as_double(), dtype)) return b.convert(b.constant(s.as_double(), ElementType::F32), dtype);
    return b.constant(s.as_double(), dtype);
  }
  const double v = s.f;
  // Values that are part of an op's meaning stay constants (like TorchTPU:
  // 0, 1, -1); everything else is an input so that changing it (a learning
  // rate, a step count) reuses the compiled program. Its upload rounds it to
  // `dtype` as a cast does.
  if (v == 0.0 || v == 1.0 || v == -1.0 || !std::isfinite(v)) return b.constant(v, dtype);
  // One input per distinct value: a _foreach_ op over 100 tensors reads its
  // lr once, not 100 times.
  auto note_origin = [&](HostScalar& hs) {
    if (s.origin >= 0) {
      hs.origins.push_back(s.origin);
    } else {
      hs.fixed = true;
    }
    hs.range_checked = hs.range_checked || range_checked;
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

void LowerContext::assert_all(const Value& ok, const std::string& message) {
  if (ok.type.numel() == 0) return;
  range_checks_.push_back({all_true(b, ok), message, /*runtime_error=*/true, /*assertion=*/true});
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
    if (hlo::is_unsigned(dtype))
      return b.constant_int(dtype == ElementType::U64 ? -1 : (int64_t{1} << (hlo::byte_size(dtype) * 8)) - 1, dtype);
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
