// core_tests [--pjrt-plugin PATH] [NAME_PREFIX ...]: runs every registered
// test (or those whose name starts with one of the prefixes), prints one line
// per test and a summary, and exits 1 when any failed or none ran.
#include "test_runner.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace torch_tpu::testing {

namespace {
std::string g_plugin_path;
}

std::vector<TestCase>& registry() {
  static std::vector<TestCase> tests;
  return tests;
}

void fail(const char* file, int line, const std::string& message) {
  throw CheckFailure(std::string(file) + ":" + std::to_string(line) + ": " + message);
}

const std::string& plugin_path() {
  if (g_plugin_path.empty()) {
    fail(__FILE__, __LINE__, "no PJRT plugin: pass --pjrt-plugin PATH or set TORCH_TPU_PJRT_PLUGIN");
  }
  return g_plugin_path;
}

}  // namespace torch_tpu::testing

int main(int argc, char** argv) {
  using namespace torch_tpu::testing;
  if (const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN")) g_plugin_path = env;
  std::vector<std::string> prefixes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--pjrt-plugin" && i + 1 < argc) {
      g_plugin_path = argv[++i];
    } else {
      prefixes.push_back(arg);
    }
  }
  int passed = 0, failed = 0;
  for (const TestCase& test : registry()) {
    bool selected = prefixes.empty();
    for (const std::string& p : prefixes) selected |= test.name.compare(0, p.size(), p) == 0;
    if (!selected) continue;
    std::string error;
    try {
      test.run();
    } catch (const CheckFailure& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("unexpected exception: ") + e.what();
    }
    if (error.empty()) {
      ++passed;
      std::printf("ok    %s\n", test.name.c_str());
    } else {
      ++failed;
      std::printf("FAIL  %s\n  %s\n", test.name.c_str(), error.c_str());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
