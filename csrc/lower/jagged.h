// fbgemm's jagged-tensor operators (the `fbgemm` namespace of fbgemm_gpu),
// which TorchRec's KeyedJaggedTensor, KeyedTensor, EmbeddingBagCollection and
// EmbeddingCollection call: prefix sums of lengths, jagged <-> padded dense,
// permuting the features of sparse data and of pooled embeddings, segment
// ranges and sums. Semantics are fbgemm's CPU kernels'
// (fbgemm_gpu/src/sparse_ops/sparse_ops_cpu.cpp,
// jagged_tensor_ops/jagged_tensor_ops_cpu.cpp); argument indices follow their
// schemas. A result size that depends on values (the permuted total length)
// arrives as an argument the device layer fills from the host
// (csrc/device/rows/fbgemm.cpp).
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(asynchronous_complete_cumsum)
TORCH_TPU_LOWERING(asynchronous_exclusive_cumsum)
TORCH_TPU_LOWERING(asynchronous_inclusive_cumsum)
TORCH_TPU_LOWERING(dense_to_jagged_forward)
TORCH_TPU_LOWERING(jagged_1d_to_dense)
TORCH_TPU_LOWERING(jagged_2d_to_dense)
TORCH_TPU_LOWERING(jagged_to_padded_dense_backward)
TORCH_TPU_LOWERING(jagged_to_padded_dense_forward)
TORCH_TPU_LOWERING(offsets_range)
TORCH_TPU_LOWERING(permute_1D_sparse_data)
TORCH_TPU_LOWERING(permute_2D_sparse_data)
TORCH_TPU_LOWERING(permute_pooled_embs)
TORCH_TPU_LOWERING(segment_sum_csr)

}  // namespace torch_tpu::lower
