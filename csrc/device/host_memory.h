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

}  // namespace torch_tpu::device
