// A small test runner for the layers that build without torch (pjrt/, hlo/).
// gtest would be one more dependency to fetch and build for a handful of
// checks; this is the part of it these tests use: named tests, checks that
// end the test with file, line and both values, and a name filter.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch_tpu::testing {

struct TestCase {
  std::string name;  // "<group>.<behaviour>"
  void (*run)();
};

std::vector<TestCase>& registry();

struct Registration {
  Registration(const char* group, const char* name, void (*run)()) {
    registry().push_back({std::string(group) + "." + name, run});
  }
};

// Thrown by a failed check; the runner reports it and goes on.
struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const char* file, int line, const std::string& message);

// The PJRT plugin the pjrt tests load: `--pjrt-plugin PATH`, else
// TORCH_TPU_PJRT_PLUGIN (as torch_tpu reads it). A test that needs it fails
// when neither is given: a missing plugin must not pass as a skipped test.
const std::string& plugin_path();

template <typename T>
std::string show(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

template <typename T>
std::string show(const std::vector<T>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + show(v[i]);
  return s + "}";
}

}  // namespace torch_tpu::testing

#define TEST(group, name)                                                                                  \
  static void group##_##name();                                                                            \
  static ::torch_tpu::testing::Registration group##_##name##_registration(#group, #name, &group##_##name); \
  static void group##_##name()

#define CHECK(cond) ((cond) ? (void)0 : ::torch_tpu::testing::fail(__FILE__, __LINE__, "CHECK(" #cond ") failed"))

#define CHECK_EQ(actual, expected)                                                                                  \
  do {                                                                                                              \
    const auto& check_actual_ = (actual);                                                                           \
    const auto& check_expected_ = (expected);                                                                       \
    if (!(check_actual_ == check_expected_)) {                                                                      \
      ::torch_tpu::testing::fail(                                                                                   \
          __FILE__, __LINE__,                                                                                       \
          "CHECK_EQ(" #actual ", " #expected ") failed\n  actual:   " + ::torch_tpu::testing::show(check_actual_) + \
              "\n  expected: " + ::torch_tpu::testing::show(check_expected_));                                      \
    }                                                                                                               \
  } while (0)

// `statement` throws `Type` (or a subclass) whose what() contains `needle`.
#define CHECK_THROWS(statement, Type, needle)                                                              \
  do {                                                                                                     \
    bool check_threw_ = false;                                                                             \
    try {                                                                                                  \
      statement;                                                                                           \
    } catch (const Type& e) {                                                                              \
      check_threw_ = true;                                                                                 \
      if (std::string(e.what()).find(needle) == std::string::npos) {                                       \
        ::torch_tpu::testing::fail(__FILE__, __LINE__,                                                     \
                                   std::string(#Type " without \"") + (needle) + "\": " + e.what());       \
      }                                                                                                    \
    }                                                                                                      \
    if (!check_threw_) ::torch_tpu::testing::fail(__FILE__, __LINE__, #statement " did not throw " #Type); \
  } while (0)
