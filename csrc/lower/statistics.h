// Statistics and searches: nansum, aminmax, count_nonzero, trace, renorm,
// searchsorted/bucketize, isin, histc, histogram/histogramdd.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(aminmax)
TORCH_TPU_LOWERING(bucketize)
TORCH_TPU_LOWERING(count_nonzero)
TORCH_TPU_LOWERING(histc)
TORCH_TPU_LOWERING(histogram_bin_ct)
TORCH_TPU_LOWERING(histogram_bins_tensor)
TORCH_TPU_LOWERING(histogramdd_bin_edges)
TORCH_TPU_LOWERING(histogramdd_from_bin_cts)
TORCH_TPU_LOWERING(histogramdd_from_bin_tensors)
TORCH_TPU_LOWERING(isin)
TORCH_TPU_LOWERING(nansum)
TORCH_TPU_LOWERING(renorm)
TORCH_TPU_LOWERING(searchsorted)
TORCH_TPU_LOWERING(trace)

}  // namespace torch_tpu::lower
