// The one compilation cache every execution path shares: in memory first,
// then serialized executables on disk (TORCH_TPU_CACHE_DIR, default
// ~/.cache/torch_tpu; "off" disables the disk tier), so no process compiles
// a program another already compiled on the same plugin.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pjrt/pjrt_runtime.h"

namespace torch_tpu::runtime {

struct CacheStats {
  int64_t memory_hits = 0, memory_misses = 0;
  int64_t disk_hits = 0, disk_misses = 0, disk_writes = 0, disk_corrupt = 0, disk_evictions = 0;
  int64_t compiles = 0;
  double compile_seconds = 0;
};

class CompileCache {
 public:
  // Reads TORCH_TPU_CACHE_DIR / TORCH_TPU_CACHE_MAX_BYTES.
  CompileCache();

  // `platform` names the plugin build (platform, version, XLA version); it is
  // part of every key, so executables never cross plugins.
  std::shared_ptr<pjrt::LoadedExecutable> get_or_compile(pjrt::Client& client, const std::string& platform,
                                                         const std::string& text, const std::string& options);
  CacheStats stats() const;
  void reset_stats();
  size_t size() const;
  void clear_memory();
  const std::string& directory() const { return dir_; }  // empty: disk tier off
  // Warnings (a corrupt entry) go here; the device layer routes them to Python.
  static void set_warning_handler(std::function<void(const std::string&)> handler);

 private:
  std::shared_ptr<pjrt::LoadedExecutable> load_from_disk(pjrt::Client& client, const std::string& path,
                                                         const std::string& identity);
  void store_on_disk(const std::string& path, const std::string& identity, const pjrt::LoadedExecutable& exe);
  void evict_if_needed();

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<pjrt::LoadedExecutable>> programs_;
  std::string dir_;
  int64_t max_bytes_;
  CacheStats stats_;
};

}  // namespace torch_tpu::runtime
