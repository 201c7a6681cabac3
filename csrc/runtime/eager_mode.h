// The eager execution mode. Strict (default): every op launches at once and
// the host never waits. Debug: every op waits for its results, and index
// ranges (and, if asked, NaN/Inf) are checked at the op that made them.
// DeferAndFuse: runs of ops are recorded and compiled as one program.
#pragma once

#include <optional>
#include <string>

namespace torch_tpu::runtime {

enum class EagerMode { Strict, Debug, DeferAndFuse };

// The calling thread's mode. Each thread has its own; one that never set it
// runs in the process default (TORCH_TPU_LAUNCH_BLOCKING /
// TORCH_TPU_DEFER_AND_FUSE, else Strict).
EagerMode eager_mode();
void set_eager_mode(EagerMode mode);  // the calling thread's only
const char* eager_mode_name(EagerMode mode);
EagerMode eager_mode_from_name(const std::string& name);  // throws std::invalid_argument

bool check_nans();  // TORCH_TPU_CHECK_NANS=1 or set_check_nans(true); Debug mode only
void set_check_nans(bool enabled);

}  // namespace torch_tpu::runtime
