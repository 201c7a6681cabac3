// What a `tpu` storage's DataPtr points at: the current PJRT buffer holding
// the storage's elements as a flat array. PJRT buffers are immutable, so a
// write makes a new buffer and the storage swaps to it; every view of the
// storage sees the swap, exactly as views alias on CPU.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "hlo/builder.h"
#include "runtime/device_runtime.h"

namespace torch_tpu::device {

hlo::ElementType element_type(at::ScalarType t);  // throws TypeError for unsupported
at::ScalarType scalar_type(hlo::ElementType t);
PJRT_Buffer_Type pjrt_type(hlo::ElementType t);

struct PendingWork;  // csrc/device/tensor_program.h: one thread's DeferAndFuse programs

// Any thread may read a storage's buffer or swap it. Copying the pointer out
// (current()) and a program's launch (deciding which inputs to donate,
// executing, swapping the results in) hold this lock, so a buffer is never
// donated while another thread is about to pass it to a program.
std::recursive_mutex& buffers_mutex();

struct StorageBuffer {
  uint64_t id = 0;  // unique for the process lifetime (addresses get reused)
  int device = 0;
  size_t nbytes = 0;
  // Null until the storage is first written (torch.empty costs nothing).
  // Read it through current(); write it through set().
  runtime::BufferPtr buffer;
  hlo::ElementType dtype = hlo::ElementType::U8;  // element type of `buffer`
  // DeferAndFuse: the thread whose pending program writes this storage (under
  // the deferred programs' mutex); another thread reading it runs that
  // program first (settle_pending_writes).
  PendingWork* pending_in = nullptr;
  // Set when the program that was to compute this storage failed (and it
  // held no earlier value): reading it raises this instead of returning zeros.
  std::shared_ptr<const std::string> lost;

  int64_t numel() const { return static_cast<int64_t>(nbytes / hlo::byte_size(dtype)); }
  // The buffer (and, if asked, its element type), copied under
  // buffers_mutex(); raises if the storage was lost.
  runtime::BufferPtr current(hlo::ElementType* element_type = nullptr) const;
  void set(runtime::BufferPtr b, hlo::ElementType t);
  void raise_if_lost() const;
};

// Whether a (defined) tensor lives on a tpu device, i.e. in a StorageBuffer.
inline bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

StorageBuffer& storage_buffer(const c10::Storage& storage);
StorageBuffer& storage_buffer(const at::Tensor& tensor);

// PyTorch's `storage[a:b]` (torch/csrc/Storage.cpp) makes a storage whose
// DataPtr points `a` bytes into its parent's, with the parent's StorageImpl
// as context and a deleter of PyTorch's own. That deleter is the same for
// every device, so it is learned once from a CPU tensor over a CPU slice.
void learn_storage_slice_deleter(const at::Tensor& over_cpu_slice);

// A byte slice of a tpu storage, resolved to the storage holding its bytes.
struct StorageSlice {
  c10::Storage root;  // a storage of ours (its DataPtr's context is a StorageBuffer)
  size_t byte_offset = 0;
};
// The root and offset when `storage` is such a slice (of a slice...) of a
// tpu storage; nullopt for any other storage.
std::optional<StorageSlice> storage_slice_root(const c10::Storage& storage);

// The PrivateUse1 allocator. Data pointers are fake addresses (never
// dereferenced, never reused, so distinct storages never overlap); the
// DataPtr's context is the StorageBuffer.
class TpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;
};

TpuAllocator* allocator();

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

// Grows or shrinks a storage, keeping its leading bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes);

}  // namespace torch_tpu::device
