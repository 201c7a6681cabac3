#include "device/sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <stdexcept>
#include <string>

namespace torch_tpu::device {

namespace {
// Process-wide, as CUDA's: the setting is read on every host read, so one
// relaxed load is all a read pays while it is off.
std::atomic<int> mode_{0};
}  // namespace

void set_sync_debug_mode(int mode) {
  if (mode < 0 || mode > 2) {
    throw std::invalid_argument(
        "invalid value of debug_mode, expected one of `default`, `warn`, `error` (0, 1, 2), got " +
        std::to_string(mode));
  }
  mode_.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() { return mode_.load(std::memory_order_relaxed); }

void warn_or_error_on_sync() {
  const int mode = sync_debug_mode();
  if (mode == 0) return;
  // CUDA's words, with the device's name.
  TORCH_CHECK(mode != 2, "called a synchronizing tpu operation");
  TORCH_WARN("called a synchronizing tpu operation");
}

}  // namespace torch_tpu::device
