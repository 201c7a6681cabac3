// The one compilation cache every execution path shares: in memory first,
// then serialized executables on disk (TORCH_TPU_CACHE_DIR, default
// ~/.cache/torch_tpu; "off" disables the disk tier), so no process compiles
// a program another already compiled on the same plugin.
//
// An executable is native code the process runs: the disk tier loads only
// entries signed (HMAC-SHA256) with the user's own key, kept 0600 in
// TORCH_TPU_CACHE_KEY_FILE or $XDG_CONFIG_HOME/torch_tpu/cache_key
// (~/.config/...), from a directory only the user owns and can write.
// docs/threat_model.md says what that does and does not protect against.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "pjrt/pjrt_runtime.h"

namespace torch_tpu::runtime {

struct CacheStats {
  int64_t memory_hits = 0, memory_misses = 0, memory_evictions = 0;
  int64_t disk_hits = 0, disk_misses = 0, disk_writes = 0, disk_corrupt = 0, disk_evictions = 0, disk_scans = 0;
  int64_t module_hits = 0, module_misses = 0, module_writes = 0;  // exported custom-kernel modules
  int64_t compiles = 0;
  double compile_seconds = 0;
};

// The key that signs disk entries, read from `path`, or made there (32
// random bytes, 0600, directories 0700) where missing; processes making it
// at once all end up with the one that was linked into place first.
// Returns "" and the key, or why the file is refused.
std::string load_cache_key(const std::string& path, std::string* key);

class CompileCache {
 public:
  // Reads TORCH_TPU_CACHE_DIR / TORCH_TPU_CACHE_MAX_BYTES (disk tier) and
  // TORCH_TPU_CACHE_MAX_PROGRAMS (memory tier, default 2048 executables).
  // Creates the directory (0700) and the key (0600) where missing; a
  // directory another user owns or can write, or a key file another user
  // owns or can read, turns the disk tier off with a warning.
  CompileCache();
  ~CompileCache();

  // `platform` names the plugin build (platform, version, XLA version); it is
  // part of every key, so executables never cross plugins.
  std::shared_ptr<pjrt::LoadedExecutable> get_or_compile(pjrt::Client& client, const std::string& platform,
                                                         const std::string& text, const std::string& options);
  // Modules a custom kernel's exporter made (torch_tpu/pallas), in the disk
  // tier beside the executables and evicted with them, keyed by the identity
  // the exporter gives: everything the text depends on. nullopt when absent,
  // unusable (ignored, then rewritten) or the disk tier is off.
  std::optional<std::string> load_module(const std::string& identity);
  void store_module(const std::string& identity, const std::string& text);
  CacheStats stats() const;
  void reset_stats();
  size_t size() const;
  void clear_memory();
  const std::string& directory() const { return dir_; }  // empty: disk tier off
  // Warnings (a corrupt entry) go here; the device layer routes them to Python.
  static void set_warning_handler(std::function<void(const std::string&)> handler);

 private:
  // `name`: the entry's file name in the directory.
  std::shared_ptr<pjrt::LoadedExecutable> load_from_disk(pjrt::Client& client, const std::string& name,
                                                         const std::string& identity);
  void store_on_disk(const std::string& name, const std::string& identity, const pjrt::LoadedExecutable& exe);
  void evict_if_needed(int64_t written_bytes);

  // The memory tier, least recently used first in `lru_`. Bounded: every
  // loaded executable holds code mappings, and the process's count of
  // memory mappings is finite (vm.max_map_count), so a process compiling
  // thousands of distinct programs (an op sweep) must let old ones go.
  // Evicted programs come back from the disk tier.
  struct Entry {
    std::shared_ptr<pjrt::LoadedExecutable> exe;
    std::list<const std::string*>::iterator lru;
  };
  void remember(const std::string& text, std::shared_ptr<pjrt::LoadedExecutable> exe);  // under mutex_
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> programs_;
  std::list<const std::string*> lru_;
  size_t max_programs_;
  std::string dir_;
  // The directory, opened once after its owner and mode were checked:
  // entries are opened relative to it, never through the path again.
  int dir_fd_ = -1;
  std::string key_;  // signs and checks every entry
  int64_t max_bytes_;
  // The disk tier's bytes at the last directory scan plus this process's
  // writes since (-1: not scanned yet); see evict_if_needed.
  int64_t disk_bytes_ = -1;
  int writes_since_scan_ = 0;
  CacheStats stats_;
};

}  // namespace torch_tpu::runtime
