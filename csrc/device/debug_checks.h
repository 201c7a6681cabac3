// Debug mode's checks (TORCH_TPU_LAUNCH_BLOCKING=1): index ranges before an
// indexing op runs, NaN/Inf in results after. Both read values on the host,
// which is why only Debug mode makes them.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace torch_tpu::device {

// Index ranges (OpSpec::debug_check): each raises the error CPU raises for
// the first out-of-range index.
// (self, dim, index, ...): gather, scatter, scatter_add.
void check_dim_index_range(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// (self, dim, index, ...) with IndexError: index_select, index_add.
void check_dim_index_range_index_error(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// (self, indices, ...), one index tensor per leading dim: index, index_put.
void check_advanced_index_ranges(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// Debug mode with TORCH_TPU_CHECK_NANS on: raises naming `op` when a
// floating result (a tensor or a list's) holds NaN or Inf. Every kernel that
// computes device values calls it: lowered ops, casts, data-dependent ops.
void check_finite_results(const std::string& op, const std::vector<c10::IValue>& results);

}  // namespace torch_tpu::device
