#include "host_memory.h"

#include <fcntl.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace torch_tpu::device {

namespace {

// The start of a small text file (/proc and cgroup files are a few KiB at
// most and the fields read here come first), or "" when it cannot be read.
std::string read_text(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[8192];
  size_t n = 0;
  while (n < sizeof(buf)) {
    const ssize_t got = read(fd, buf + n, sizeof(buf) - n);
    if (got <= 0) break;
    n += static_cast<size_t>(got);
  }
  close(fd);
  return std::string(buf, n);
}

// The number after `key` at the start of a line of `text` ("key value"
// lines of memory.stat, "Key:   value kB" of meminfo); -1 when absent.
int64_t field(const std::string& text, const std::string& key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
    at += key.size();
  }
  return -1;
}

// A whole file holding one number ("max" or unreadable: -1).
int64_t number_in(const std::string& path) {
  const std::string text = read_text(path);
  if (text.empty() || text[0] < '0' || text[0] > '9') return -1;
  return std::strtoll(text.c_str(), nullptr, 10);
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A cgroup whose memory limit applies to this process.
struct LimitedGroup {
  std::string dir;
  bool v2 = true;
  int64_t limit() const {
    return v2 ? number_in(dir + "/memory.max") : field(read_text(dir + "/memory.stat"), "hierarchical_memory_limit ");
  }
  // The limit less what the group holds that the kernel cannot reclaim
  // without swapping.
  int64_t headroom() const {
    const std::string stat = read_text(dir + "/memory.stat");
    const int64_t usage = number_in(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    const int64_t inactive_file = std::max<int64_t>(field(stat, v2 ? "inactive_file " : "total_inactive_file "), 0);
    const int64_t lim = limit();
    if (lim < 0 || usage < 0) return -1;
    return lim - usage + inactive_file;
  }
};

// v1 reports "no limit" as the largest page-aligned int64.
constexpr int64_t kNoLimit = int64_t{1} << 60;

// The groups found at first use. A limit set on a group later is not seen;
// one changed on a group found here is.
const std::vector<LimitedGroup>& limited_groups() {
  static std::once_flag once;
  static std::vector<LimitedGroup> groups;
  std::call_once(once, [] {
    const std::string self = read_text("/proc/self/cgroup");
    size_t start = 0;
    while (start < self.size()) {
      size_t end = self.find('\n', start);
      if (end == std::string::npos) end = self.size();
      const std::string line = self.substr(start, end - start);
      start = end + 1;
      // hierarchy-id:controllers:path
      const size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
      if (c1 == std::string::npos || c2 == std::string::npos) continue;
      const std::string id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1);
      const std::string path = line.substr(c2 + 1);
      const bool v2 = id == "0" && controllers.empty();
      const bool v1_memory = ("," + controllers + ",").find(",memory,") != std::string::npos;
      if (!v2 && !v1_memory) continue;
      const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
      if (v2 && !exists(root + "/cgroup.controllers")) continue;  // v1 only: its unified tree holds no limits
      // Inside a cgroup namespace the path is relative to what is mounted.
      std::string dir = exists(root + path) ? root + path : root;
      if (!v2) {  // hierarchical_memory_limit already takes the ancestors' limits
        LimitedGroup g{dir, false};
        const int64_t lim = g.limit();
        if (lim > 0 && lim < kNoLimit) groups.push_back(g);
        continue;
      }
      while (dir.size() >= root.size()) {
        LimitedGroup g{dir, true};
        if (g.limit() > 0) groups.push_back(g);
        if (dir == root) break;
        dir = dir.substr(0, dir.rfind('/'));
      }
    }
  });
  return groups;
}

}  // namespace

int64_t host_memory_total() {
  static const int64_t total = [] {
    int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
    for (const LimitedGroup& g : limited_groups()) {
      const int64_t lim = g.limit();
      if (lim > 0) bytes = std::min(bytes, lim);
    }
    return bytes;
  }();
  return total;
}

int64_t host_memory_available() {
  const int64_t available_kib = field(read_text("/proc/meminfo"), "MemAvailable:");
  int64_t available = available_kib >= 0 ? available_kib * 1024
                                         : static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) *
                                               static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  for (const LimitedGroup& g : limited_groups()) {
    const int64_t headroom = g.headroom();
    if (headroom >= 0) available = std::min(available, headroom);
  }
  return std::max<int64_t>(available, 0);
}

bool return_free_malloc_pages() {
#ifdef __GLIBC__
  return malloc_trim(0) != 0;
#else
  return false;
#endif
}

}  // namespace torch_tpu::device
