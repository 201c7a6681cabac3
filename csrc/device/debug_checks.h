// Debug mode's checks (TORCH_TPU_LAUNCH_BLOCKING=1): index ranges before an
// indexing op runs, NaN/Inf in results after. Both read values on the host,
// which is why only Debug mode makes them.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

namespace torch_tpu::device {

// Raises the error CPU raises for the first out-of-range index.
void check_index_ranges(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// Raises naming the op when a floating result holds NaN or Inf.
void check_finite_results(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& results);

}  // namespace torch_tpu::device
