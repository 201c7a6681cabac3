// PrivateUse1 hooks (generators, pointers, storage resize) and the allocator
// registration.
#include <ATen/ATen.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "device/generator.h"
#include "device/pinned_memory.h"
#include "device/storage_buffer.h"
#include "exec/tensor_program.h"
#include "runtime/device_runtime.h"
#include "runtime/view_layout.h"

namespace torch_tpu::device {

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try {
      return runtime::DeviceRuntime::get().device_count() > 0;
    } catch (...) {
      return false;
    }
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index < 0 ? static_cast<c10::DeviceIndex>(current_device()) : device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<TpuGeneratorImpl>(device_index < 0 ? static_cast<c10::DeviceIndex>(current_device())
                                                                 : device_index);
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return at::Device(at::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device()));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_memory_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    try {
      return static_cast<c10::DeviceIndex>(runtime::DeviceRuntime::get().device_count());
    } catch (...) {
      return 0;
    }
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->exchangeDevice(c10::Device(c10::DeviceType::PrivateUse1, device))
        .index();
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

}  // namespace

void register_hooks() {
  static TpuHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator());
  runtime::DeviceRuntime::get().set_before_sync([] {
    flush_deferred("sync");
    verify_range_checks();
  });
  runtime::DeviceRuntime::get().set_launch_deferred([] { flush_deferred("event"); });
  runtime::CompileCache::set_warning_handler([](const std::string& message) { TORCH_WARN(message); });
}

void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes) {
  // CPU's resize_bytes_cpu check, word for word: storage[a:b] and storages
  // over foreign memory are not resizable.
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  StorageBuffer& old_sb = storage_buffer(storage);
  if (new_nbytes == old_sb.nbytes) return;
  flush_if_pending_uses(old_sb, "resize");  // the old contents may still be pending, here
  settle_pending_writes(old_sb);            // or in another thread's program
  hlo::ElementType dtype;
  runtime::BufferPtr old_buffer = old_sb.current(&dtype);
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  c10::Device prev = guard.exchangeDevice(c10::Device(c10::DeviceType::PrivateUse1, old_sb.device));
  c10::DataPtr fresh = allocator()->allocate(new_nbytes);  // counted on the storage's own device
  guard.setDevice(prev);
  auto* sb = static_cast<StorageBuffer*>(fresh.get_context());
  if (old_buffer && new_nbytes > 0) {
    // New buffer = old bytes, cut or zero-padded to the new length; in the
    // old element type where it divides the new length, else as bytes.
    hlo::ElementType new_dtype = dtype;
    if (static_cast<int64_t>(new_nbytes) % hlo::byte_size(new_dtype) != 0) new_dtype = hlo::ElementType::U8;
    const int64_t old_n = static_cast<int64_t>(old_sb.nbytes) / hlo::byte_size(dtype);
    const int64_t new_n = static_cast<int64_t>(new_nbytes) / hlo::byte_size(new_dtype);
    hlo::Builder b;
    hlo::Value p = b.parameter({dtype, {old_n}});
    hlo::Value v = runtime::reinterpret_flat(b, p, new_dtype);
    const int64_t have = v.shape()[0];
    hlo::Value out =
        new_n <= have ? b.slice(v, {0}, {new_n}, {1}) : b.pad(v, b.constant(0, new_dtype), {0}, {new_n - have}, {0});
    ProgramLaunch l;
    l.device = old_sb.device;
    l.args = {old_buffer};
    l.targets = {{sb, new_dtype}};
    launch(*runtime::DeviceRuntime::get().executable(b.finish({out})), l);
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(new_nbytes);
}

}  // namespace torch_tpu::device
