#include "storage_buffer.h"

#include <atomic>

namespace torch_tpu::device {

using hlo::ElementType;

hlo::ElementType element_type(at::ScalarType t) {
  switch (t) {
    case at::kBool:
      return ElementType::Pred;
    case at::kChar:
      return ElementType::S8;
    case at::kShort:
      return ElementType::S16;
    case at::kInt:
      return ElementType::S32;
    case at::kLong:
      return ElementType::S64;
    case at::kByte:
      return ElementType::U8;
    case at::kUInt16:
      return ElementType::U16;
    case at::kUInt32:
      return ElementType::U32;
    case at::kUInt64:
      return ElementType::U64;
    case at::kHalf:
      return ElementType::F16;
    case at::kBFloat16:
      return ElementType::BF16;
    case at::kFloat:
      return ElementType::F32;
    case at::kDouble:
      return ElementType::F64;
    case at::kComplexFloat:
      return ElementType::C64;
    case at::kComplexDouble:
      return ElementType::C128;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

at::ScalarType scalar_type(hlo::ElementType t) {
  switch (t) {
    case ElementType::Pred:
      return at::kBool;
    case ElementType::S8:
      return at::kChar;
    case ElementType::S16:
      return at::kShort;
    case ElementType::S32:
      return at::kInt;
    case ElementType::S64:
      return at::kLong;
    case ElementType::U8:
      return at::kByte;
    case ElementType::U16:
      return at::kUInt16;
    case ElementType::U32:
      return at::kUInt32;
    case ElementType::U64:
      return at::kUInt64;
    case ElementType::F16:
      return at::kHalf;
    case ElementType::BF16:
      return at::kBFloat16;
    case ElementType::F32:
      return at::kFloat;
    case ElementType::F64:
      return at::kDouble;
    case ElementType::C64:
      return at::kComplexFloat;
    case ElementType::C128:
      return at::kComplexDouble;
  }
  return at::kFloat;
}

PJRT_Buffer_Type pjrt_type(hlo::ElementType t) {
  switch (t) {
    case ElementType::Pred:
      return PJRT_Buffer_Type_PRED;
    case ElementType::S8:
      return PJRT_Buffer_Type_S8;
    case ElementType::S16:
      return PJRT_Buffer_Type_S16;
    case ElementType::S32:
      return PJRT_Buffer_Type_S32;
    case ElementType::S64:
      return PJRT_Buffer_Type_S64;
    case ElementType::U8:
      return PJRT_Buffer_Type_U8;
    case ElementType::U16:
      return PJRT_Buffer_Type_U16;
    case ElementType::U32:
      return PJRT_Buffer_Type_U32;
    case ElementType::U64:
      return PJRT_Buffer_Type_U64;
    case ElementType::F16:
      return PJRT_Buffer_Type_F16;
    case ElementType::BF16:
      return PJRT_Buffer_Type_BF16;
    case ElementType::F32:
      return PJRT_Buffer_Type_F32;
    case ElementType::F64:
      return PJRT_Buffer_Type_F64;
    case ElementType::C64:
      return PJRT_Buffer_Type_C64;
    case ElementType::C128:
      return PJRT_Buffer_Type_C128;
  }
  return PJRT_Buffer_Type_INVALID;
}

namespace {

// Bytes of live storages that hold no buffer yet (torch.empty, outputs of
// pending DeferAndFuse programs): promised, but not yet taken from the host.
std::atomic<int64_t> bytes_without_buffer{0};

}  // namespace

std::recursive_mutex& buffers_mutex() {
  static auto* m = new std::recursive_mutex();  // never destroyed: storages die at exit
  return *m;
}

runtime::BufferPtr StorageBuffer::current(hlo::ElementType* element_type) const {
  std::lock_guard<std::recursive_mutex> lock(buffers_mutex());
  raise_if_lost();
  if (element_type) *element_type = dtype;
  return buffer;
}

void StorageBuffer::set(runtime::BufferPtr b, hlo::ElementType t) {
  std::lock_guard<std::recursive_mutex> lock(buffers_mutex());
  if ((buffer == nullptr) != (b == nullptr)) {
    bytes_without_buffer.fetch_add(b ? -static_cast<int64_t>(nbytes) : static_cast<int64_t>(nbytes),
                                   std::memory_order_relaxed);
  }
  buffer = std::move(b);
  dtype = t;
  lost.reset();  // a value written whole replaces what was lost
}

void StorageBuffer::raise_if_lost() const {
  TORCH_CHECK(!lost, "tpu: this tensor has no value: the deferred program that was to compute it failed (", *lost,
              "). Compute it again.");
}

namespace {

void delete_storage_buffer(void* ctx);

// Every live storage, with its (fake) address: PyTorch code that wraps a
// device pointer in a tensor of its own (at::from_blob, as the legacy
// serializer's storage._write_file does) finds the storage it points at, and
// a memory snapshot lists them. A list threaded through the storages, not a
// map: making and freeing a storage (every op's output) then allocates
// nothing beyond the storage itself, where two hash maps cost two node
// allocations, two frees and four hash operations per op. Finding a storage
// by address walks the list; only a foreign data pointer (from_blob) asks,
// never an op's own storage.
struct LiveStorage : StorageBuffer {
  uintptr_t address = 0;
  LiveStorage* prev = nullptr;
  LiveStorage* next = nullptr;
};

struct LiveStorages {
  std::mutex mutex;
  LiveStorage* head = nullptr;  // under mutex

  void link(LiveStorage* s) {
    s->next = head;
    if (head) head->prev = s;
    head = s;
  }
  void unlink(LiveStorage* s) {
    (s->prev ? s->prev->next : head) = s->next;
    if (s->next) s->next->prev = s->prev;
  }
};

LiveStorages& live_storages() {
  static auto* l = new LiveStorages();  // never destroyed: storages die at exit
  return *l;
}

}  // namespace

namespace {
std::atomic<c10::DeleterFnPtr> storage_slice_deleter{nullptr};
}  // namespace

void learn_storage_slice_deleter(const at::Tensor& over_cpu_slice) {
  const c10::DataPtr& ptr = over_cpu_slice.storage().data_ptr();
  TORCH_CHECK(ptr.get_context() != nullptr && ptr.get_deleter() != nullptr,
              "learn_storage_slice_deleter: expected a tensor over a storage made by storage[a:b]");
  storage_slice_deleter.store(ptr.get_deleter());
}

std::optional<StorageSlice> storage_slice_root(const c10::Storage& storage) {
  const c10::DeleterFnPtr slice_deleter = storage_slice_deleter.load();
  if (slice_deleter == nullptr || !storage) return std::nullopt;
  const c10::DataPtr& ptr = storage.data_ptr();
  if (ptr.get_deleter() != slice_deleter) return std::nullopt;
  // The deleter is PyTorch's slice deleter, so the context is the parent
  // StorageImpl (which that deleter decrefs); a slice of a slice walks up.
  auto parent = c10::Storage(
      c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(static_cast<c10::StorageImpl*>(ptr.get_context())));
  if (parent.device_type() != c10::DeviceType::PrivateUse1) return std::nullopt;
  StorageSlice slice;
  if (auto grand = storage_slice_root(parent)) {
    slice = *grand;
  } else {
    if (parent.data_ptr().get_deleter() != &delete_storage_buffer) return std::nullopt;
    slice.root = parent;
  }
  const auto at = reinterpret_cast<uintptr_t>(ptr.get());
  const auto base = reinterpret_cast<uintptr_t>(parent.data_ptr().get());
  TORCH_INTERNAL_ASSERT(at >= base && at - base + storage.nbytes() <= parent.nbytes(),
                        "tpu: a storage slice outside its parent storage");
  slice.byte_offset += at - base;
  return slice;
}

StorageBuffer& storage_buffer(const c10::Storage& storage) {
  const c10::DataPtr& ptr = storage.data_ptr();
  if (ptr.get_deleter() == &delete_storage_buffer) return *static_cast<StorageBuffer*>(ptr.get_context());
  StorageBuffer* sb = nullptr;
  if (ptr.get() != nullptr) {
    LiveStorages& live = live_storages();
    std::lock_guard<std::mutex> lock(live.mutex);
    const auto address = reinterpret_cast<uintptr_t>(ptr.get());
    for (LiveStorage* s = live.head; s != nullptr && sb == nullptr; s = s->next) {
      if (s->address == address) sb = s;
    }
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      sb != nullptr || ptr.get() == nullptr || storage.nbytes() == 0,
      "tpu: this storage points into another storage's memory (a slice, storage[a:b]) and reached an op "
      "directly; device buffers cannot be aliased by address. Make a tensor over it first "
      "(torch.tensor([], dtype=torch.uint8, device='tpu').set_(storage)), which aliases the parent's bytes");
  TORCH_CHECK(sb != nullptr, "tpu storage has no device buffer");
  // The same address and size: the same bytes (a from_blob wrapper of the whole storage).
  TORCH_CHECK_NOT_IMPLEMENTED(
      storage.nbytes() == sb->nbytes, "tpu: this storage covers ", storage.nbytes(), " of the ", sb->nbytes,
      " bytes of the storage it points into (a slice, storage[a:b]); device buffers cannot be aliased "
      "by address. Slice a tensor over the storage instead "
      "(torch.tensor([], dtype=torch.uint8, device='tpu').set_(storage)[a:b])");
  return *sb;
}

StorageBuffer& storage_buffer(const at::Tensor& tensor) { return storage_buffer(tensor.storage()); }

namespace {

void delete_storage_buffer(void* ctx) {
  // A child forked after the plugin started leaks what it inherited: the
  // buffers belong to the parent's plugin, whose threads (and whatever
  // they held locked) fork did not copy, and a lock here may have been
  // held by a parent thread at the fork.
  if (runtime::DeviceRuntime::in_bad_fork()) return;
  // Every StorageBuffer with this deleter was made by new_storage_buffer.
  auto* sb = static_cast<LiveStorage*>(static_cast<StorageBuffer*>(ctx));
  if (!sb->buffer) bytes_without_buffer.fetch_sub(static_cast<int64_t>(sb->nbytes), std::memory_order_relaxed);
  {
    LiveStorages& live = live_storages();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.unlink(sb);
  }
  release_device_bytes(sb->device, sb->nbytes, sb->address);
  delete sb;
}

// Fake device addresses: monotonically increasing, 256-byte aligned, never
// reused, far from host memory.
std::atomic<uintptr_t> next_address{uintptr_t{1} << 44};

}  // namespace

c10::DataPtr new_storage_buffer(int device, size_t nbytes, std::shared_ptr<c10::GatheredContext> allocated_by) {
  static std::atomic<uint64_t> next_id{1};
  auto* sb = new LiveStorage();
  sb->id = next_id++;
  sb->nbytes = nbytes;
  sb->device = device;
  sb->allocated_by = std::move(allocated_by);
  bytes_without_buffer.fetch_add(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  sb->address = next_address.fetch_add(((nbytes + 255) / 256 + 1) * 256);
  {
    LiveStorages& live = live_storages();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.link(sb);
  }
  return {reinterpret_cast<void*>(sb->address), static_cast<StorageBuffer*>(sb), &delete_storage_buffer,
          c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(sb->device))};
}

int64_t bytes_awaiting_buffers() { return bytes_without_buffer.load(std::memory_order_relaxed); }

void for_each_live_storage(const std::function<void(const StorageBuffer&, uintptr_t address)>& f) {
  LiveStorages& live = live_storages();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const LiveStorage* s = live.head; s != nullptr; s = s->next) f(*s, s->address);
}

}  // namespace torch_tpu::device
