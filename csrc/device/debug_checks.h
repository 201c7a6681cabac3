// Debug mode's checks (TORCH_TPU_LAUNCH_BLOCKING=1): index ranges before an
// indexing op runs, NaN/Inf in results after. Both read values on the host,
// which is why only Debug mode makes them.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace torch_tpu::device {

// Raises the error CPU raises for the first out-of-range index.
void check_index_ranges(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// Debug mode with TORCH_TPU_CHECK_NANS on: raises naming `op` when a
// floating result (a tensor or a list's) holds NaN or Inf. Every kernel that
// computes device values calls it: lowered ops, casts, data-dependent ops.
void check_finite_results(const std::string& op, const std::vector<c10::IValue>& results);

}  // namespace torch_tpu::device
