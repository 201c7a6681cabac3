// Result shapes, strides and dtypes of an op, from PyTorch's own meta kernel
// run on metadata twins of the arguments (so checks, broadcasting and type
// promotion are PyTorch's). Many meta kernels are Python (torch._refs), which
// costs hundreds of microseconds, so results are cached by everything the
// meta kernel can see: argument metadata, aliasing between arguments, and
// non-tensor argument values.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

namespace torch_tpu::device {

struct TensorMeta {
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;
  bool defined = true;  // false: the op returned an undefined tensor (a masked-off backward result)
};

struct MetaResult {
  // One entry per schema return; a Tensor return has one element, a Tensor[]
  // return as many as it holds.
  std::vector<std::vector<TensorMeta>> returns;
  std::vector<bool> return_is_list;
  // Non-tensor returns (SDPA's max_q/max_k ints) as the meta kernel gave
  // them, by return index; None for tensor returns.
  std::vector<c10::IValue> values;
  // Written tensor arguments (out=, in-place) as the meta kernel left them.
  std::vector<std::pair<size_t, TensorMeta>> written_args;
};

MetaResult infer_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args);

}  // namespace torch_tpu::device
