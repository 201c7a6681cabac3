// Pinned host memory for tpu: `pin_memory=True` tensors, `Tensor.pin_memory()`,
// and the pinned staging buffers DDP's reducer asserts on
// (`local_used_map_tmp.is_pinned()` for find_unused_parameters).
#pragma once

#include <c10/core/Allocator.h>

namespace torch_tpu::device {

// Host allocations that know they are pinned. PJRT copies from any host
// memory, so no page-locking is needed on the plugins we load; the allocator
// keeps a registry of its live blocks so isPinnedPtr answers truthfully.
c10::Allocator* pinned_memory_allocator();
bool is_pinned_ptr(const void* data);

}  // namespace torch_tpu::device
