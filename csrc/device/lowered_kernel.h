// The one kernel behind every lowered ATen op: PyTorch's meta kernel checks
// the arguments and gives result shapes and dtypes; the op's lowering emits
// StableHLO; the program writes in-place and out= results into their
// storages and wraps fresh results in new tensors.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "lower/lowering.h"

namespace torch_tpu::device {

class LoweredKernel final : public c10::OperatorKernel {
 public:
  explicit LoweredKernel(lower::LowerFn fn) : fn_(fn) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

 private:
  lower::LowerFn fn_;
};

}  // namespace torch_tpu::device
