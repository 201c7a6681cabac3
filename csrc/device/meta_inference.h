// Result shapes, strides and dtypes of an op, from PyTorch's own meta kernel
// run on metadata twins of the arguments (so checks, broadcasting and type
// promotion are PyTorch's). Many meta kernels are Python (torch._refs), which
// costs hundreds of microseconds, so results are cached by everything the
// meta kernel can see: argument metadata, aliasing between arguments, and
// non-tensor argument values (the call's signature under the meta policy,
// csrc/exec/call_signature.h).
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

// `reads_numbers` false (OpSpec::meta_reads_numbers): the results cannot
// depend on the values of numbers, so they are cached by kind. The _foreach_
// ops' results mirror their tensor lists whatever the scalars' values; an
// optimizer passes new ones every step (bias corrections, a scheduled
// learning rate), and their meta kernels are Python (~10 ms for a 50-tensor
// list).
// `kernel`: the device's own Meta kernel to call instead of PyTorch's
// (replacement_meta_kernel), or nullptr.
MetaResult infer_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args, bool reads_numbers,
                      void (*kernel)(const c10::OperatorHandle&, torch::jit::Stack*) = nullptr);

// The memory format of a convolution's result and of its input and weight
// gradients, by CUDA's rule (cudnn_conv_suggest_memory_format) and CPU's
// (mkldnn_conv_use_channels_last): channels_last (channels_last_3d) when the
// input or the weight is, else contiguous. PyTorch's convolution Meta kernel
// always answers contiguous for a PrivateUse1 device. The fake tensors
// torch.compile traces with apply the same rule (torch_tpu/memory_format.py).
at::MemoryFormat convolution_memory_format(const at::Tensor& input, const at::Tensor& weight);

}  // namespace torch_tpu::device
