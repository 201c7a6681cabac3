// Reducing and copying scatters: scatter_reduce, scatter(reduce=), index_reduce,
// index_copy, index_fill, masked_scatter, put, take, embedding_renorm_,
// embedding_bag, segment_reduce and their backward.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(embedding_bag)
TORCH_TPU_LOWERING(embedding_bag_backward)
TORCH_TPU_LOWERING(embedding_bag_dense_backward)
TORCH_TPU_LOWERING(embedding_bag_per_sample_weights_backward)
TORCH_TPU_LOWERING(embedding_renorm)
TORCH_TPU_LOWERING(index_copy)
TORCH_TPU_LOWERING(index_fill)
TORCH_TPU_LOWERING(index_reduce)
TORCH_TPU_LOWERING(masked_scatter)
TORCH_TPU_LOWERING(put)
TORCH_TPU_LOWERING(scatter_reduce)
TORCH_TPU_LOWERING(segment_reduce)
TORCH_TPU_LOWERING(segment_reduce_backward)
TORCH_TPU_LOWERING(scatter_with_reduce)
TORCH_TPU_LOWERING(take)

}  // namespace torch_tpu::lower
