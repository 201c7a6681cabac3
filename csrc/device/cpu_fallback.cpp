// Ops with no lowering: NotImplementedError naming the op, or, when the
// user opted in (torch_tpu.cpu_fallback(True) / TORCH_TPU_CPU_FALLBACK=1),
// a run on CPU with a one-time warning per op and a count in the metrics.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <set>

#include "device/cpu_fallback.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

std::atomic<bool> fallback_enabled{false};

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(fallback_enabled.load(), "The operator '", name,
                              "' is not currently implemented for the tpu device. Enable the CPU fallback with "
                              "torch_tpu.cpu_fallback(True) or TORCH_TPU_CPU_FALLBACK=1 to run it on CPU (slow).");
  {
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(name).second) {
      TORCH_WARN("torch_tpu: '", name, "' has no tpu lowering; running it on CPU (copies to and from the host).");
    }
  }
  runtime::metrics().count_fallback(name);
  at::native::cpu_fallback(op, stack);
}

}  // namespace

void set_cpu_fallback(bool enabled) { fallback_enabled = enabled; }
bool cpu_fallback_enabled() { return fallback_enabled; }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>()); }

}  // namespace torch_tpu::device
