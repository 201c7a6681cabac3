#include "eager_mode.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace torch_tpu::runtime {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// The mode of threads that never chose one: from the environment, fixed.
EagerMode process_default_mode() {
  static const EagerMode mode = env_flag("TORCH_TPU_LAUNCH_BLOCKING")  ? EagerMode::Debug
                                : env_flag("TORCH_TPU_DEFER_AND_FUSE") ? EagerMode::DeferAndFuse
                                                                       : EagerMode::Strict;
  return mode;
}

// Per thread, as PyTorch keeps grad mode and autocast: a thread switching
// modes (or a compiled graph tracing in DeferAndFuse) never changes how
// another thread's ops run. Unset until the thread chooses.
thread_local std::optional<EagerMode> thread_mode;

std::atomic<bool>& nan_state() {
  static std::atomic<bool> enabled{env_flag("TORCH_TPU_CHECK_NANS")};
  return enabled;
}

}  // namespace

EagerMode eager_mode() { return thread_mode ? *thread_mode : process_default_mode(); }
void set_eager_mode(EagerMode mode) { thread_mode = mode; }

const char* eager_mode_name(EagerMode mode) {
  return mode == EagerMode::Debug ? "debug" : mode == EagerMode::DeferAndFuse ? "defer_and_fuse" : "strict";
}

EagerMode eager_mode_from_name(const std::string& name) {
  if (name == "strict") return EagerMode::Strict;
  if (name == "debug") return EagerMode::Debug;
  if (name == "defer_and_fuse") return EagerMode::DeferAndFuse;
  throw std::invalid_argument("unknown eager mode '" + name + "': expected 'strict', 'debug' or 'defer_and_fuse'");
}

bool check_nans() { return nan_state().load(std::memory_order_relaxed); }
void set_check_nans(bool enabled) { nan_state() = enabled; }

}  // namespace torch_tpu::runtime
