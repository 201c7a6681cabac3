// What a `tpu` storage's DataPtr points at: the current PJRT buffer holding
// the storage's elements as a flat array. PJRT buffers are immutable, so a
// write makes a new buffer and the storage swaps to it; every view of the
// storage sees the swap, exactly as views alias on CPU.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <memory>

#include "hlo/builder.h"
#include "runtime/device_runtime.h"

namespace torch_tpu::device {

hlo::ElementType element_type(at::ScalarType t);  // throws TypeError for unsupported
at::ScalarType scalar_type(hlo::ElementType t);
PJRT_Buffer_Type pjrt_type(hlo::ElementType t);

struct StorageBuffer {
  uint64_t id = 0;  // unique for the process lifetime (addresses get reused)
  int device = 0;
  size_t nbytes = 0;
  // Null until the storage is first written (torch.empty costs nothing).
  runtime::BufferPtr buffer;
  hlo::ElementType dtype = hlo::ElementType::U8;  // element type of `buffer`

  int64_t numel() const { return static_cast<int64_t>(nbytes / hlo::byte_size(dtype)); }
  void set(runtime::BufferPtr b, hlo::ElementType t);
};

// Whether a (defined) tensor lives on a tpu device, i.e. in a StorageBuffer.
inline bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

StorageBuffer& storage_buffer(const c10::Storage& storage);
StorageBuffer& storage_buffer(const at::Tensor& tensor);

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

// Grows or shrinks a storage, keeping its leading bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes);

}  // namespace torch_tpu::device
