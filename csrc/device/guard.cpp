// The PrivateUse1 device guard: current device per thread, one in-order
// stream per device (PJRT orders work by data dependencies), events that
// mark "everything launched so far".
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/device_runtime.h"

namespace torch_tpu::device {

namespace {

thread_local c10::DeviceIndex current_index = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A recorded event: the programs launched on its device before it (the
// calling thread's deferred ones launched first) that had not finished.
// It is complete when they are. With timing (enable_timing=True), when
// that happened: the last of them calls back from the plugin as it
// finishes, as CUDA's event takes the time when the stream reaches it.
struct TpuEvent {
  std::mutex mutex;
  std::vector<std::shared_ptr<pjrt::Event>> unfinished;
  struct Timing {
    std::atomic<int> remaining{0};
    std::atomic<int64_t> done_ns{0};
  };
  std::shared_ptr<Timing> timing;  // with enable_timing only

  void record(int device, bool timed) {
    auto work = runtime::DeviceRuntime::get().unfinished_work(device);
    std::shared_ptr<Timing> t;
    if (timed) {
      t = std::make_shared<Timing>();
      if (work.empty()) {
        t->done_ns = now_ns();
      } else {
        t->remaining = static_cast<int>(work.size());
        for (const auto& e : work) {
          e->on_ready([t] {
            if (t->remaining.fetch_sub(1) == 1) t->done_ns = now_ns();
          });
        }
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    unfinished = std::move(work);
    timing = std::move(t);
  }
  bool query() {
    std::lock_guard<std::mutex> lock(mutex);
    pjrt::drop_ready(unfinished);
    return unfinished.empty() && (!timing || timing->done_ns.load() != 0);
  }
  void synchronize() {
    std::vector<std::shared_ptr<pjrt::Event>> work;
    {
      std::lock_guard<std::mutex> lock(mutex);
      work = unfinished;
    }
    for (const auto& e : work) e->await();
    // The timing callbacks may run just after the events are ready.
    while (!query()) std::this_thread::yield();
  }
};

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
  // Events. Work on one stream is ordered by its data, so an event that
  // another stream waits for (block) is already honoured.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ", device_index,
                " does not match recording stream's device index ", stream.device_index(), ".");
    if (*event == nullptr) *event = new TpuEvent();
    // BACKEND_DEFAULT is what enable_timing=True asks for.
    static_cast<TpuEvent*>(*event)->record(stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT);
  }
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* event) const override { return event == nullptr || static_cast<TpuEvent*>(event)->query(); }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) static_cast<TpuEvent*>(event)->synchronize();
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    // c10::Event checked that both were recorded with timing and are complete.
    auto* a = static_cast<TpuEvent*>(start);
    auto* b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && b && a->timing && b->timing, "Both events must be created with argument 'enable_timing=True'.");
    return static_cast<double>(b->timing->done_ns.load() - a->timing->done_ns.load()) / 1e6;
  }
  bool queryStream(const c10::Stream& stream) const override {
    return runtime::DeviceRuntime::get().unfinished_work(stream.device_index()).empty();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    runtime::DeviceRuntime::get().synchronize(stream.device_index());
  }
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
