#include "device/missing_meta_kernels.h"

#include <ATen/ATen.h>

namespace torch_tpu::device {

namespace {

// (grad_output, self, ...): the gradient has its input's shape (margin
// losses, fractional max pooling); an out= variant resizes its grad_input.
void like_self(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema_args = op.schema().arguments();
  std::vector<c10::IValue> args(stack->end() - schema_args.size(), stack->end());
  torch::jit::drop(*stack, schema_args.size());
  const at::Tensor& self = args[1].toTensor();
  for (size_t i = 0; i < schema_args.size(); ++i) {
    if (!schema_args[i].is_out()) continue;
    at::Tensor grad_input = args[i].toTensor();
    grad_input.resize_(self.sizes());
    stack->emplace_back(grad_input);
    return;
  }
  stack->emplace_back(at::empty_like(self, self.options(), at::MemoryFormat::Contiguous));
}

// Fused optimizer steps: in place on their arguments, returning nothing, so
// there are no result shapes to infer.
void updates_in_place(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
}

// The fused attention's backward (csrc/lower/attention.cpp): gradients like
// q, k, v, and attn_bias's only when there is one (torch 2.13's own meta
// kernel; torch 2.11 has none).
void fused_attention_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  for (size_t i = 1; i <= 3; ++i) stack->emplace_back(at::empty_like(args[i].toTensor()));
  const bool has_bias = args[4].isTensor() && args[4].toTensor().defined();
  stack->emplace_back(has_bias ? at::empty_like(args[4].toTensor()) : at::Tensor());
}

}  // namespace

torch::CppFunction missing_meta_kernel(MetaSource source) {
  switch (source) {
    case MetaSource::LikeSelf:
      return torch::CppFunction::makeFromBoxedFunction<like_self>();
    case MetaSource::UpdatesInPlace:
      return torch::CppFunction::makeFromBoxedFunction<updates_in_place>();
    case MetaSource::FusedAttentionBackward:
      return torch::CppFunction::makeFromBoxedFunction<fused_attention_backward>();
    case MetaSource::PyTorch:
      break;
  }
  TORCH_CHECK(false, "internal: PyTorch's own Meta kernels are not registered by the device");
}

}  // namespace torch_tpu::device
