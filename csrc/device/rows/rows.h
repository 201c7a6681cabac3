// The registration table's rows (csrc/device/op_spec.h), one file per op
// family beside the lowerings they name: an op's row and the rules only its
// family applies (argument checks, meta kernels) live in its family's file
// here, its meaning in its lowering (csrc/lower/). csrc/device/op_table.cpp
// registers every family's rows.
#pragma once

#include <span>

#include "device/op_spec.h"

namespace torch_tpu::device {

std::span<const OpSpec> pointwise_rows();       // lower/elementwise, activation, math, special, complex_construct
std::span<const OpSpec> reduction_rows();       // lower/reduce, statistics, norm, scan, sort
std::span<const OpSpec> indexing_rows();        // lower/index, index_reduce, shape, padding, creation
std::span<const OpSpec> linear_algebra_rows();  // lower/matmul, linalg, attention, conv, im2col, fft
std::span<const OpSpec> nn_rows();              // lower/loss, pointwise_loss, pool, batch_norm, group_norm, resample,
                                                // rnn, distance, unfold_backward
std::span<const OpSpec> optimizer_rows();       // lower/foreach, amp
std::span<const OpSpec> random_rows();          // lower/random

// Other libraries' operators (fbgemm's jagged operators, lower/jagged),
// registered when the library is imported: rows named with their namespace.
std::span<const OpSpec> library_rows();

}  // namespace torch_tpu::device
