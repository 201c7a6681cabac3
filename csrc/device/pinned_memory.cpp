#include "device/pinned_memory.h"

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

class PinnedHostAllocator final : public c10::Allocator {
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
};

}  // namespace

c10::Allocator* pinned_memory_allocator() {
  static PinnedHostAllocator allocator;
  return &allocator;
}

bool is_pinned_ptr(const void* data) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return registry().count(data) > 0;
}

}  // namespace torch_tpu::device
