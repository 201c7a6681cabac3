// The process-wide runtime: the loaded plugin, its client, the compilation
// cache, and running programs. Knows hlo text and pjrt; not torch.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pjrt/pjrt_runtime.h"
#include "runtime/compile_cache.h"

namespace torch_tpu::runtime {

using pjrt::Buffer;
using BufferPtr = std::shared_ptr<pjrt::Buffer>;

class DeviceRuntime {
 public:
  // Every use of the device passes here (ops, allocation, copies, sync), so
  // here a child forked after this process started the plugin raises, as
  // CUDA does, instead of waiting forever on the plugin's threads, which
  // fork did not copy.
  static DeviceRuntime& get();
  // True in such a child. Storages it inherited are leaked, never released
  // through the plugin (torch.tpu._is_in_bad_fork).
  static bool in_bad_fork();

  // Set by Python before first use: which plugin, how many CPU devices.
  // `error` (non-empty) is raised at first use instead of loading.
  void configure(const std::string& plugin_path, int num_devices, const std::string& error);
  bool initialized() const { return client_ != nullptr; }
  pjrt::Client& client();  // loads the plugin on first use
  int device_count();
  std::string plugin_path() const { return plugin_path_; }

  // Host to device; the host bytes may be reused once this returns. Up to
  // kQueuedUploadBytes go through the launch queue, as a launch does: the
  // buffer exists once the queue's thread made it.
  BufferPtr upload(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims, int device);
  static constexpr size_t kQueuedUploadBytes = 64, kQueuedUploadRank = 4;
  // The same for a value of up to pjrt::HostValue::kMaxBytes that one launch
  // reads and nothing keeps (a changing Python number, an RNG state): with the
  // launch queue on, each queued launch reading it uploads it in its own job,
  // so the value costs the dispatching thread no plugin call, job or release.
  // A value read many times (a cached view offset) is upload()'s: this one
  // would be uploaded again by every launch.
  BufferPtr upload_for_launch(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims, int device);
  // Device-to-host copies for one wait: every copy starts before the host
  // waits for any, so they cost one round trip, not one each. Raises the
  // first copy's error after every started copy has finished writing.
  struct HostCopy {
    const Buffer* buffer;
    void* dst;
    size_t nbytes;
  };
  void download(const std::vector<HostCopy>& copies);
  // Compiles (or finds) `text`, runs it on `device` without waiting.
  std::vector<BufferPtr> run(const std::string& text, int device, const std::vector<BufferPtr>& args,
                             const std::vector<bool>& donatable);
  // The same in two steps, for callers that keep the executable (replayed
  // graph programs skip hashing their text on every call).
  std::shared_ptr<pjrt::LoadedExecutable> executable(const std::string& text);
  // A program replicated over `devices` (device indices, in replica order):
  // compiled with that device assignment (pjrt::replicated_compile_options).
  std::shared_ptr<pjrt::LoadedExecutable> replicated_executable(const std::string& text,
                                                                const std::vector<int64_t>& devices);
  // `launch_id` pairs the launches of one replicated program's replicas.
  std::vector<BufferPtr> run(pjrt::LoadedExecutable& exe, int device, const std::vector<BufferPtr>& args,
                             const std::vector<bool>& donatable, int launch_id = 0);
  // The same through the launch queue (pjrt/launch_queue.h): returns the
  // outputs at once, as buffers that exist once the queue's thread launched
  // the program (it takes the arguments). Synchronous where the queue is off.
  // `injected_failure` (tests): the job fails with it instead of executing.
  std::vector<BufferPtr> run_queued(pjrt::LoadedExecutable& exe, int device, std::vector<BufferPtr>&& args,
                                    std::vector<bool>&& donatable, std::string injected_failure = {});
  // Whether run_queued queues (the launch queue is on and running).
  static bool launches_queued();
  CompileCache& cache() { return cache_; }
  // Runs before every synchronize (DeferAndFuse flushes its pending programs).
  void set_before_sync(std::function<void()> hook) { before_sync_ = std::move(hook); }
  // Launches the calling thread's deferred work (DeferAndFuse's pending
  // programs), waiting for nothing.
  void set_launch_deferred(std::function<void()> hook) { launch_deferred_ = std::move(hook); }
  // Waits for every buffer produced so far on `device` (-1: all); raises
  // the first launch of that device that failed on the queue since.
  void synchronize(int device);
  // What stream and event queries ask: the calling thread's deferred work
  // launched, the programs launched on `device` so far that have not finished.
  std::vector<std::shared_ptr<pjrt::Event>> unfinished_work(int device);
  // Waits for programs already launched, launching nothing (at exit: the
  // plugin's threads must be idle before its static objects are destroyed).
  void wait_in_flight();

 private:
  // Lists `event` (work launched on `device` finishing) for synchronize().
  void note_pending(int device, std::shared_ptr<pjrt::Event> event);
  // The plugin's execute into `outputs` (exe.num_outputs() of them, owned
  // by the caller), then the bookkeeping of the program left running:
  // `donated` (the donated arguments' Buffers) are kept until it finished.
  void execute(pjrt::LoadedExecutable& exe, int device, PJRT_Buffer* const* args, size_t num_args,
               const std::vector<bool>& donatable, std::vector<BufferPtr>&& donated, int launch_id,
               PJRT_Buffer** outputs);
  // A queued job (launch or upload) failed with `what`: every use of its
  // results raises, and so does the next synchronize of `device`, once.
  void record_queued_failure(pjrt::QueuedOutputs& queued, int device, const std::string& what);
  // Returns once every launch queued so far has reached the plugin.
  static void wait_for_queued_launches();
  void wait_for(int device);
  std::mutex mutex_;
  std::string plugin_path_, config_error_;
  int num_devices_ = 1;
  std::shared_ptr<pjrt::Client> client_;
  CompileCache cache_;
  std::string platform_identity_;  // platform, version and XLA version: part of every cache key
  std::function<void()> before_sync_, launch_deferred_;
  std::string compile_options_ = pjrt::default_compile_options();
  // Per device, since the last sync: when each launched program's last
  // output is ready. Events, not buffers: another thread may donate a
  // buffer to its next program before this one is synchronized.
  std::vector<std::vector<std::shared_ptr<pjrt::Event>>> pending_outputs_;
  // Buffers a launched program took as donations, kept until it finishes:
  // the plugin's destroy of a donated buffer waits for the program that
  // consumed it (XLA:CPU's does), so dropping one at launch made every
  // in-place op's launch wait for the op. In launch order; released once
  // their program's event is ready (at the next launch or a wait), never by
  // a thread holding mutex_.
  struct DonatedUntilDone {
    std::shared_ptr<pjrt::Event> done;
    std::vector<BufferPtr> buffers;
  };
  std::deque<DonatedUntilDone> donated_until_done_;
  // Queued launches that failed (device, the plugin's error), under mutex_:
  // the next synchronize of their device raises the first.
  std::vector<std::pair<int, std::string>> launch_failures_;
  std::mutex donated_mutex_;
  // Takes out the entries whose program finished (all, when `all`).
  std::vector<BufferPtr> take_finished_donations(bool all);
};

}  // namespace torch_tpu::runtime
