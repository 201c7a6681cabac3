// Advanced indexing's arguments as CUDA accepts them (OpSpec::
// normalize_arguments of index and index_put): index tensors may live on the
// CPU, and index's boolean masks become the coordinates of their true
// elements.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace torch_tpu::device {

// index.Tensor: (self, indices, ...). A mask's coordinates have a
// data-dependent size: the host waits for the mask, as CUDA does.
void normalize_index_arguments(std::vector<c10::IValue>& args);
// _index_put_impl_: (self, indices, values, ...); only CPU indices move,
// masks are left as they are.
void normalize_index_put_arguments(std::vector<c10::IValue>& args);

}  // namespace torch_tpu::device
