#include "compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "hmac_sha256.h"
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

// Version 2 entries end with an HMAC under the user's key; version 1 ended
// with an unkeyed checksum, which whoever could write the directory could
// recompute for a payload of their choosing.
constexpr char kMagic[] = "TORCH_TPU_EXECUTABLE_V2\n";
constexpr char kModuleMagic[] = "TORCH_TPU_MODULE_V2\n";
// Every file the cache writes is named kEntryPrefix, 32 hex digits, then a
// suffix (a writer's temporary adds kTemporaryMarker, its pid and a random
// number): eviction removes such names only, never a file someone put there.
constexpr char kEntryPrefix[] = "tt-";
constexpr char kExecutableSuffix[] = ".xla";
constexpr char kModuleSuffix[] = ".mlir";
constexpr char kTemporaryMarker[] = ".tmp.";
constexpr size_t kNameDigits = 32;
// Far above any executable's size; a larger file is refused unread.
constexpr int64_t kMaxEntryBytes = int64_t{1} << 30;
constexpr size_t kKeyBytes = 32;
constexpr size_t kMacBytes = 32;  // an HMAC-SHA256 tag
// A killed writer's temporary file is removed by the next scan once it is
// this old (no live writer takes that long).
constexpr time_t kStaleTemporarySeconds = 3600;

std::string entry_name(const std::string& identity, const char* suffix) {
  return kEntryPrefix + hex_key(identity) + suffix;
}

enum class NameKind { kForeign, kEntry, kTemporary };

NameKind name_kind(const std::string& name) {
  const size_t prefix = sizeof(kEntryPrefix) - 1;
  if (name.size() < prefix + kNameDigits || name.compare(0, prefix, kEntryPrefix) != 0) return NameKind::kForeign;
  for (size_t i = prefix; i < prefix + kNameDigits; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) && (name[i] < 'a' || name[i] > 'f')) {
      return NameKind::kForeign;
    }
  }
  const std::string rest = name.substr(prefix + kNameDigits);
  for (const std::string suffix : {kExecutableSuffix, kModuleSuffix}) {
    if (rest == suffix) return NameKind::kEntry;
    if (rest.compare(0, suffix.size() + sizeof(kTemporaryMarker) - 1, suffix + kTemporaryMarker) == 0) {
      return NameKind::kTemporary;
    }
  }
  return NameKind::kForeign;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  // 0, or -1 when the kernel reports a failed write only at close.
  int close() { return fd_ < 0 ? 0 : ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

bool read_exactly(int fd, char* dst, size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t n = pread(fd, dst, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    size -= n;
    offset += n;
  }
  return true;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(n);
  }
  return true;
}

std::string_view as_bytes(const Sha256Digest& d) { return {reinterpret_cast<const char*>(d.data()), d.size()}; }

// Magic, u64 identity size, identity, u64 payload size: what precedes the
// payload in an entry's file.
std::string entry_header(const std::string& magic, const std::string& identity, uint64_t payload_size) {
  std::string head(magic);
  const uint64_t identity_size = identity.size();
  head.append(reinterpret_cast<const char*>(&identity_size), 8).append(identity);
  head.append(reinterpret_cast<const char*>(&payload_size), 8);
  return head;
}

// One entry's file: its header (entry_header), the payload, then the
// HMAC-SHA256 under the user's key of all that precedes it. The full
// identity is stored, so a file name collision is detected as such.
// Returns "" and the payload, "missing", or why the file is unusable.
// Nothing is read until the file is known to be a regular file of this user
// whose size is the one its header gives: a FIFO would block the read, and a
// device or a huge file would be read whole.
std::string read_entry(int dir_fd, const std::string& name, const std::string& magic, const std::string& identity,
                       const std::string& key, std::string* payload) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? "missing" : std::string("cannot stat it: ") + std::strerror(errno);
  }
  if (S_ISLNK(st.st_mode)) return "a symbolic link, not followed";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  // O_NONBLOCK: should a FIFO take the file's place after the check above,
  // open returns at once instead of waiting for a writer.
  FileDescriptor fd(openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return "missing";
    return errno == ELOOP ? "a symbolic link, not followed" : std::string("cannot open it: ") + std::strerror(errno);
  }
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != geteuid()) return "owned by another user";
  if (st.st_size > kMaxEntryBytes) return "larger than any entry (" + std::to_string(st.st_size) + " bytes)";
  const size_t header_size = magic.size() + 8 + identity.size() + 8;
  std::string head(std::min<size_t>(st.st_size, header_size), '\0');
  if (!read_exactly(fd.get(), head.data(), head.size(), 0)) return "cannot read it";
  const size_t magic_read = std::min(head.size(), magic.size());
  if (head.compare(0, magic_read, magic, 0, magic_read) != 0) return "bad header";
  uint64_t identity_size = 0, payload_size = 0;
  if (head.size() < magic.size() + 8) return "truncated";
  std::memcpy(&identity_size, head.data() + magic.size(), 8);
  if (identity_size != identity.size()) return "written for another program or plugin";
  if (head.size() < header_size) return "truncated";
  if (head.compare(magic.size() + 8, identity.size(), identity) != 0) return "written for another program or plugin";
  std::memcpy(&payload_size, head.data() + header_size - 8, 8);
  const uint64_t expected_size = header_size + std::min<uint64_t>(payload_size, kMaxEntryBytes) + kMacBytes;
  if (static_cast<uint64_t>(st.st_size) < expected_size) return "truncated";
  if (static_cast<uint64_t>(st.st_size) > expected_size) return "longer than its header says";
  payload->resize(payload_size);
  Sha256Digest stored_mac;
  if (!read_exactly(fd.get(), payload->data(), payload_size, header_size) ||
      !read_exactly(fd.get(), reinterpret_cast<char*>(stored_mac.data()), kMacBytes, header_size + payload_size)) {
    return "cannot read it";
  }
  HmacSha256 mac(key);
  mac.update(head);
  mac.update(*payload);
  if (!digests_equal(mac.finish(), stored_mac)) {
    return "not signed with this user's cache key: written by someone else, or before the key changed";
  }
  futimens(fd.get(), nullptr);  // recently used: evicted last
  return "";
}

// Writes a private temporary file, then renames it: readers see a whole
// entry or none, and concurrent writers of one entry each rename a complete
// file. Returns the bytes written, 0 when it could not write.
int64_t write_entry(int dir_fd, const std::string& name, const std::string& magic, const std::string& identity,
                    const std::string& key, const std::string& payload) {
  const std::string head = entry_header(magic, identity, payload.size());
  HmacSha256 mac(key);
  mac.update(head);
  mac.update(payload);
  const Sha256Digest tag = mac.finish();
  std::random_device rd;
  const std::string tmp = name + kTemporaryMarker + std::to_string(getpid()) + "." + std::to_string(rd());
  FileDescriptor fd(openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return 0;
  bool written = write_all(fd.get(), head) && write_all(fd.get(), payload) && write_all(fd.get(), as_bytes(tag));
  written = fd.close() == 0 && written;
  if (!written || renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    unlinkat(dir_fd, tmp.c_str(), 0);
    return 0;
  }
  return static_cast<int64_t>(head.size() + payload.size() + kMacBytes);
}

bool make_dirs(const std::string& path, mode_t mode) {
  std::string partial;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '/');) {
    partial += part + "/";
    if (part.empty()) continue;
    if (mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Opens `dir` (made 0700 where missing) for the disk tier, or says why it
// cannot be used. Entries are then opened relative to the open directory:
// the path is resolved once, so a directory renamed into its place later
// is never used.
std::string open_cache_directory(const std::string& dir, int* dir_fd) {
  if (!make_dirs(dir, 0700)) return "cannot create it";
  FileDescriptor fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0)
    return errno == ENOTDIR ? "it is not a directory" : std::string("cannot open it: ") + std::strerror(errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return "cannot stat it";
  // Whoever can write the directory can plant files under entry names, or
  // remove and replace entries; whoever owns it can give themselves that.
  if (st.st_uid != geteuid()) return "it is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("other users can write to it: mode ") + mode;
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "it is not writable";
  *dir_fd = fd.release();
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

// ---- the key that signs entries -----------------------------------------
// TORCH_TPU_CACHE_KEY_FILE, else the user's configuration directory (XDG):
// not the cache directory, which a user may point at shared storage.
std::string key_path() {
  if (const char* env = std::getenv("TORCH_TPU_CACHE_KEY_FILE"); env != nullptr && *env) return env;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg) {
    return std::string(xdg) + "/torch_tpu/cache_key";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* pw = getpwuid(geteuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  return home != nullptr ? std::string(home) + "/.config/torch_tpu/cache_key" : "";
}

// Reads the key at `path`: "" and the key, "missing", or why it is refused.
// Whoever else can read the key can sign entries; a file owned by someone
// else holds a key they chose.
std::string read_key(const std::string& path, std::string* key) {
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return "missing";
    return errno == ELOOP ? "it is a symbolic link" : std::string("cannot open it: ") + std::strerror(errno);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "it is not a regular file";
  if (st.st_uid != geteuid()) return "it is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("its mode is ") + mode + ", not 0600: other users can read or change it";
  }
  if (st.st_size != static_cast<off_t>(kKeyBytes)) return "it does not hold a 32-byte key";
  key->resize(kKeyBytes);
  return read_exactly(fd.get(), key->data(), kKeyBytes, 0) ? "" : "cannot read it";
}

bool random_bytes(char* dst, size_t size) {
  while (size > 0) {
    const ssize_t n = getrandom(dst, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    size -= n;
  }
  return true;
}

// Writes a new key to a private temporary file and links it to `path` once
// complete, so no reader sees part of a key. link fails where `path` exists:
// of processes creating the key at once one wins, the others read its key.
std::string create_key(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(path.substr(0, slash), 0700)) {
    return "cannot create its directory";
  }
  std::string key(kKeyBytes, '\0');
  if (!random_bytes(key.data(), key.size())) return "the system gave no random bytes";
  std::random_device rd;
  const std::string tmp = path + kTemporaryMarker + std::to_string(getpid()) + "." + std::to_string(rd());
  FileDescriptor fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return std::string("cannot create it: ") + std::strerror(errno);
  // fsync: a key lost in a crash after the link would leave an empty file,
  // refused from then on.
  bool written = fchmod(fd.get(), 0600) == 0 && write_all(fd.get(), key) && fsync(fd.get()) == 0;
  written = fd.close() == 0 && written;
  const int link_error = written && link(tmp.c_str(), path.c_str()) != 0 ? errno : 0;
  unlink(tmp.c_str());
  if (!written) return "cannot write it";
  if (link_error != 0 && link_error != EEXIST) return std::string("cannot create it: ") + std::strerror(link_error);
  return "";
}

}  // namespace

std::string load_cache_key(const std::string& path, std::string* key) {
  if (path.empty()) return "no home directory to keep it in";
  if (std::string why = read_key(path, key); why != "missing") return why;
  if (std::string why = create_key(path); !why.empty()) return why;
  return read_key(path, key);
}

void CompileCache::set_warning_handler(std::function<void(const std::string&)> handler) {
  warning_handler() = std::move(handler);
}

CompileCache::CompileCache() : dir_(default_directory()) {
  const char* max = std::getenv("TORCH_TPU_CACHE_MAX_BYTES");
  max_bytes_ = max ? std::atoll(max) : (int64_t{4} << 30);
  const char* max_programs = std::getenv("TORCH_TPU_CACHE_MAX_PROGRAMS");
  max_programs_ = max_programs ? std::max<long long>(1, std::atoll(max_programs)) : 2048;
  if (dir_.empty()) return;
  if (const std::string why = open_cache_directory(dir_, &dir_fd_); !why.empty()) {
    warning_handler()("cannot use " + dir_ + " as the compilation cache directory (" + why + "); disk tier off");
    dir_.clear();
    return;
  }
  const std::string key_file = key_path();
  if (const std::string why = load_cache_key(key_file, &key_); !why.empty()) {
    warning_handler()("cannot use " + (key_file.empty() ? std::string("a file") : key_file) +
                      " as the compilation cache's key (" + why + "); disk tier off");
    close(dir_fd_);
    dir_fd_ = -1;
    dir_.clear();
  }
}

CompileCache::~CompileCache() {
  if (dir_fd_ >= 0) close(dir_fd_);
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
  const std::string name = dir_.empty() ? "" : entry_name(identity, kExecutableSuffix);
  std::shared_ptr<pjrt::LoadedExecutable> exe;
  if (!name.empty()) exe = load_from_disk(client, name, identity);
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
    if (!name.empty()) store_on_disk(name, identity, *exe);
  }
  if (const pjrt::CompiledMemoryStats memory = exe->memory_stats(); memory.available) {
    metrics().note_program_memory(memory.temp, memory.alias);
  }
  // Every program this process runs, compiled now or loaded from the disk
  // tier: a warm cache must not hide what runs.
  if (const char* dir = std::getenv("TORCH_TPU_DUMP_HLO"); dir && *dir && make_dirs(dir, 0755)) {
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

std::shared_ptr<pjrt::LoadedExecutable> CompileCache::load_from_disk(pjrt::Client& client, const std::string& name,
                                                                     const std::string& identity) {
  std::string exe_bytes;
  std::string why = read_entry(dir_fd_, name, kMagic, identity, key_, &exe_bytes);
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
    warning_handler()("compilation cache entry " + dir_ + "/" + name + " is unusable (" + why +
                      "); recompiling and rewriting it");
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk_corrupt++;
    stats_.disk_misses++;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.disk_hits++;
  return exe;
}

void CompileCache::store_on_disk(const std::string& name, const std::string& identity,
                                 const pjrt::LoadedExecutable& exe) {
  std::string bytes;
  try {
    bytes = exe.serialize();
  } catch (const pjrt::PjrtError& e) {
    return;  // plugins without serialization: memory tier only
  }
  const int64_t written = write_entry(dir_fd_, name, kMagic, identity, key_, bytes);
  if (written == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk_writes++;
  }
  evict_if_needed(written);
}

std::optional<std::string> CompileCache::load_module(const std::string& identity) {
  if (dir_.empty()) return std::nullopt;
  const std::string name = entry_name(identity, kModuleSuffix);
  std::string text;
  const std::string why = read_entry(dir_fd_, name, kModuleMagic, identity, key_, &text);
  if (!why.empty() && why != "missing") {
    warning_handler()("compilation cache entry " + dir_ + "/" + name + " is unusable (" + why +
                      "); exporting and rewriting it");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!why.empty()) {
    stats_.module_misses++;
    return std::nullopt;
  }
  stats_.module_hits++;
  return text;
}

void CompileCache::store_module(const std::string& identity, const std::string& text) {
  if (dir_.empty()) return;
  const int64_t written = write_entry(dir_fd_, entry_name(identity, kModuleSuffix), kModuleMagic, identity, key_, text);
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
  // Its own descriptor: readdir moves the offset of the one it reads.
  const int scan_fd = openat(dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (scan_fd < 0) return;
  DIR* d = fdopendir(scan_fd);
  if (d == nullptr) {
    close(scan_fd);
    return;
  }
  struct Entry {
    std::string name;
    time_t mtime;
    int64_t size;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  const time_t now = std::time(nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const NameKind kind = name_kind(name);
    if (kind == NameKind::kForeign) continue;  // not the cache's: never removed
    struct stat st;
    if (fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (kind == NameKind::kTemporary) {  // a writer killed before its rename left it
      if (now - st.st_mtime > kStaleTemporarySeconds) unlinkat(dir_fd_, name.c_str(), 0);
      continue;
    }
    entries.push_back({name, st.st_mtime, static_cast<int64_t>(st.st_size)});
    total += st.st_size;
  }
  closedir(d);
  if (total > max_bytes_) {
    // Down to a quarter below the bound, not to just under it: a cache kept
    // just under its bound crosses it again with the next write, and each
    // crossing rescans the directory (at 300,000 entries a scan per compile
    // made a warm user's test suite three times slower).
    const int64_t low_water = max_bytes_ - max_bytes_ / 4;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
    for (const auto& e : entries) {  // least recently used first
      if (total <= low_water) break;
      if (unlinkat(dir_fd_, e.name.c_str(), 0) == 0) {
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
