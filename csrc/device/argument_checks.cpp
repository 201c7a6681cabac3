#include "device/argument_checks.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/overflows.h>

#include "device/storage_buffer.h"
#include "lower/lowering.h"

namespace torch_tpu::device {

namespace {

// ---- every op: what a written tensor may overlap ----------------------------------
// TensorIterator's rules on CPU and CUDA (the Python meta kernels PyTorch
// registers for add_, fill_ ... do not check them).
void check_write_overlap(WriteOverlap rule, const c10::FunctionSchema& schema, const Args& args) {
  std::vector<at::Tensor> inputs;  // tensors the op reads
  for (size_t i = 0; i < args.size(); ++i) {
    if (!(writes_argument(schema.arguments()[i]) && schema.arguments()[i].is_out())) collect_tensors(args[i], inputs);
  }
  // Ops whose CPU kernels refuse an out= that aliases an input even exactly.
  const bool no_alias_at_all = rule == WriteOverlap::Disjoint;
  // fill_ with a number, zero_ and masked_fill_ write one value wherever they
  // write, so CPU and CUDA let them write an expanded tensor (masked_fill_
  // with a deprecation warning).
  const bool writes_one_value = rule == WriteOverlap::OneValue;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!writes_argument(schema.arguments()[i]) || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    TORCH_CHECK(writes_one_value || at::has_internal_overlap(t) != at::MemOverlap::Yes,
                "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location. Please clone() the tensor before performing the operation.");
    // TensorIterator's rule: a written tensor may be an input exactly
    // (x.add_(y), add(x, y, out=x)) but may not overlap one partially.
    if (rule == WriteOverlap::InputsCopiedFirst) continue;
    for (const at::Tensor& in : inputs) {
      if (!in.defined() || !is_tpu(in)) continue;
      if (no_alias_at_all && schema.arguments()[i].is_out()) {
        at::assert_no_overlap(t, in);
      } else if (!in.is_same(t)) {
        at::assert_no_partial_overlap(t, in);
      }
    }
  }
}

// ---- mistakes whose exception the installed torch decides ---------------------------
// Some exception types and words changed between torch releases (2.15 raises
// TypeError for sort of complex numbers where 2.13 raised RuntimeError, and
// prefixes mm's shape errors with the op's name). For those the installed
// torch's CPU kernel of the same overload is asked: it runs on stand-ins of
// the arguments (their dtypes and shapes, no data: zeros expanded, a fresh
// tensor where the op writes) and raises that torch's own error. It returns
// where that kernel takes the arguments, and the caller raises its own.

at::Tensor cpu_stand_in(const at::Tensor& t, bool written, bool out) {
  if (!t.defined()) return t;
  const at::TensorOptions options(t.scalar_type());
  if (out) return at::empty({0}, options);  // resized by the kernel
  return written ? at::empty(t.sizes(), options) : at::zeros({}, options).expand(t.sizes());
}

}  // namespace

void raise_cpus_error(const c10::FunctionSchema& schema, const Args& args) {
  torch::jit::Stack stack;
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    const c10::IValue& v = args[i];
    const bool written = writes_argument(schema.arguments()[i]), out = written && schema.arguments()[i].is_out();
    if (v.isTensor()) {
      stack.emplace_back(cpu_stand_in(v.toTensor(), written, out));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorVector()) list.push_back(cpu_stand_in(t, written, out));
      stack.emplace_back(list);
    } else if ((v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) || v.isGenerator()) {
      return;  // optional tensors (indices) and generators: no op here asks
    } else {
      stack.push_back(v);
    }
  }
  c10::Dispatcher::singleton()
      .findSchemaOrThrow(schema.name().c_str(), schema.overload_name().c_str())
      .callBoxed(stack);
}

const at::Tensor* tensor_at(const Args& args, size_t i) {
  return i < args.size() && args[i].isTensor() && args[i].toTensor().defined() ? &args[i].toTensor() : nullptr;
}

// Ops with no order on (or no sign of) complex numbers that PyTorch's meta
// kernels let through, with the installed torch's CPU exception type and
// words (max.dim's is TypeError from 2.15). Where CPU's own kernel does not
// raise on the stand-ins, the words its row's check names: sign's, max's and
// min's, or every other op's "<op>_cpu" gap.
int complex_operand(const Args& args) {
  for (size_t i = 0; i < 2 && i < args.size(); ++i) {
    const bool complex = args[i].isTensor() ? args[i].toTensor().defined() && args[i].toTensor().is_complex()
                                            : args[i].isScalar() && args[i].toScalar().isComplex();
    if (complex) return static_cast<int>(i);
  }
  return -1;
}

void check_not_complex(const c10::FunctionSchema& schema, const Args& args) {
  const int i = complex_operand(args);
  if (i < 0) return;
  raise_cpus_error(schema, args);
  const at::ScalarType t = args[i].isTensor() ? args[i].toTensor().scalar_type() : at::kComplexDouble;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", schema.name().substr(6), "_cpu\" not implemented for '", t, "'");
}

// Dtype gaps (OpSpec::dtype_gap): which first-argument dtypes have a kernel.
bool floating(at::ScalarType t) { return at::isFloatingType(t); }
bool floating_or_complex(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }
bool not_bool(at::ScalarType t) { return t != at::kBool; }
// AT_DISPATCH_ALL_TYPES_AND2(kHalf, kBFloat16): no bool, no uint16-64, no
// float8, no complex.
bool all_types_and_half(at::ScalarType t) {
  switch (t) {
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
      return true;
    default:
      return false;
  }
}
bool all_types_complex_and_half(at::ScalarType t) {
  return all_types_and_half(t) || t == at::kComplexFloat || t == at::kComplexDouble;
}

// ---- what lower/ computes as this torch does (lowering.h) ---------------------------
namespace {

bool c10_float_into_integer_overflows(double v, lower::ElementType t) {
  switch (t) {
    case lower::ElementType::S8:
      return c10::overflows<int8_t, double>(v);
    case lower::ElementType::S16:
      return c10::overflows<int16_t, double>(v);
    case lower::ElementType::S32:
      return c10::overflows<int32_t, double>(v);
    case lower::ElementType::S64:
      return c10::overflows<int64_t, double>(v);
    case lower::ElementType::U8:
      return c10::overflows<uint8_t, double>(v);
    case lower::ElementType::U16:
      return c10::overflows<uint16_t, double>(v);
    case lower::ElementType::U32:
      return c10::overflows<uint32_t, double>(v);
    case lower::ElementType::U64:
      return c10::overflows<uint64_t, double>(v);
    default:
      return false;
  }
}

// Asked once, on the first such linspace: whether this torch's CPU kernel
// gives a bfloat16 linspace rounded once from float32.
bool cpu_half_linspace_rounds_once() {
  static const bool once = at::linspace(0, 1, 100, at::TensorOptions(at::kBFloat16))
                               .equal(at::linspace(0, 1, 100, at::TensorOptions(at::kFloat)).to(at::kBFloat16));
  return once;
}

[[maybe_unused]] const bool torch_rules_installed = [] {
  lower::set_float_into_integer_overflows(c10_float_into_integer_overflows);
  lower::set_half_linspace_rounds_once(cpu_half_linspace_rounds_once);
  return true;
}();

}  // namespace

namespace {

// Whether every number of dtype `from` converts to `to` under c10's checked
// conversion (c10::checked_convert). Conservative: false where unsure.
bool always_fits(at::ScalarType from, at::ScalarType to) {
  if (from == to || from == at::kBool) return true;
  if (to == at::kBool || at::isFloat8Type(from) || at::isFloat8Type(to) || at::isBarebonesUnsignedType(from) ||
      at::isBarebonesUnsignedType(to)) {
    return false;  // promoteTypes refuses these; a read decides
  }
  // Integers promote to float16 without widening, yet 65,504 is its maximum.
  if (to == at::kHalf && at::isIntegralType(from, /*includeBool=*/false)) {
    return from == at::kByte || from == at::kChar || from == at::kShort;
  }
  return at::promoteTypes(from, to) == to;
}

}  // namespace

c10::Scalar converted_value(const c10::Scalar& number, at::ScalarType dtype) {
  c10::Scalar converted;
  AT_DISPATCH_V2(dtype, "converted_value", AT_WRAP([&] { converted = c10::Scalar(number.to<scalar_t>()); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, at::kComplexHalf,
                 AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), AT_EXPAND(AT_FLOAT8_TYPES));
  return converted;
}

void check_value_fits(const at::Tensor& value, at::ScalarType dtype) {
  if (always_fits(value.scalar_type(), dtype)) return;
  (void)converted_value(value.item(), dtype);
}

void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  } else if (v.isList()) {
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      if (list.get(i).isTensor()) out.push_back(list.get(i).toTensor());
    }
  }
}

bool writes_argument(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

namespace {

void check_dtype_gap(const DtypeGap& gap, const c10::FunctionSchema& schema, const Args& args) {
  if (!gap.kernel) return;
  const at::Tensor* self = nullptr;
  if (!gap.of_out) {
    self = tensor_at(args, 0);
  } else {
    for (size_t i = 0; i < schema.arguments().size() && i < args.size() && !self; ++i) {
      if (writes_argument(schema.arguments()[i])) self = tensor_at(args, i);
    }
  }
  const bool passes = gap.empty_passes && self && self->numel() == 0;
  if (self && !passes && !gap.supported(self->scalar_type())) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", gap.kernel, "\" not implemented for '", self->scalar_type(), "'");
  }
}

}  // namespace

void check_arguments(const OpSpec& spec, const c10::FunctionSchema& schema, const Args& args) {
  using When = DtypeGap::When;
  check_write_overlap(spec.write_overlap, schema, args);
  if (spec.dtype_gap.when == When::BeforeChecks) check_dtype_gap(spec.dtype_gap, schema, args);
  for (ArgCheck check : spec.checks) {
    if (check) check(schema, args);
  }
  if (spec.dtype_gap.when == When::AfterChecks) check_dtype_gap(spec.dtype_gap, schema, args);
}

void check_arguments_after_meta(const OpSpec& spec, const c10::FunctionSchema& schema, const Args& args) {
  if (spec.dtype_gap.when == DtypeGap::When::AfterMeta) check_dtype_gap(spec.dtype_gap, schema, args);
}

void check_arguments_after_meta_refusal(const OpSpec& spec, const c10::FunctionSchema& schema, const Args& args,
                                        const std::string& message) {
  if (spec.dtype_gap.when != DtypeGap::When::AfterMeta) return;
  if (message.find("not implemented for") == std::string::npos) return;
  // PyTorch's Python meta kernels refuse the dtype before their shape
  // checks (avg_pool2d's of uint8), where CPU's structured meta function
  // checks the shapes first: its kernel decides which error comes first.
  raise_cpus_error(schema, args);
  check_dtype_gap(spec.dtype_gap, schema, args);
}

}  // namespace torch_tpu::device
