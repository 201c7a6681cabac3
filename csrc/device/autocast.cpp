// torch.autocast("tpu"): the AutocastPrivateUse1 dispatch key's kernels.
//
// Without them, every op inside `with torch.autocast("tpu", ...)` failed with
// "Could not run ... with arguments from the 'Autocasttpu' backend": the key
// is in the dispatch set of every tpu tensor while autocast is on, and only
// the backends PyTorch ships (CUDA, CPU, XPU, MPS...) have kernels for it.
//
// The policy is CUDA's, from PyTorch's own op lists (ATen/autocast_mode.h),
// so code written for CUDA autocast casts the same ops the same way on tpu:
// matmuls and convolutions run in the autocast dtype (bf16 by default here,
// torch_tpu/__init__.py), reductions and losses that lose accuracy in it run
// in float32, and mixed-dtype ops promote to the widest input. Every other op
// falls through to the tpu kernels unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_tpu::device {
namespace {

// CUDA refuses binary_cross_entropy under autocast (PyTorch's message); so
// does tpu, rather than computing it in half precision.
at::Tensor binary_cross_entropy_under_autocast(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                               int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

}  // namespace
}  // namespace torch_tpu::device

namespace at::autocast {
namespace {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TORCH_TPU_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TORCH_TPU_AUTOCAST_LOWER_PRECISION_FP)
#undef TORCH_TPU_AUTOCAST_LOWER_PRECISION_FP

#define TORCH_TPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TORCH_TPU_AUTOCAST_FP32)
#undef TORCH_TPU_AUTOCAST_FP32

#define TORCH_TPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TORCH_TPU_AUTOCAST_FP32_SET_OPT_DTYPE)
#undef TORCH_TPU_AUTOCAST_FP32_SET_OPT_DTYPE

  // Ops whose implicit promotion would not reach float32 get it appended
  // (norm with an explicit dtype), as on CUDA.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

#define TORCH_TPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TORCH_TPU_AUTOCAST_PROMOTE)
#undef TORCH_TPU_AUTOCAST_PROMOTE

  // A registration name, as every m.impl takes one; no rule is keyed by it.
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(torch_tpu::device::binary_cross_entropy_under_autocast));
}

}  // namespace
}  // namespace at::autocast
