#include "device_runtime.h"

#include <chrono>
#include <cstdlib>

#include "metrics.h"

namespace torch_tpu::runtime {

std::shared_ptr<pjrt::LoadedExecutable> CompileCache::get_or_compile(pjrt::Client& client, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(text);
    if (it != programs_.end()) {
      metrics().cache_hits++;
      return it->second;
    }
  }
  metrics().cache_misses++;
  auto start = std::chrono::steady_clock::now();
  auto exe = client.compile(text, pjrt::default_compile_options());
  metrics().compiles++;
  metrics().compile_nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  if (const char* dump = std::getenv("TORCH_TPU_DUMP_PROGRAMS"); dump && *dump == '1') {
    std::fprintf(stderr, "[torch_tpu] compiled program:\n%s\n", text.c_str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.emplace(text, exe);
  return exe;
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return programs_.size();
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.clear();
}

DeviceRuntime& DeviceRuntime::get() {
  // Leaked on purpose: buffers may be released during interpreter shutdown,
  // after static destructors would have torn the client down.
  static DeviceRuntime* runtime = new DeviceRuntime();
  return *runtime;
}

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
    pending_outputs_.resize(client_->devices().size());
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

std::vector<BufferPtr> DeviceRuntime::run(const std::string& text, int device, const std::vector<BufferPtr>& args,
                                          const std::vector<bool>& donatable) {
  auto& c = client();
  auto exe = cache_.get_or_compile(c, text);
  std::vector<PJRT_Buffer*> raw;
  raw.reserve(args.size());
  for (const auto& a : args) raw.push_back(a->raw());
  auto outputs = exe->execute(c.devices().at(device), raw, donatable);
  metrics().programs_executed++;
  if (!outputs.empty()) note_output(device, outputs.back());
  return outputs;
}

void DeviceRuntime::note_output(int device, const BufferPtr& b) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || static_cast<size_t>(device) >= pending_outputs_.size()) return;
  auto& list = pending_outputs_[device];
  list.push_back(b);
  if (list.size() > 4096) {  // forget finished work so the list stays short
    std::vector<std::weak_ptr<pjrt::Buffer>> alive;
    for (auto& w : list) {
      auto p = w.lock();
      if (p && !p->is_ready()) alive.push_back(w);
    }
    list.swap(alive);
  }
}

void DeviceRuntime::synchronize(int device) {
  if (!client_) return;
  std::vector<BufferPtr> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t d = 0; d < pending_outputs_.size(); ++d) {
      if (device >= 0 && static_cast<size_t>(device) != d) continue;
      for (auto& w : pending_outputs_[d]) {
        if (auto b = w.lock()) pending.push_back(b);
      }
      pending_outputs_[d].clear();
    }
  }
  if (!pending.empty()) metrics().host_waits++;
  for (const auto& b : pending) {
    b->await_ready();
  }
}

}  // namespace torch_tpu::runtime
