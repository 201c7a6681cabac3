// The PrivateUse1 allocator, a c10::DeviceAllocator so that torch.accelerator's
// memory calls reach it (at::getDeviceAllocator asserts on any other kind),
// and the one account of device bytes: its statistics, the out-of-memory
// check, mem_get_info and the memory history behind torch.tpu.memory._snapshot.
//
// Nothing is cached: a storage's bytes are taken at its allocation and given
// back when it dies, so every allocation is its own segment and reserved
// bytes equal allocated bytes.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace torch_tpu::device {

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  // Data pointers are fake addresses (never dereferenced, never reused, so
  // distinct storages never overlap); the DataPtr's context is the storage's
  // StorageBuffer.
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;
};

TpuAllocator* allocator();

// A storage's deleter gives its bytes back here (`address` is its fake
// address, the key of its allocation in the memory history).
void release_device_bytes(int device, size_t nbytes, uintptr_t address);

// torch.cuda.mem_get_info's pair for a device, by the accounting the
// allocator's out-of-memory check uses: (capacity - bytes allocated by live
// tpu storages, capacity). Devices of the XLA:CPU plugin share host memory.
// The first is what this process may still allocate: capacity times the
// device's memory fraction, less what live storages hold.
std::pair<int64_t, int64_t> device_memory_info(int device);

// torch.cuda.set_per_process_memory_fraction: allocations on `device` past
// fraction * capacity raise torch.OutOfMemoryError (the caller checks 0..1).
void set_memory_fraction(int device, double fraction);
double get_memory_fraction(int device);

// ---- memory history (torch.tpu.memory._record_memory_history) --------------

// Who records stacks: the Python binding (it knows whether the calling thread
// may take the GIL); called outside the allocator's lock.
using GatherContextFn = std::shared_ptr<c10::GatheredContext> (*)();

// CUDA's `enabled`/`context` pair: `when` says which events keep a stack
// (c10's RecordContext), `trace` whether events are kept at all (a ring of
// the last `max_entries`). when == NEVER and !trace stops recording.
void record_memory_history(c10::CachingDeviceAllocator::RecordContext when, bool trace, size_t max_entries,
                           GatherContextFn gather);

struct MemoryEvent {
  c10::CachingDeviceAllocator::TraceEntry::Action action;
  int device = 0;
  uintptr_t address = 0;  // for OOM: the bytes that were free
  size_t size = 0;
  int64_t time_us = 0;  // since the epoch
  std::shared_ptr<c10::GatheredContext> context;
};

struct LiveAllocation {
  int device = 0;
  uintptr_t address = 0;
  size_t size = 0;
  std::shared_ptr<c10::GatheredContext> context;  // null unless recorded
};

// What a snapshot shows: live storages in address order, and the recorded
// events in order (a "snapshot" event is appended first, as CUDA's is).
std::vector<LiveAllocation> live_allocations();
std::vector<MemoryEvent> memory_events();

}  // namespace torch_tpu::device
