// pjrt:: against a real plugin (the one the Python tests use): load it,
// move bytes both ways, compile hlo::Builder programs and check their
// numbers, and turn the plugin's errors into PjrtError with its message.
#include <cstring>
#include <memory>
#include <vector>

#include "hlo/builder.h"
#include "pjrt/pjrt_runtime.h"
#include "test_runner.h"

using namespace torch_tpu::pjrt;  // the module under test
using torch_tpu::hlo::Builder;
using torch_tpu::hlo::ElementType;
using torch_tpu::hlo::Value;
using torch_tpu::testing::plugin_path;

namespace {

// One plugin and client for every test: a plugin is initialized once per
// process and never unloaded.
std::shared_ptr<Client> client() {
  static std::shared_ptr<Client> c = Client::create(Plugin::load(plugin_path()), Client::Options{});
  return c;
}

template <typename T>
std::shared_ptr<Buffer> upload(const std::vector<T>& values, PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  return client()->buffer_from_host(values.data(), type, dims, 0);
}

template <typename T>
std::vector<T> download(const Buffer& buffer, size_t count) {
  std::vector<T> values(count);
  buffer.to_host(values.data(), count * sizeof(T));
  return values;
}

std::vector<std::shared_ptr<Buffer>> run(const Builder& b, const std::vector<Value>& outputs,
                                         const std::vector<std::shared_ptr<Buffer>>& args,
                                         const std::vector<bool>& donatable = {}) {
  auto exe = client()->compile(b.finish(outputs), default_compile_options());
  std::vector<PJRT_Buffer*> raw;
  for (const auto& a : args) raw.push_back(a->raw());
  return exe->execute(client()->devices().at(0), raw, donatable);
}

}  // namespace

TEST(pjrt, plugin_loads_with_a_matching_api_and_its_attributes) {
  auto plugin = Plugin::load(plugin_path());
  CHECK_EQ(plugin->api_major(), PJRT_API_MAJOR);
  CHECK_EQ(plugin->path(), plugin_path());
  // Part of every compilation cache key (ARCHITECTURE.md, "Plugins").
  CHECK(plugin->attributes().count("stablehlo_current_version") == 1);
  CHECK(!plugin->attributes().at("stablehlo_current_version").empty());
}

TEST(pjrt, loading_what_is_not_a_plugin_names_the_problem) {
  CHECK_THROWS(Plugin::load("/nonexistent/plugin.so"), PjrtError, "cannot load PJRT plugin '/nonexistent/plugin.so'");
  CHECK_THROWS(Plugin::load("libm.so.6"), PjrtError, "'libm.so.6' is not a PJRT plugin: it has no GetPjrtApi symbol");
}

TEST(pjrt, client_has_a_device) {
  CHECK(!client()->devices().empty());
  CHECK(!client()->platform_name().empty());
}

TEST(pjrt, host_bytes_round_trip_through_a_device_buffer) {
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -7.0f};
  auto buffer = upload(values, PJRT_Buffer_Type_F32, {2, 3});
  CHECK_EQ(buffer->dims(), (std::vector<int64_t>{2, 3}));
  CHECK_EQ(static_cast<int>(buffer->element_type()), static_cast<int>(PJRT_Buffer_Type_F32));
  CHECK_EQ(download<float>(*buffer, 6), values);
  CHECK_THROWS(buffer->to_host(nullptr, 5), PjrtError, "device buffer holds 24 bytes, expected 5");
}

TEST(pjrt, compiled_builder_program_computes_its_numbers) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2, 3}});
  Value y = b.parameter({ElementType::F32, {3}});
  Value sum = b.binary("add", b.binary("multiply", x, b.broadcast_to(y, {2, 3})), b.splat(0.5, x.type));
  Value rows = b.reduce(sum, b.constant(0, ElementType::F32), {1}, "add");
  auto out = run(b, {sum, rows},
                 {upload<float>({1, 2, 3, 4, 5, 6}, PJRT_Buffer_Type_F32, {2, 3}),
                  upload<float>({10, 100, -1}, PJRT_Buffer_Type_F32, {3})});
  CHECK_EQ(out.size(), size_t{2});
  CHECK_EQ(download<float>(*out[0], 6), (std::vector<float>{10.5f, 200.5f, -2.5f, 40.5f, 500.5f, -5.5f}));
  CHECK_EQ(download<float>(*out[1], 2), (std::vector<float>{208.5f, 535.5f}));
}

// The typed gather/scatter helpers mean what their names say on a real
// compiler, not only as text.
TEST(pjrt, gather_and_scatter_helpers_address_the_elements_they_name) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {3, 2}});
  Value rows = b.parameter({ElementType::S64, {2, 1}});
  Value coords = b.parameter({ElementType::S64, {3, 2}});
  Value picked = b.gather_slices(x, 0, rows);
  Value points = b.gather_points(x, coords);
  // Duplicate coordinates: accumulate sums every update.
  Value added =
      b.scatter_points(b.splat(0, x.type), coords, b.splat(1, {ElementType::F32, {3}}), torch_tpu::hlo::accumulate);
  Value placed = b.scatter_slices(b.splat(0, x.type), 0, rows, picked, torch_tpu::hlo::overwrite);
  auto out = run(b, {picked, points, added, placed},
                 {upload<float>({0, 1, 10, 11, 20, 21}, PJRT_Buffer_Type_F32, {3, 2}),
                  upload<int64_t>({2, 0}, PJRT_Buffer_Type_S64, {2, 1}),
                  upload<int64_t>({1, 1, 2, 0, 1, 1}, PJRT_Buffer_Type_S64, {3, 2})});
  CHECK_EQ(download<float>(*out[0], 4), (std::vector<float>{20, 21, 0, 1}));
  CHECK_EQ(download<float>(*out[1], 3), (std::vector<float>{11, 20, 11}));
  CHECK_EQ(download<float>(*out[2], 6), (std::vector<float>{0, 0, 0, 2, 1, 0}));
  CHECK_EQ(download<float>(*out[3], 6), (std::vector<float>{0, 1, 0, 0, 20, 21}));
}

TEST(pjrt, dynamic_slice_clamps_its_start_into_range) {
  Builder b;
  Value x = b.parameter({ElementType::S32, {5}});
  Value start = b.parameter({ElementType::S32, {}});
  Value r = b.dynamic_slice(x, {start}, {2});
  auto in = upload<int32_t>({0, 10, 20, 30, 40}, PJRT_Buffer_Type_S32, {5});
  auto at1 = run(b, {r}, {in, upload<int32_t>({1}, PJRT_Buffer_Type_S32, {})});
  CHECK_EQ(download<int32_t>(*at1[0], 2), (std::vector<int32_t>{10, 20}));
  auto at9 = run(b, {r}, {in, upload<int32_t>({9}, PJRT_Buffer_Type_S32, {})});
  CHECK_EQ(download<int32_t>(*at9[0], 2), (std::vector<int32_t>{30, 40}));
}

// rng_bit_generator's bits depend only on the state: the same state gives
// the same bits, and a different state different ones.
TEST(pjrt, rng_bit_generator_is_a_function_of_its_state) {
  Builder b;
  Value state = b.parameter({ElementType::U64, {2}});
  auto [next, bits] = b.rng_bit_generator(state, {ElementType::U32, {16}}, torch_tpu::hlo::RngAlgorithm::ThreeFry);
  const std::string text = b.finish({next, bits});
  auto exe = client()->compile(text, default_compile_options());
  auto draw = [&](uint64_t key) {
    auto s = upload<uint64_t>({key, 0}, PJRT_Buffer_Type_U64, {2});
    return download<uint32_t>(*exe->execute(client()->devices().at(0), {s->raw()}, {})[1], 16);
  };
  std::vector<uint32_t> first = draw(7), again = draw(7), other = draw(8);
  CHECK_EQ(first, again);
  CHECK(first != other);
  CHECK(first != std::vector<uint32_t>(16, first[0]));  // not one repeated word
}

TEST(pjrt, malformed_program_raises_pjrt_error_with_the_plugins_message) {
  const std::string options = default_compile_options();
  CHECK_THROWS(client()->compile("module @torch_tpu { this is not MLIR", options), PjrtError,
               "Client_Compile failed: -:1:21: error: custom op 'this' is unknown");
  // Well-formed text whose op does not verify: the message is the plugin's
  // verifier naming the op.
  Builder b;
  Value x = b.parameter({ElementType::F32, {3}});
  Value wrong = b.op("add", {x, x}, {ElementType::F32, {4}});
  CHECK_THROWS(client()->compile(b.finish({wrong}), options), PjrtError,
               "'stablehlo.add' op requires the same shape for all operands and results");
}

TEST(pjrt, buffers_report_ready_through_events_that_outlive_them) {
  auto in = upload<float>({1, 2, 3}, PJRT_Buffer_Type_F32, {3});
  in->await_ready();
  CHECK(in->is_ready());
  Builder b;
  Value x = b.parameter({ElementType::F32, {3}});
  auto out = run(b, {b.binary("multiply", x, x)}, {in});
  auto ready = out[0]->ready_event();
  std::vector<float> squares = download<float>(*out[0], 3);
  out.clear();  // the buffer is gone; its event is still valid
  ready->await();
  CHECK(ready->is_ready());
  CHECK_EQ(squares, (std::vector<float>{1, 4, 9}));
}

// DeviceRuntime::run lists this event for synchronize(): once it is ready,
// every output of the execution is, and it outlives the outputs.
TEST(pjrt, execution_reports_its_completion_in_the_launch) {
  auto in = upload<float>({1, 2, 3}, PJRT_Buffer_Type_F32, {3});
  Builder b;
  Value x = b.parameter({ElementType::F32, {3}});
  auto exe =
      client()->compile(b.finish({b.binary("add", x, x), b.binary("multiply", x, x)}), default_compile_options());
  PJRT_Buffer* args[] = {in->raw()};
  std::shared_ptr<Event> done;
  auto out = exe->execute(client()->devices().at(0), args, 1, {}, 0, &done);
  CHECK(done != nullptr);
  CHECK_EQ(out.size(), size_t{2});
  done->await();
  CHECK(out[0]->is_ready());
  CHECK(out[1]->is_ready());
  CHECK_EQ(download<float>(*out[1], 3), (std::vector<float>{1, 4, 9}));
  out.clear();
  CHECK(done->is_ready());
}

// A donated argument's memory may become the output's: the runtime must not
// read it afterwards, and PJRT reports any attempt as an error, not garbage.
TEST(pjrt, donated_argument_is_consumed_by_the_execution) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {4}});
  b.mark_donated(x);
  auto in = upload<float>({1, 2, 3, 4}, PJRT_Buffer_Type_F32, {4});
  auto kept = upload<float>({1, 2, 3, 4}, PJRT_Buffer_Type_F32, {4});
  auto out = run(b, {b.binary("add", x, x)}, {in}, {true});
  CHECK_EQ(download<float>(*out[0], 4), (std::vector<float>{2, 4, 6, 8}));
  CHECK_THROWS(download<float>(*in, 4), PjrtError, "Buffer has been deleted or donated");
  auto again = run(b, {b.binary("add", x, x)}, {kept}, {false});  // not donatable: still readable
  CHECK_EQ(download<float>(*kept, 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST(pjrt, serialized_executable_runs_after_deserialization) {
  Builder b;
  Value x = b.parameter({ElementType::S32, {3}});
  Value r = b.binary("subtract", b.splat(100, x.type), x);
  auto exe = client()->compile(b.finish({r}), default_compile_options());
  auto loaded = client()->deserialize(exe->serialize());
  auto in = upload<int32_t>({1, 2, 3}, PJRT_Buffer_Type_S32, {3});
  auto out = loaded->execute(client()->devices().at(0), {in->raw()}, {});
  CHECK_EQ(download<int32_t>(*out[0], 3), (std::vector<int32_t>{99, 98, 97}));
}
