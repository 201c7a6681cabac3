// Argument checks PyTorch's CPU and CUDA kernels make before they compute
// and its meta kernels skip (or make with another exception type). Every
// lowered op runs them first, so bad input raises the exception a CUDA user
// would see, at the call that made it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>

#include <vector>

namespace torch_tpu::device {

void check_arguments(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// Whether the op's checks read tensor values on the host (multinomial's
// probabilities), so that a call cannot skip them by replaying an earlier
// call's program (csrc/device/op_cache.h); every other check reads dtypes,
// shapes and non-tensor arguments only, which a replay's signature fixes.
bool checks_read_values(const c10::FunctionSchema& schema);

// The tensors of an argument (a Tensor, Tensor[] or Tensor?[]).
void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out);

// Whether the schema marks the argument as written (in-place self, out=).
bool writes_argument(const c10::Argument& a);

}  // namespace torch_tpu::device
