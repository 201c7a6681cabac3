// Meta kernels PyTorch lacks, or has wrong, for ops the device lowers. Every
// lowered op first runs its Meta kernel for argument checks and result shapes
// (csrc/device/meta_inference.h); a few backward ops and fused optimizer
// steps have none. A row names its kernel (OpSpec::meta_from, meta_instead),
// a function in the row's file (csrc/device/rows/); meta_from's is
// registered only where PyTorch has none, so a later PyTorch that adds its
// own keeps it. Here: serving those functions to the dispatcher.
#pragma once

#include <torch/library.h>

#include <string>
#include <vector>

#include "device/op_spec.h"

namespace torch_tpu::device {

// op_table.cpp: the overloads whose row's meta kernel serves torch.compile's
// fake tensors (OpSpec::fake_from_meta), "aten::name[.overload]", and that
// kernel for `op` (nullptr where its row has none). Python asks through
// csrc/python/op_table_bindings.cpp.
std::vector<std::string> fake_tensor_rule_ops();
BoxedMetaKernel fake_tensor_meta_kernel(const c10::OperatorHandle& op);

// `kernel` as a Meta kernel to register.
torch::CppFunction missing_meta_kernel(BoxedMetaKernel kernel);

// The row's kernel where it replaces PyTorch's own, called directly in place
// of the Meta dispatch; else nullptr.
BoxedMetaKernel replacement_meta_kernel(const RowMeta& meta);

}  // namespace torch_tpu::device
