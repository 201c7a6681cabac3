// Meta kernels PyTorch lacks for ops the device lowers. Every lowered op
// first runs its Meta kernel for argument checks and result shapes
// (csrc/device/meta_inference.h); a few backward ops and fused optimizer
// steps have none. Rows name theirs (OpSpec::meta), and each is registered
// only where PyTorch has none, so a later PyTorch that adds its own keeps it.
#pragma once

#include <torch/library.h>

#include "device/op_spec.h"

namespace torch_tpu::device {

// The kernel for `source` (not MetaSource::PyTorch), boxed: it serves every
// overload of its row.
torch::CppFunction missing_meta_kernel(MetaSource source);

// The device's kernel for `source` where it replaces PyTorch's own (see
// MetaSource), called directly in place of the Meta dispatch; else nullptr.
using BoxedMetaKernel = void (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack);
BoxedMetaKernel replacement_meta_kernel(MetaSource source);

}  // namespace torch_tpu::device
