// The one kernel behind every lowered ATen op: its row's checks and PyTorch's
// meta kernel check the arguments, the meta kernel gives result shapes and
// dtypes; the op's lowering emits StableHLO; the program writes in-place and
// out= results into their storages and wraps fresh results in new tensors.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "device/op_spec.h"

namespace torch_tpu::device {

class LoweredKernel final : public c10::OperatorKernel {
 public:
  // `spec`: the op's row of the registration table, which outlives the kernel.
  explicit LoweredKernel(const OpSpec* spec) : spec_(spec) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

 private:
  const OpSpec* spec_;
};

}  // namespace torch_tpu::device
