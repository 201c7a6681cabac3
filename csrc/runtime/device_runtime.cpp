#include "device_runtime.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <unordered_set>

#include "metrics.h"

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
  auto b = client().buffer_from_host(data, type, dims, device);
  return b;
}

void DeviceRuntime::download(const Buffer& buffer, void* dst, size_t nbytes) {
  metrics().host_waits++;
  metrics().bytes_to_host += static_cast<int64_t>(nbytes);
  buffer.to_host(dst, nbytes);
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
  auto& c = client();
  // On the stack for a small program: this runs once per op.
  constexpr size_t kOnStack = 16;
  PJRT_Buffer* raw_on_stack[kOnStack];
  std::vector<PJRT_Buffer*> raw_on_heap;
  PJRT_Buffer** raw = raw_on_stack;
  if (args.size() > kOnStack) {
    raw_on_heap.resize(args.size());
    raw = raw_on_heap.data();
  }
  for (size_t i = 0; i < args.size(); ++i) raw[i] = args[i]->raw();
  std::shared_ptr<pjrt::Event> done;
  auto outputs = exe.execute(c.devices().at(device), raw, args.size(), donatable, launch_id, &done);
  metrics().programs_executed++;
  // Without a completion event, the last output is ready when the program is
  // done (its event taken now, while this thread alone holds the fresh buffer).
  if (!done && !outputs.empty()) done = outputs.back()->ready_event();
  if (!done) return outputs;
  note_pending(device, done);
  // Destroyed when this returns, outside the lock: their programs are done.
  const std::vector<BufferPtr> finished = take_finished_donations(/*all=*/false);
  DonatedUntilDone donated{done, {}};
  for (size_t i = 0; i < args.size() && i < donatable.size(); ++i) {
    if (donatable[i]) donated.buffers.push_back(args[i]);
  }
  if (!donated.buffers.empty()) {
    std::lock_guard<std::mutex> lock(donated_mutex_);
    donated_until_done_.push_back(std::move(donated));
  }
  return outputs;
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
}

std::vector<std::shared_ptr<pjrt::Event>> DeviceRuntime::unfinished_work(int device) {
  if (launch_deferred_) launch_deferred_();
  std::vector<std::shared_ptr<pjrt::Event>> unfinished;
  if (!client_) return unfinished;
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || static_cast<size_t>(device) >= pending_outputs_.size()) return unfinished;
  // Finished work leaves the list here too: synchronize need not wait for it.
  auto& list = pending_outputs_[device];
  pjrt::drop_ready(list);
  unfinished = list;
  return unfinished;
}

void DeviceRuntime::wait_in_flight() {
  wait_for(-1);
  // Every program has finished: its donations go now.
  take_finished_donations(/*all=*/true);
}

void DeviceRuntime::wait_for(int device) {
  if (!client_) return;
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
