#include "device/missing_meta_kernels.h"

#include <memory>

namespace torch_tpu::device {

namespace {

// A row's kernel pointer, known at run time, as a boxed kernel.
class RowMetaKernel final : public c10::OperatorKernel {
 public:
  explicit RowMetaKernel(BoxedMetaKernel kernel) : kernel_(kernel) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) { kernel_(op, stack); }

 private:
  BoxedMetaKernel kernel_;
};

}  // namespace

torch::CppFunction missing_meta_kernel(BoxedMetaKernel kernel) {
  TORCH_CHECK(kernel, "internal: PyTorch's own Meta kernels are not registered by the device");
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<RowMetaKernel>(kernel));
}

BoxedMetaKernel replacement_meta_kernel(const RowMeta& meta) { return meta.replaces_pytorch ? meta.kernel : nullptr; }

}  // namespace torch_tpu::device
