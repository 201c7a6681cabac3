#include "device/pinned_memory.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <mutex>
#include <unordered_set>

namespace torch_tpu::device {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_set<const void*>& registry() {
  static auto* blocks = new std::unordered_set<const void*>();  // outlives static destruction
  return *blocks;
}

void free_pinned(void* data) {
  if (data == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(data);
  }
  c10::free_cpu(data);
}

// Also PyTorch's host allocator for the device, so torch.accelerator's
// host-cache calls (empty_host_cache, host_memory_stats; vLLM's shutdown
// makes them) find one: there is no cache, nothing to empty or count.
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(registry_mutex());
      registry().insert(data);
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

PinnedHostAllocator g_pinned_host_allocator;

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned_host_allocator)

c10::Allocator* pinned_memory_allocator() { return &g_pinned_host_allocator; }

bool is_pinned_ptr(const void* data) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return registry().count(data) > 0;
}

}  // namespace torch_tpu::device
