// The compilation cache's signing key (runtime/compile_cache.h): made once,
// private, and the same for every process or thread that makes it at once;
// a key file someone else could know or choose is refused.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compile_cache.h"
#include "test_runner.h"

using torch_tpu::runtime::load_cache_key;

namespace {

std::string temporary_directory() {
  char pattern[] = "/tmp/cache_key_test.XXXXXX";
  const char* made = mkdtemp(pattern);
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  return made;
}

void remove_tree(const std::string& path) { std::system(("rm -rf '" + path + "'").c_str()); }

mode_t mode_of(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
  }
  if (d) closedir(d);
  return names;
}

void write_file(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream(path, std::ios::binary) << data;
  chmod(path.c_str(), mode);
}

// Why load_cache_key refuses the file at `path` ("" when it takes it).
std::string refusal(const std::string& path) {
  std::string key;
  return load_cache_key(path, &key);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(runtime, cache_key_made_by_many_threads_at_once_is_one_key) {
  // Repeated, each time in a fresh directory, so the threads race to create
  // the directories and the key more than once.
  for (int round = 0; round < 20; ++round) {
    const std::string root = temporary_directory();
    const std::string path = root + "/config/torch_tpu/cache_key";
    constexpr int kThreads = 8;
    std::vector<std::string> keys(kThreads), whys(kThreads);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        ready++;
        while (ready.load() < kThreads) {
        }
        whys[i] = load_cache_key(path, &keys[i]);
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      CHECK_EQ(whys[i], std::string());
      CHECK_EQ(keys[i].size(), size_t{32});
      CHECK(keys[i] == keys[0]);
    }
    CHECK_EQ(mode_of(path), mode_t{0600});
    CHECK_EQ(mode_of(root + "/config"), mode_t{0700});
    CHECK_EQ(mode_of(root + "/config/torch_tpu"), mode_t{0700});
    CHECK_EQ(names_in(root + "/config/torch_tpu"), std::vector<std::string>{"cache_key"});  // no temporaries left
    std::string again;
    CHECK_EQ(load_cache_key(path, &again), std::string());
    CHECK(again == keys[0]);  // read back, not made anew
    remove_tree(root);
  }
}

TEST(runtime, two_users_keys_differ) {
  const std::string root = temporary_directory();
  std::string a, b;
  CHECK_EQ(load_cache_key(root + "/a", &a), std::string());
  CHECK_EQ(load_cache_key(root + "/b", &b), std::string());
  CHECK(a != b);
  remove_tree(root);
}

TEST(runtime, cache_key_others_could_know_or_choose_is_refused) {
  const std::string root = temporary_directory();
  const std::string good(32, 'k');

  write_file(root + "/readable", good, 0644);
  CHECK(contains(refusal(root + "/readable"), "its mode is 0644, not 0600"));
  CHECK_EQ(mode_of(root + "/readable"), mode_t{0644});  // refused, not repaired

  write_file(root + "/group_writable", good, 0620);
  CHECK(contains(refusal(root + "/group_writable"), "its mode is 0620"));

  write_file(root + "/target", good, 0600);
  CHECK_EQ(refusal(root + "/target"), std::string());
  CHECK_EQ(symlink((root + "/target").c_str(), (root + "/link").c_str()), 0);
  CHECK(contains(refusal(root + "/link"), "symbolic link"));

  write_file(root + "/short", "too short", 0600);
  CHECK(contains(refusal(root + "/short"), "32-byte key"));

  // A FIFO no one writes: opening it must not wait for a writer.
  CHECK_EQ(mkfifo((root + "/fifo").c_str(), 0600), 0);
  CHECK(contains(refusal(root + "/fifo"), "not a regular file"));

  CHECK_EQ(mkdir((root + "/directory").c_str(), 0700), 0);
  CHECK(contains(refusal(root + "/directory"), "not a regular file"));

  if (geteuid() == 0) {  // giving a file away takes root
    write_file(root + "/nobodys", good, 0600);
    CHECK_EQ(chown((root + "/nobodys").c_str(), 65534, 65534), 0);
    CHECK(contains(refusal(root + "/nobodys"), "owned by another user (uid 65534)"));
  }
  remove_tree(root);
}
