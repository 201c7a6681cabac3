// The PrivateUse1 device guard: current device per thread, one in-order
// stream per device (PJRT orders work by data dependencies), events that
// mark "everything launched so far".
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/device_runtime.h"

namespace torch_tpu::device {

namespace {

thread_local c10::DeviceIndex current_index = 0;

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_index); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "expected a tpu device, got ", d);
    if (d.index() >= 0) current_index = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_index = d.index();
  }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(runtime::DeviceRuntime::get().device_count());
    } catch (...) {
      return 0;  // no plugin: no devices (this must not throw)
    }
  }
  // Events: work on one stream is ordered, so an event needs no state.
  void record(void** /*event*/, const c10::Stream& /*stream*/, const c10::DeviceIndex /*device_index*/,
              const c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* /*event*/, const c10::DeviceIndex /*device_index*/) const noexcept override {}
  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override {
    runtime::DeviceRuntime::get().synchronize(stream.device_index());
  }
  void synchronizeEvent(void* /*event*/) const override { runtime::DeviceRuntime::get().synchronize(-1); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    runtime::DeviceRuntime::get().synchronize(device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

void set_current_device(int index) { current_index = static_cast<c10::DeviceIndex>(index); }
int get_current_device() { return current_index; }

}  // namespace torch_tpu::device
