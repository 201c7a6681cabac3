#include "compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "metrics.h"

namespace torch_tpu::runtime {

namespace {

std::function<void(const std::string&)>& warning_handler() {
  static std::function<void(const std::string&)> handler = [](const std::string& m) {
    std::fprintf(stderr, "[torch_tpu] warning: %s\n", m.c_str());
  };
  return handler;
}

// FNV-1a, twice with different offsets: a 128-bit file name. Entries also
// store their full identity, so a collision is detected, not trusted.
uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex_key(const std::string& s) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(fnv1a(s, 1469598103934665603ull)),
                static_cast<unsigned long long>(fnv1a(s, 0x9e3779b97f4a7c15ull)));
  return buf;
}

constexpr char kMagic[] = "TORCH_TPU_EXECUTABLE_V1\n";
constexpr char kModuleMagic[] = "TORCH_TPU_MODULE_V1\n";
// The disk tier's file names end so; eviction counts both kinds.
constexpr char kExecutableSuffix[] = ".xla";
constexpr char kModuleSuffix[] = ".mlir";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One entry's file: magic, u64 identity size, identity, u64 payload size,
// payload, u64 checksum of the payload. The full identity is stored, so a
// file name collision is detected, not trusted. Returns "" and the payload,
// "missing", or why the file is unusable.
std::string read_entry(const std::string& path, const std::string& magic, const std::string& identity,
                       std::string* payload) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "missing";
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto read_u64 = [&](uint64_t* v) {
    if (pos + 8 > data.size()) return false;
    std::memcpy(v, data.data() + pos, 8);
    pos += 8;
    return true;
  };
  if (data.compare(0, magic.size(), magic) != 0) return "bad header";
  pos = magic.size();
  uint64_t id_size = 0, payload_size = 0, checksum = 0;
  if (!read_u64(&id_size) || pos + id_size > data.size()) return "truncated";
  if (data.compare(pos, id_size, identity) != 0) return "written for another program or plugin";
  pos += id_size;
  if (!read_u64(&payload_size) || pos + payload_size > data.size()) return "truncated";
  *payload = data.substr(pos, payload_size);
  pos += payload_size;
  if (!read_u64(&checksum) || pos != data.size()) return "truncated";
  if (checksum != fnv1a(*payload, 1469598103934665603ull)) return "checksum mismatch";
  return "";
}

// Writes a private temporary file, then renames it: readers see a whole
// entry or none, and concurrent writers of one entry each rename a complete
// file. Returns the bytes written, 0 when it could not write.
int64_t write_entry(const std::string& path, const std::string& magic, const std::string& identity,
                    const std::string& payload) {
  std::string data(magic);
  auto put_u64 = [&](uint64_t v) { data.append(reinterpret_cast<const char*>(&v), 8); };
  put_u64(identity.size());
  data += identity;
  put_u64(payload.size());
  data += payload;
  put_u64(fnv1a(payload, 1469598103934665603ull));
  std::random_device rd;
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return 0;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) {
      std::remove(tmp.c_str());
      return 0;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return 0;
  }
  return static_cast<int64_t>(data.size());
}

bool make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '/');) {
    partial += part + "/";
    if (part.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Why entries cannot be written into `dir`, or "" when they can. mkdir
// reports an existing regular file as EEXIST, like a directory; without
// this check every entry would then fail to write, silently.
std::string unusable_directory(const std::string& dir) {
  if (!make_dirs(dir)) return "cannot create it";
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "it is not a directory";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "it is not writable";
  return "";
}

std::string default_directory() {
  const char* env = std::getenv("TORCH_TPU_CACHE_DIR");
  if (env != nullptr) return std::string(env) == "off" ? "" : env;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg) return std::string(xdg) + "/torch_tpu";
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/torch_tpu" : "";
}

}  // namespace

void CompileCache::set_warning_handler(std::function<void(const std::string&)> handler) {
  warning_handler() = std::move(handler);
}

CompileCache::CompileCache() : dir_(default_directory()) {
  const char* max = std::getenv("TORCH_TPU_CACHE_MAX_BYTES");
  max_bytes_ = max ? std::atoll(max) : (int64_t{4} << 30);
  const char* max_programs = std::getenv("TORCH_TPU_CACHE_MAX_PROGRAMS");
  max_programs_ = max_programs ? std::max<long long>(1, std::atoll(max_programs)) : 2048;
  if (dir_.empty()) return;
  if (const std::string why = unusable_directory(dir_); !why.empty()) {
    warning_handler()("cannot use " + dir_ + " as the compilation cache directory (" + why + "); disk tier off");
    dir_.clear();
  }
}

std::shared_ptr<pjrt::LoadedExecutable> CompileCache::get_or_compile(pjrt::Client& client, const std::string& platform,
                                                                     const std::string& text,
                                                                     const std::string& options) {
  // In memory, a program is found by its text; one compiled with other
  // options than the usual (a replicated program's device assignment) by
  // its options' hash too. No program text starts with '\x01'.
  static const std::string usual_options = pjrt::default_compile_options();
  std::string memory_key;
  if (options == usual_options) {
    memory_key = text;
  } else {
    memory_key.reserve(text.size() + 64);
    memory_key.append(1, '\x01').append(hex_key(options)).append(1, '\n').append(text);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(memory_key);
    if (it != programs_.end()) {
      stats_.memory_hits++;
      metrics().cache_hits++;
      lru_.splice(lru_.end(), lru_, it->second.lru);
      return it->second.exe;
    }
    stats_.memory_misses++;
  }
  metrics().cache_misses++;
  // Identity: everything the executable depends on.
  // XLA_FLAGS change what XLA generates (the plugin reads them at compile
  // time), so they are part of the identity.
  static const std::string xla_flags = std::getenv("XLA_FLAGS") ? std::getenv("XLA_FLAGS") : "";
  const std::string identity = platform + "\n" + hex_key(options) + "\n" + xla_flags + "\n" + text;
  std::string path = dir_.empty() ? "" : dir_ + "/" + hex_key(identity) + kExecutableSuffix;
  std::shared_ptr<pjrt::LoadedExecutable> exe;
  if (!path.empty()) exe = load_from_disk(client, path, identity);
  if (!exe) {
    auto start = std::chrono::steady_clock::now();
    exe = client.compile(text, options);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics().compiles++;
    metrics().compile_nanos += static_cast<int64_t>(seconds * 1e9);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.compiles++;
      stats_.compile_seconds += seconds;
    }
    if (const char* dump = std::getenv("TORCH_TPU_DUMP_PROGRAMS"); dump && *dump == '1') {
      std::fprintf(stderr, "[torch_tpu] compiled program:\n%s\n", text.c_str());
    }
    if (!path.empty()) store_on_disk(path, identity, *exe);
  }
  // Every program this process runs, compiled now or loaded from the disk
  // tier: a warm cache must not hide what runs.
  if (const char* dir = std::getenv("TORCH_TPU_DUMP_HLO"); dir && *dir && make_dirs(dir)) {
    std::ofstream(std::string(dir) + "/" + hex_key(text) + ".mlir") << text;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  remember(memory_key, exe);
  return exe;
}

void CompileCache::remember(const std::string& text, std::shared_ptr<pjrt::LoadedExecutable> exe) {
  auto [it, inserted] = programs_.try_emplace(text);
  if (!inserted) {  // another thread compiled it meanwhile
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return;
  }
  it->second.exe = std::move(exe);
  it->second.lru = lru_.insert(lru_.end(), &it->first);
  while (programs_.size() > max_programs_) {
    // Executables still in use (a captured graph, a running program) stay
    // alive through their own references.
    const std::string* oldest = lru_.front();
    lru_.pop_front();
    programs_.erase(programs_.find(*oldest));
    stats_.memory_evictions++;
  }
}

std::shared_ptr<pjrt::LoadedExecutable> CompileCache::load_from_disk(pjrt::Client& client, const std::string& path,
                                                                     const std::string& identity) {
  std::string exe_bytes;
  std::string why = read_entry(path, kMagic, identity, &exe_bytes);
  std::shared_ptr<pjrt::LoadedExecutable> exe;
  if (why.empty()) {
    try {
      exe = client.deserialize(exe_bytes);
    } catch (const pjrt::PjrtError& e) {
      why = "the plugin refused it";
    }
  }
  if (why == "missing") {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk_misses++;
    return nullptr;
  }
  if (!why.empty()) {
    warning_handler()("compilation cache entry " + path + " is unusable (" + why + "); recompiling and rewriting it");
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk_corrupt++;
    stats_.disk_misses++;
    return nullptr;
  }
  utime(path.c_str(), nullptr);  // recently used: evicted last
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.disk_hits++;
  return exe;
}

void CompileCache::store_on_disk(const std::string& path, const std::string& identity,
                                 const pjrt::LoadedExecutable& exe) {
  std::string bytes;
  try {
    bytes = exe.serialize();
  } catch (const pjrt::PjrtError& e) {
    return;  // plugins without serialization: memory tier only
  }
  const int64_t written = write_entry(path, kMagic, identity, bytes);
  if (written == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk_writes++;
  }
  evict_if_needed(written);
}

std::optional<std::string> CompileCache::load_module(const std::string& identity) {
  if (dir_.empty()) return std::nullopt;
  const std::string path = dir_ + "/" + hex_key(identity) + kModuleSuffix;
  std::string text;
  const std::string why = read_entry(path, kModuleMagic, identity, &text);
  if (!why.empty() && why != "missing") {
    warning_handler()("compilation cache entry " + path + " is unusable (" + why + "); exporting and rewriting it");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!why.empty()) {
    stats_.module_misses++;
    return std::nullopt;
  }
  stats_.module_hits++;
  utime(path.c_str(), nullptr);
  return text;
}

void CompileCache::store_module(const std::string& identity, const std::string& text) {
  if (dir_.empty()) return;
  const int64_t written = write_entry(dir_ + "/" + hex_key(identity) + kModuleSuffix, kModuleMagic, identity, text);
  if (written == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.module_writes++;
  }
  evict_if_needed(written);
}

void CompileCache::evict_if_needed(int64_t written_bytes) {
  {
    // A scan stats every entry, and a cache used for long holds hundreds of
    // thousands: scanning after every write made a cold test suite spend most
    // of its time in stat(). Scan once, then count our own writes; scan again
    // when they may cross the bound, and every kWritesPerScan writes, since
    // other processes write into the same directory.
    constexpr int kWritesPerScan = 1000;
    std::lock_guard<std::mutex> lock(mutex_);
    if (disk_bytes_ >= 0 && writes_since_scan_ < kWritesPerScan && disk_bytes_ + written_bytes <= max_bytes_) {
      disk_bytes_ += written_bytes;
      writes_since_scan_++;
      return;
    }
    stats_.disk_scans++;
  }
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return;
  struct Entry {
    std::string path;
    time_t mtime;
    int64_t size;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (!ends_with(name, kExecutableSuffix) && !ends_with(name, kModuleSuffix)) continue;
    std::string p = dir_ + "/" + name;
    struct stat st;
    if (stat(p.c_str(), &st) != 0) continue;
    entries.push_back({p, st.st_mtime, static_cast<int64_t>(st.st_size)});
    total += st.st_size;
  }
  closedir(d);
  if (total > max_bytes_) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
    for (const auto& e : entries) {  // least recently used first
      if (total <= max_bytes_) break;
      if (std::remove(e.path.c_str()) == 0) {
        total -= e.size;
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.disk_evictions++;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  disk_bytes_ = total;
  writes_since_scan_ = 0;
}

CacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CompileCache::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = CacheStats();
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return programs_.size();
}

void CompileCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.clear();
  lru_.clear();
}

}  // namespace torch_tpu::runtime
