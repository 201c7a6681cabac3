#include "device_runtime.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unordered_set>

#include "metrics.h"
#include "pjrt/launch_queue.h"

namespace torch_tpu::runtime {

namespace {

// Path, size and modification time of the plugin file: two builds that call
// themselves the same platform and version still get separate cache entries.
std::string plugin_file_identity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return path;
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
}

// Set in a child forked after the client was created (pthread_atfork runs
// the handler in the child, single-threaded, before fork returns there).
std::atomic<bool> forked_after_start{false};

void mark_forked_child() { forked_after_start.store(true, std::memory_order_relaxed); }

// PJRT buffer pointers for one launch (its arguments or outputs): on the
// stack for a small program, since a launch runs once per op.
class RawBufferList {
 public:
  explicit RawBufferList(size_t n) {
    if (n > kOnStack) heap_.assign(n, nullptr);
    data_ = n > kOnStack ? heap_.data() : stack_;
  }
  RawBufferList(const RawBufferList&) = delete;
  RawBufferList& operator=(const RawBufferList&) = delete;
  PJRT_Buffer** data() { return data_; }
  PJRT_Buffer*& operator[](size_t i) { return data_[i]; }

 private:
  static constexpr size_t kOnStack = 16;
  PJRT_Buffer* stack_[kOnStack] = {};
  std::vector<PJRT_Buffer*> heap_;
  PJRT_Buffer** data_ = nullptr;
};

// Bytes of a host array of `type` and `dims`; 0 where an element is not
// whole bytes.
size_t host_bytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  size_t nbytes = pjrt::byte_width(type);
  for (int64_t d : dims) nbytes *= static_cast<size_t>(std::max<int64_t>(d, 0));
  return nbytes;
}

[[noreturn]] void raise_in_forked_child() {
  throw std::runtime_error(
      "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use the 'spawn' "
      "start method");
}

}  // namespace

DeviceRuntime& DeviceRuntime::get() {
  // Leaked on purpose: buffers may be released during interpreter shutdown,
  // after static destructors would have torn the client down.
  static DeviceRuntime* runtime = new DeviceRuntime();
  if (forked_after_start.load(std::memory_order_relaxed)) raise_in_forked_child();
  return *runtime;
}

bool DeviceRuntime::in_bad_fork() { return forked_after_start.load(std::memory_order_relaxed); }

void DeviceRuntime::configure(const std::string& plugin_path, int num_devices, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (client_) return;  // already running: configuration is fixed
  plugin_path_ = plugin_path;
  num_devices_ = num_devices;
  config_error_ = error;
}

pjrt::Client& DeviceRuntime::client() {
  if (client_) return *client_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!client_) {
    if (!config_error_.empty()) throw pjrt::PjrtError(config_error_);
    if (plugin_path_.empty()) throw pjrt::PjrtError("torch_tpu: no PJRT plugin configured (import torch_tpu first)");
    auto plugin = pjrt::Plugin::load(plugin_path_);
    pjrt::Client::Options options;
    options.cpu_device_count = num_devices_;
    client_ = pjrt::Client::create(plugin, options);
    auto attr = plugin->attributes().find("xla_version");
    platform_identity_ = client_->platform_name() + " " + client_->platform_version() + " xla " +
                         (attr == plugin->attributes().end() ? "?" : attr->second) + " pjrt " +
                         std::to_string(plugin->api_major()) + "." + std::to_string(plugin->api_minor()) + " " +
                         std::to_string(client_->devices().size()) + " devices " + plugin_file_identity(plugin_path_);
    pending_outputs_.resize(client_->devices().size());
    // A child forked before this point starts its own client; one forked
    // after it holds this one's state without the threads that serve it.
    static std::once_flag at_fork;
    std::call_once(at_fork, [] { pthread_atfork(nullptr, nullptr, &mark_forked_child); });
  }
  return *client_;
}

int DeviceRuntime::device_count() { return static_cast<int>(client().devices().size()); }

BufferPtr DeviceRuntime::upload(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims, int device) {
  auto& c = client();
  auto& queue = pjrt::LaunchQueue::get();
  const size_t nbytes = host_bytes(type, dims);  // 0: not whole bytes, so not queued
  if (!queue.active() || nbytes == 0 || nbytes > kQueuedUploadBytes || dims.size() > kQueuedUploadRank) {
    return c.buffer_from_host(data, type, dims, device);
  }
  // A number or a few (a changing float, an RNG state, a view's offset):
  // the plugin's host-to-device call costs the caller about 5 us on
  // XLA:CPU, more than the op's launch, so the queue's thread makes it
  // from a copy of the bytes, in order before the launches that read it.
  auto queued = std::make_shared<pjrt::QueuedOutputs>(c.plugin(), 1);
  struct Upload {
    std::array<uint8_t, kQueuedUploadBytes> bytes;
    std::array<int64_t, kQueuedUploadRank> dims;
    size_t num_dims;
  };
  Upload upload;  // in the job itself: one allocation, the job's
  std::memcpy(upload.bytes.data(), data, nbytes);
  std::copy(dims.begin(), dims.end(), upload.dims.begin());
  upload.num_dims = dims.size();
  queued->ticket = queue.push([this, upload, type, device, queued] {
    try {
      queued->buffers[0] = client_->raw_buffer_from_host(upload.bytes.data(), type, upload.dims.data(), upload.num_dims,
                                                         static_cast<size_t>(device));
    } catch (const std::exception& e) {
      record_queued_failure(*queued, device, e.what());
    }
  });
  return std::make_shared<Buffer>(client_, queued, 0);
}

BufferPtr DeviceRuntime::upload_for_launch(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                                           int device) {
  client();  // loads the plugin on first use
  const size_t nbytes = host_bytes(type, dims);
  if (!pjrt::LaunchQueue::get().active() || nbytes == 0 || nbytes > pjrt::HostValue::kMaxBytes ||
      dims.size() > pjrt::HostValue::kMaxRank) {
    return upload(data, type, dims, device);
  }
  pjrt::HostValue value;
  std::memcpy(value.bytes.data(), data, nbytes);
  value.type = type;
  std::copy(dims.begin(), dims.end(), value.dims.begin());
  value.num_dims = dims.size();
  value.device = static_cast<size_t>(device);
  return std::make_shared<Buffer>(client_, value);
}

void DeviceRuntime::download(const std::vector<HostCopy>& copies) {
  if (copies.empty()) return;
  metrics().host_waits++;
  std::vector<std::unique_ptr<pjrt::Event>> started;
  started.reserve(copies.size());
  std::exception_ptr start_error, error;
  for (const HostCopy& c : copies) {
    try {
      started.push_back(c.buffer->start_to_host(c.dst, c.nbytes));
    } catch (...) {
      start_error = std::current_exception();  // the copies after it are not started
      break;
    }
    metrics().bytes_to_host += static_cast<int64_t>(c.nbytes);
  }
  // Every started copy is awaited, failed or not: each writes its
  // destination until it is ready.
  for (const auto& event : started) {
    try {
      event->await();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);  // an earlier copy's than start_error's
  if (start_error) std::rethrow_exception(start_error);
}

std::shared_ptr<pjrt::LoadedExecutable> DeviceRuntime::executable(const std::string& text) {
  return cache_.get_or_compile(client(), platform_identity_, text, compile_options_);
}

std::vector<BufferPtr> DeviceRuntime::run(const std::string& text, int device, const std::vector<BufferPtr>& args,
                                          const std::vector<bool>& donatable) {
  return run(*executable(text), device, args, donatable);
}

std::shared_ptr<pjrt::LoadedExecutable> DeviceRuntime::replicated_executable(const std::string& text,
                                                                             const std::vector<int64_t>& devices) {
  auto& c = client();
  std::vector<int64_t> ids;
  for (int64_t d : devices) ids.push_back(c.device_id(static_cast<size_t>(d)));
  // One compile at a time, so the ranks of this process that miss the cache
  // together still share one executable: collectives without a channel
  // (all_to_all) pair their launches by the executable's instruction ids.
  static std::mutex one_compile;
  std::lock_guard<std::mutex> lock(one_compile);
  return cache_.get_or_compile(c, platform_identity_, text, pjrt::replicated_compile_options(ids));
}

std::vector<BufferPtr> DeviceRuntime::run(pjrt::LoadedExecutable& exe, int device, const std::vector<BufferPtr>& args,
                                          const std::vector<bool>& donatable, int launch_id) {
  client();  // started: client_ is set
  metrics().programs_executed++;
  RawBufferList raw(exe.num_outputs()), raw_args(args.size());
  for (size_t i = 0; i < args.size(); ++i) raw_args[i] = args[i]->raw();
  std::vector<BufferPtr> donated;
  for (size_t i = 0; i < args.size() && i < donatable.size(); ++i) {
    if (donatable[i]) donated.push_back(args[i]);
  }
  execute(exe, device, raw_args.data(), args.size(), donatable, std::move(donated), launch_id, raw.data());
  std::vector<BufferPtr> outputs;
  outputs.reserve(exe.num_outputs());
  for (size_t k = 0; k < exe.num_outputs(); ++k) outputs.push_back(std::make_shared<Buffer>(client_, raw[k]));
  return outputs;
}

bool DeviceRuntime::launches_queued() { return pjrt::LaunchQueue::get().active(); }

std::vector<BufferPtr> DeviceRuntime::run_queued(pjrt::LoadedExecutable& exe, int device, std::vector<BufferPtr>&& args,
                                                 std::vector<bool>&& donatable, std::string injected_failure) {
  auto& queue = pjrt::LaunchQueue::get();
  if (!queue.active()) {
    if (!injected_failure.empty()) throw pjrt::PjrtError(injected_failure);
    return run(exe, device, args, donatable);
  }
  auto& c = client();
  metrics().programs_executed++;  // counted at the launch, as a synchronous one is
  auto queued = std::make_shared<pjrt::QueuedOutputs>(c.plugin(), exe.num_outputs());
  std::vector<BufferPtr> outputs;
  outputs.reserve(exe.num_outputs());
  for (size_t k = 0; k < exe.num_outputs(); ++k) outputs.push_back(std::make_shared<Buffer>(client_, queued, k));
  // The job holds the executable, each argument's PJRT buffer (not its
  // Buffer: a later op deciding whether it may donate a buffer must not
  // count a launch waiting in the queue as a holder) and the donated
  // arguments' Buffers, which nothing else holds and which are kept until
  // their program finished. A launch that fails leaves its error for every
  // use of its outputs, as CUDA reports a kernel's error at a later call; a
  // program reading such an output fails with the same error.
  std::vector<pjrt::QueuedArgument> arguments(args.size());
  std::vector<BufferPtr> donated;
  for (size_t i = 0; i < args.size(); ++i) {
    arguments[i] = args[i]->as_queued_argument();
    if (i < donatable.size() && donatable[i]) donated.push_back(std::move(args[i]));
  }
  // `args` holds the others until the job is queued: a Buffer released
  // sooner would queue its release ahead of the job that reads it.
  queued->ticket = queue.push([this, exe = exe.shared_from_this(), device, arguments = std::move(arguments),
                               donatable = std::move(donatable), donated = std::move(donated), queued,
                               failure = std::move(injected_failure)]() mutable {
    try {
      if (!failure.empty()) throw pjrt::PjrtError(failure);
      RawBufferList raw(arguments.size());
      pjrt::LaunchUploads uploads(*client_);
      for (size_t i = 0; i < arguments.size(); ++i) raw[i] = uploads.get(arguments[i]);
      execute(*exe, device, raw.data(), arguments.size(), donatable, std::move(donated), /*launch_id=*/0,
              queued->buffers.data());
    } catch (const std::exception& e) {
      record_queued_failure(*queued, device, e.what());
    }
  });
  return outputs;
}

void DeviceRuntime::record_queued_failure(pjrt::QueuedOutputs& queued, int device, const std::string& what) {
  static const std::string kPrefix =
      "tpu: a program launched earlier failed on the device, and this use of its results raises "
      "(TORCH_TPU_LAUNCH_BLOCKING=1 raises at the op that launched it): ";
  const bool consequence = what.rfind(kPrefix, 0) == 0;  // an argument's launch failed first
  {
    std::lock_guard<std::mutex> lock(queued.mutex);
    queued.error = consequence ? what : kPrefix + what;
  }
  if (!consequence) {
    std::lock_guard<std::mutex> lock(mutex_);
    launch_failures_.emplace_back(device, what);
  }
}

void DeviceRuntime::execute(pjrt::LoadedExecutable& exe, int device, PJRT_Buffer* const* args, size_t num_args,
                            const std::vector<bool>& donatable, std::vector<BufferPtr>&& donated, int launch_id,
                            PJRT_Buffer** outputs) {
  auto& c = client();
  std::shared_ptr<pjrt::Event> done;
  exe.execute_into(c.devices().at(device), args, num_args, donatable, launch_id, outputs, &done);
  // Without a completion event, the last output is ready when the program is
  // done (its event taken now, while this thread alone holds the fresh buffer).
  if (!done && exe.num_outputs() > 0) done = Buffer::ready_event_of(c.plugin(), outputs[exe.num_outputs() - 1]);
  if (!done) return;
  note_pending(device, done);
  // Destroyed when this returns, outside the lock: their programs are done.
  const std::vector<BufferPtr> finished = take_finished_donations(/*all=*/false);
  if (!donated.empty()) {
    std::lock_guard<std::mutex> lock(donated_mutex_);
    donated_until_done_.push_back(DonatedUntilDone{done, std::move(donated)});
  }
}

std::vector<BufferPtr> DeviceRuntime::take_finished_donations(bool all) {
  std::vector<BufferPtr> finished;
  std::lock_guard<std::mutex> lock(donated_mutex_);
  for (auto it = donated_until_done_.begin(); it != donated_until_done_.end();) {
    if (all || it->done->is_ready()) {
      for (auto& b : it->buffers) finished.push_back(std::move(b));
      it = donated_until_done_.erase(it);
    } else {
      ++it;
    }
  }
  return finished;
}

void DeviceRuntime::note_pending(int device, std::shared_ptr<pjrt::Event> event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || static_cast<size_t>(device) >= pending_outputs_.size()) return;
  auto& list = pending_outputs_[device];
  list.push_back(std::move(event));
  if (list.size() > 4096) pjrt::drop_ready(list);  // forget finished work so the list stays short
}

void DeviceRuntime::synchronize(int device) {
  if (before_sync_) before_sync_();
  wait_for(device);
  // A launch that failed on the queue raises here too, once, where nothing
  // read its results (as CUDA's synchronize returns a kernel's error).
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = launch_failures_.begin(); it != launch_failures_.end();) {
      if (device >= 0 && it->first != device) {
        ++it;
        continue;
      }
      if (failure.empty()) failure = it->second;
      it = launch_failures_.erase(it);
    }
  }
  if (!failure.empty()) {
    throw pjrt::PjrtError("tpu: a program launched since the last synchronization failed on the device: " + failure);
  }
}

void DeviceRuntime::wait_for_queued_launches() {
  auto& queue = pjrt::LaunchQueue::get();
  if (queue.active()) queue.drain();
}

std::vector<std::shared_ptr<pjrt::Event>> DeviceRuntime::unfinished_work(int device) {
  if (launch_deferred_) launch_deferred_();
  std::vector<std::shared_ptr<pjrt::Event>> unfinished;
  if (!client_) return unfinished;
  wait_for_queued_launches();  // their programs' events exist once they are launched
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || static_cast<size_t>(device) >= pending_outputs_.size()) return unfinished;
  // Finished work leaves the list here too: synchronize need not wait for it.
  auto& list = pending_outputs_[device];
  pjrt::drop_ready(list);
  unfinished = list;
  return unfinished;
}

void DeviceRuntime::wait_in_flight() {
  // At exit: what is queued is launched, and later releases run on their
  // own threads (no thread of ours is inside the plugin once this returns).
  pjrt::LaunchQueue::get().stop();
  wait_for(-1);
  // Every program has finished: its donations go now.
  take_finished_donations(/*all=*/true);
}

void DeviceRuntime::wait_for(int device) {
  if (!client_) return;
  wait_for_queued_launches();
  // Events stay listed until they are ready: a thread synchronizing at the
  // same time as this one must wait for them too, not find the list empty.
  std::vector<std::shared_ptr<pjrt::Event>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t d = 0; d < pending_outputs_.size(); ++d) {
      if (device >= 0 && static_cast<size_t>(device) != d) continue;
      pending.insert(pending.end(), pending_outputs_[d].begin(), pending_outputs_[d].end());
    }
  }
  if (pending.empty()) return;
  metrics().host_waits++;
  std::unordered_set<const pjrt::Event*> awaited;
  for (const auto& e : pending) {
    e->await();
    awaited.insert(e.get());
  }
  take_finished_donations(/*all=*/false);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t d = 0; d < pending_outputs_.size(); ++d) {
    if (device >= 0 && static_cast<size_t>(device) != d) continue;
    auto& list = pending_outputs_[d];
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const std::shared_ptr<pjrt::Event>& e) { return awaited.count(e.get()) > 0; }),
               list.end());
  }
}

}  // namespace torch_tpu::runtime
