// fbgemm's jagged operators that may leave out the number their result's
// size is (OpSpec::normalize_arguments of their rows): the host waits for it,
// as fbgemm's CUDA kernels do, and the call goes on with it filled in, so the
// meta kernel and the lowering see a fixed size (csrc/lower/jagged.h).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace torch_tpu::device {

// permute_{1,2}D_sparse_data(permute, lengths, values, weights?,
// permuted_lengths_sum?): the sum of the permuted lengths.
void fill_permuted_lengths_sum(std::vector<c10::IValue>& args);
// dense_to_jagged_forward(dense, x_offsets, total_L?): the last offset.
void fill_jagged_total_length(std::vector<c10::IValue>& args);

}  // namespace torch_tpu::device
