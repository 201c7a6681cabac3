// Indexing: gather/scatter along a dim, index_select/index_add, advanced
// indexing (index.Tensor, index_put), embedding's backward and
// nonzero_static.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(embedding_dense_backward)
TORCH_TPU_LOWERING(gather)
TORCH_TPU_LOWERING(index)
TORCH_TPU_LOWERING(index_add)
TORCH_TPU_LOWERING(index_put)
TORCH_TPU_LOWERING(index_select)
TORCH_TPU_LOWERING(nonzero_static)
TORCH_TPU_LOWERING(scatter)
TORCH_TPU_LOWERING(scatter_add)

}  // namespace torch_tpu::lower
