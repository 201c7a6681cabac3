#include "storage_buffer.h"

#include <atomic>

#include "runtime/metrics.h"

namespace torch_tpu::device {

using hlo::ElementType;

hlo::ElementType element_type(at::ScalarType t) {
  switch (t) {
    case at::kBool: return ElementType::Pred;
    case at::kChar: return ElementType::S8;
    case at::kShort: return ElementType::S16;
    case at::kInt: return ElementType::S32;
    case at::kLong: return ElementType::S64;
    case at::kByte: return ElementType::U8;
    case at::kUInt16: return ElementType::U16;
    case at::kUInt32: return ElementType::U32;
    case at::kUInt64: return ElementType::U64;
    case at::kHalf: return ElementType::F16;
    case at::kBFloat16: return ElementType::BF16;
    case at::kFloat: return ElementType::F32;
    case at::kDouble: return ElementType::F64;
    case at::kComplexFloat: return ElementType::C64;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

at::ScalarType scalar_type(hlo::ElementType t) {
  switch (t) {
    case ElementType::Pred: return at::kBool;
    case ElementType::S8: return at::kChar;
    case ElementType::S16: return at::kShort;
    case ElementType::S32: return at::kInt;
    case ElementType::S64: return at::kLong;
    case ElementType::U8: return at::kByte;
    case ElementType::U16: return at::kUInt16;
    case ElementType::U32: return at::kUInt32;
    case ElementType::U64: return at::kUInt64;
    case ElementType::F16: return at::kHalf;
    case ElementType::BF16: return at::kBFloat16;
    case ElementType::F32: return at::kFloat;
    case ElementType::F64: return at::kDouble;
    case ElementType::C64: return at::kComplexFloat;
  }
  return at::kFloat;
}

PJRT_Buffer_Type pjrt_type(hlo::ElementType t) {
  switch (t) {
    case ElementType::Pred: return PJRT_Buffer_Type_PRED;
    case ElementType::S8: return PJRT_Buffer_Type_S8;
    case ElementType::S16: return PJRT_Buffer_Type_S16;
    case ElementType::S32: return PJRT_Buffer_Type_S32;
    case ElementType::S64: return PJRT_Buffer_Type_S64;
    case ElementType::U8: return PJRT_Buffer_Type_U8;
    case ElementType::U16: return PJRT_Buffer_Type_U16;
    case ElementType::U32: return PJRT_Buffer_Type_U32;
    case ElementType::U64: return PJRT_Buffer_Type_U64;
    case ElementType::F16: return PJRT_Buffer_Type_F16;
    case ElementType::BF16: return PJRT_Buffer_Type_BF16;
    case ElementType::F32: return PJRT_Buffer_Type_F32;
    case ElementType::F64: return PJRT_Buffer_Type_F64;
    case ElementType::C64: return PJRT_Buffer_Type_C64;
  }
  return PJRT_Buffer_Type_INVALID;
}

void StorageBuffer::set(runtime::BufferPtr b, hlo::ElementType t) {
  bool had = buffer != nullptr;
  buffer = std::move(b);
  dtype = t;
  if (!had && buffer) runtime::metrics().add_live_bytes(static_cast<int64_t>(nbytes));
}

StorageBuffer& storage_buffer(const c10::Storage& storage) {
  auto* sb = static_cast<StorageBuffer*>(storage.data_ptr().get_context());
  TORCH_CHECK(sb != nullptr, "tpu storage has no device buffer");
  return *sb;
}

StorageBuffer& storage_buffer(const at::Tensor& tensor) { return storage_buffer(tensor.storage()); }

namespace {

void delete_storage_buffer(void* ctx) {
  auto* sb = static_cast<StorageBuffer*>(ctx);
  if (sb->buffer) runtime::metrics().add_live_bytes(-static_cast<int64_t>(sb->nbytes));
  delete sb;
}

// Fake device addresses: monotonically increasing, 256-byte aligned, never
// reused, far from host memory.
std::atomic<uintptr_t> next_address{uintptr_t{1} << 44};

}  // namespace

c10::DataPtr TpuAllocator::allocate(size_t nbytes) {
  static std::atomic<uint64_t> next_id{1};
  auto* sb = new StorageBuffer();
  sb->id = next_id++;
  sb->nbytes = nbytes;
  sb->device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  uintptr_t addr = next_address.fetch_add(((nbytes + 255) / 256 + 1) * 256);
  return {reinterpret_cast<void*>(addr), sb, &delete_storage_buffer,
          c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(sb->device))};
}

void TpuAllocator::copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const {
  // Storage copies go through `_copy_from` on tensors; raw pointers here are
  // fake addresses and cannot be copied byte-wise.
  TORCH_CHECK(false, "tpu: raw device pointer copies are not supported; copy tensors instead");
}

TpuAllocator* allocator() {
  static TpuAllocator instance;
  return &instance;
}

}  // namespace torch_tpu::device
