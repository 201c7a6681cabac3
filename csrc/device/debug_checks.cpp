#include "device/debug_checks.h"

#include "device/argument_checks.h"
#include "exec/mode_executor.h"
#include "runtime/eager_mode.h"

namespace torch_tpu::device {

void check_finite_results(const std::string& op, const std::vector<c10::IValue>& results) {
  if (!current_mode_executor().checks_each_op() || !runtime::check_nans()) return;
  std::vector<at::Tensor> tensors;
  for (const auto& r : results) collect_tensors(r, tensors);
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    at::Tensor host = t.cpu();
    TORCH_CHECK(at::isfinite(host).all().item<bool>(), "tpu debug (TORCH_TPU_CHECK_NANS): ", op,
                " produced NaN or Inf");
  }
}

}  // namespace torch_tpu::device
