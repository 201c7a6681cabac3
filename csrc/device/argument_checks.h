// Argument checks PyTorch's CPU and CUDA kernels make before they compute
// and its meta kernels skip (or make with another exception type). Every
// lowered op runs its row's checks first (csrc/device/op_spec.h), so bad
// input raises the exception a CUDA user would see, at the call that made it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>

#include <vector>

#include "device/op_spec.h"

namespace torch_tpu::device {

using Args = std::vector<c10::IValue>;

// The op's checks: what its written tensors may overlap, its dtype gap, then
// its row's checks.
void check_arguments(const OpSpec& spec, const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// The dtype gap of a row whose kernels dispatch after PyTorch's meta
// function (DtypeGap::When::AfterMeta): called once the meta kernel ran.
void check_arguments_after_meta(const OpSpec& spec, const c10::FunctionSchema& schema,
                                const std::vector<c10::IValue>& args);
// The same row's meta kernel raised `message`. A Python meta kernel that
// refuses a dtype by itself raises RuntimeError ("... not implemented for
// ..."), where CPU's kernel raises NotImplementedError: CPU's kernel raises
// its own error (a shape error it checks first, or its dtype's), else the
// dtype gap. Returns otherwise (the caller rethrows the meta kernel's error).
void check_arguments_after_meta_refusal(const OpSpec& spec, const c10::FunctionSchema& schema,
                                        const std::vector<c10::IValue>& args, const std::string& message);

// The tensors of an argument (a Tensor, Tensor[] or Tensor?[]).
void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out);

// Whether the schema marks the argument as written (in-place self, out=).
bool writes_argument(const c10::Argument& a);

void check_not_complex(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// For the checks in the rows' files (csrc/device/rows/):
// The installed torch's CPU kernel, called on stand-ins of the arguments
// (empty tensors of their dtypes and shapes), raising its own error.
void raise_cpus_error(const c10::FunctionSchema& schema, const Args& args);
// Runs `checks`; where they refuse the arguments, the installed torch's CPU
// kernel raises its own error first.
template <typename Checks>
void with_cpus_error(const c10::FunctionSchema& schema, const Args& args, Checks&& checks) {
  try {
    checks();
  } catch (const c10::Error&) {
    raise_cpus_error(schema, args);
    throw;
  }
}
// A one-element tensor given where CPU's and CUDA's kernels take a number
// (masked_fill's value: they call value.item(), a synchronization on CUDA,
// then convert it checked). Raises their "value cannot be converted to type
// ... without overflow" where it does not fit `dtype`. Reads the value only
// where its dtype holds a number that may not fit (a float into an integer,
// a float32 into float16), so a value of self's dtype costs no read.
void check_value_fits(const at::Tensor& value, at::ScalarType dtype);
// `number` converted to `dtype` as CPU's and CUDA's kernels convert a
// number they write (Scalar::to<scalar_t>(), checked: the same error where
// it does not fit).
c10::Scalar converted_value(const c10::Scalar& number, at::ScalarType dtype);
// Argument i as a defined tensor, or nullptr.
const at::Tensor* tensor_at(const Args& args, size_t i);
// The first of the first two arguments that is complex, or -1.
int complex_operand(const Args& args);

// Dtype gaps' predicates (OpSpec::dtype_gap): of the first argument's dtype.
bool floating(at::ScalarType t);
bool floating_or_complex(at::ScalarType t);
bool not_bool(at::ScalarType t);
bool all_types_and_half(at::ScalarType t);
bool all_types_complex_and_half(at::ScalarType t);

}  // namespace torch_tpu::device
