// What the host can give this process: the memory the XLA:CPU plugin's
// devices allocate from (they report no limit of their own).
#pragma once

#include <cstdint>

namespace torch_tpu::device {

// The most this process can ever hold: physical memory, or the memory
// limit of its cgroup (v2 memory.max of the group and its ancestors, v1
// hierarchical_memory_limit) where that is less. Read once.
int64_t host_memory_total();

// What an allocation can take now: MemAvailable (/proc/meminfo), and under
// a cgroup limit, that limit less the group's usage (its inactive file
// pages excluded, which the kernel reclaims first), the least of them.
// Reads /proc and /sys (about 10 microseconds): not for every allocation.
int64_t host_memory_available();

// Hands the pages malloc holds free back to the kernel (glibc's
// malloc_trim), where they count as used in MemAvailable: on the XLA:CPU
// plugin torch_tpu has glibc keep freed device buffers' pages
// (torch_tpu/_global_patches.py). Whether any were returned; false where
// malloc is not glibc's.
bool return_free_malloc_pages();

}  // namespace torch_tpu::device
