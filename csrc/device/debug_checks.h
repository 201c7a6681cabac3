// Debug mode's checks (TORCH_TPU_LAUNCH_BLOCKING=1): index ranges before an
// indexing op runs (their rows name them: csrc/device/rows/indexing.cpp),
// NaN/Inf in results after (here). Both read values on the host, which is
// why only Debug mode makes them.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace torch_tpu::device {

// Debug mode with TORCH_TPU_CHECK_NANS on: raises naming `op` when a
// floating result (a tensor or a list's) holds NaN or Inf. Every kernel that
// computes device values calls it: lowered ops, casts, data-dependent ops.
void check_finite_results(const std::string& op, const std::vector<c10::IValue>& results);

}  // namespace torch_tpu::device
