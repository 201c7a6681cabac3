#include "device/program_profiler.h"

#include <map>
#include <memory>
#include <set>
#include <utility>

#include "device/registration.h"
#include "runtime/metrics.h"
#include "runtime/program_timeline.h"

// The CPU wheel is built with Kineto (torch.autograd.kineto_available()),
// but its headers guard the PrivateUse1 registry behind the build's macro.
#ifndef USE_KINETO
#define USE_KINETO 1
#endif
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

namespace torch_tpu::device {

namespace {

thread_local const char* flush_reason = nullptr;
thread_local std::string next_graph_name;
// The profiler's correlation ids of the host ops running on this thread
// (Kineto forwards them to its child profilers' sessions).
thread_local std::vector<uint64_t> host_ops;

const char* origin_name(ProgramOrigin origin) {
  switch (origin) {
    case ProgramOrigin::Compiled:
      return "compiled";
    case ProgramOrigin::DiskCache:
      return "disk cache";
    case ProgramOrigin::CacheHit:
      return "cache hit";
    case ProgramOrigin::Replayed:
      return "replayed";
  }
  return "";
}

// "aten::mm x2, aten::add.Tensor" in order of first appearance.
std::string op_list(const std::vector<std::string>& ops) {
  std::vector<std::string> order;
  std::map<std::string, int> count;
  for (const auto& op : ops) {
    if (!op.empty() && count[op]++ == 0) order.push_back(op);
  }
  std::string out;
  for (const auto& op : order) {
    if (!out.empty()) out += ", ";
    out += op;
    if (count[op] > 1) out += " x" + std::to_string(count[op]);
  }
  return out;
}

class TpuProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    runtime::timeline_start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    spans_ = runtime::timeline_stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t start,
                    int64_t end) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start, end, "tpu");
    buffer_->gpuOpCount = static_cast<int>(spans_.size());
    int32_t id = 0;
    for (const runtime::ProgramSpan& span : spans_) {
      // A kernel activity: the kind torch maps to the renamed PrivateUse1 device.
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL, span.name);
      libkineto::GenericTraceActivity& a = *buffer_->activities.back();
      a.startTime = span.start_ns;
      a.endTime = span.end_ns;
      a.device = span.device;
      a.resource = 0;
      a.id = ++id;
      if (linked && span.correlation) a.linked = linked(static_cast<int32_t>(span.correlation));
      for (const auto& [key, value] : span.details) a.addMetadataQuoted(key, value);
      a.addMetadataQuoted("bytes_in", std::to_string(span.bytes_in));
      a.addMetadataQuoted("bytes_out", std::to_string(span.bytes_out));
      a.addMetadataQuoted("queued_us", std::to_string((span.start_ns - span.launched_ns) / 1000));
      a.log(logger);
    }
    spans_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "tpu", "tpu 0"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  // Kineto keeps the activities logged above alive through the buffer.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { host_ops.push_back(id); }
  void popCorrelationId() override {
    if (!host_ops.empty()) host_ops.pop_back();
  }

 private:
  std::vector<runtime::ProgramSpan> spans_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& /*config*/) override {
    // Only a session that asked for tpu kernels (ProfilerActivity.PrivateUse1) records programs.
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<TpuProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"tpu"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

// The legacy autograd profiler's device hooks
// (torch.autograd.profiler.profile(use_device="tpu")), which raise
// "PrivateUse1 used in profiler but not enabled" unless a backend registers
// them. They time each op on the host from entry to exit: programs run
// asynchronously, so this is dispatch time; ProfilerActivity.PrivateUse1
// above gives device time.
class TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const int64_t now = runtime::timeline_clock_ns();
    if (device) *device = static_cast<c10::DeviceIndex>(get_current_device());
    if (cpu_ns) *cpu_ns = now;
    if (event) *event = std::make_shared<int64_t>(now);
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    const int64_t ns = *static_cast<const int64_t*>(end->get()) - *static_cast<const int64_t*>(start->get());
    return static_cast<float>(ns) / 1000.0f;  // microseconds, as CUDA's stubs
  }
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const int n = runtime::DeviceRuntime::get().device_count();
    for (int d = 0; d < n; ++d) op(d);
  }
  void synchronize() const override { runtime::DeviceRuntime::get().synchronize(-1); }
};

const bool stubs_registered = [] {
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace

bool programs_profiled() { return runtime::timeline_on(); }

ExecutableLookup::ExecutableLookup()
    : compiles_(runtime::metrics().compiles.load()), misses_(runtime::metrics().cache_misses.load()) {}

ProgramOrigin ExecutableLookup::origin() const {
  if (runtime::metrics().compiles.load() > compiles_) return ProgramOrigin::Compiled;
  if (runtime::metrics().cache_misses.load() > misses_) return ProgramOrigin::DiskCache;
  return ProgramOrigin::CacheHit;
}

void name_next_graph(std::string name) { next_graph_name = std::move(name); }

std::string take_graph_name() { return std::exchange(next_graph_name, std::string()); }

FlushReasonScope::FlushReasonScope(const char* reason) : previous_(flush_reason) { flush_reason = reason; }
FlushReasonScope::~FlushReasonScope() { flush_reason = previous_; }

const char* current_flush_reason() { return flush_reason; }

void profile_launch(const std::string& name, ProgramOrigin origin, const std::vector<std::string>* ops, int device,
                    int64_t launched_ns, int64_t bytes_in, const std::vector<runtime::BufferPtr>& results) {
  runtime::ProgramSpan span;
  // Apart from the host op of the same name in key_averages().
  span.name = "tpu " + name;
  span.device = device;
  span.launched_ns = launched_ns;
  span.bytes_in = bytes_in;
  span.correlation = host_ops.empty() ? 0 : host_ops.back();
  span.details.emplace_back("cache", origin_name(origin));
  if (flush_reason) span.details.emplace_back("cut", flush_reason);
  if (ops) {
    std::string list = op_list(*ops);
    if (!list.empty()) span.details.emplace_back("ops", std::move(list));
  }
  for (const auto& r : results) span.bytes_out += static_cast<int64_t>(r->on_device_size());
  runtime::timeline_record(std::move(span), results.empty() ? nullptr : results.back().get());
}

}  // namespace torch_tpu::device
