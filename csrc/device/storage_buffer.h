// What a `tpu` storage's DataPtr points at: the current PJRT buffer holding
// the storage's elements as a flat array. PJRT buffers are immutable, so a
// write makes a new buffer and the storage swaps to it; every view of the
// storage sees the swap, exactly as views alias on CPU.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "device/device_allocator.h"
#include "hlo/builder.h"
#include "runtime/device_runtime.h"

namespace torch_tpu::device {

hlo::ElementType element_type(at::ScalarType t);  // throws TypeError for unsupported
at::ScalarType scalar_type(hlo::ElementType t);
PJRT_Buffer_Type pjrt_type(hlo::ElementType t);

struct PendingWork;  // csrc/exec/tensor_program.h: one thread's DeferAndFuse programs

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
  // The stack that allocated it, while memory history is recorded.
  std::shared_ptr<c10::GatheredContext> allocated_by;

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

// A new storage's DataPtr on `device`, holding no buffer yet (the caller,
// the allocator, has counted its bytes); its deleter gives them back.
c10::DataPtr new_storage_buffer(int device, size_t nbytes, std::shared_ptr<c10::GatheredContext> allocated_by);

// Bytes of live storages that hold no buffer yet (torch.empty, outputs of
// pending DeferAndFuse programs): promised, but not yet taken from the host.
int64_t bytes_awaiting_buffers();

// Calls `f` with every live storage and its (fake) address, under the lock
// of the address table: `f` must not allocate or free storages.
void for_each_live_storage(const std::function<void(const StorageBuffer&, uintptr_t address)>& f);

// Grows or shrinks a storage, keeping its leading bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes);

}  // namespace torch_tpu::device
