// hlo/collectives.h compiled as replicated programs
// (pjrt::replicated_compile_options) and run on a 4-device client, one
// thread per replica as the ranks of a process group launch them: each
// collective's numbers, replica groups of 2, and a device assignment that is
// not the identity.
#include <memory>
#include <thread>
#include <vector>

#include "hlo/builder.h"
#include "hlo/collectives.h"
#include "pjrt/pjrt_runtime.h"
#include "test_runner.h"

using namespace torch_tpu::hlo;  // the module under test
using torch_tpu::pjrt::Buffer;
using torch_tpu::pjrt::Client;
using torch_tpu::pjrt::Plugin;
using torch_tpu::testing::plugin_path;

namespace {

constexpr int kDevices = 4;

std::shared_ptr<Client> four_device_client() {
  static std::shared_ptr<Client> c = [] {
    Client::Options options;
    options.cpu_device_count = kDevices;
    return Client::create(Plugin::load(plugin_path()), options);
  }();
  return c;
}

// Runs `program` (one f32 parameter of `dims`, one f32 result) on
// `devices` (replica k on devices[k]), replica k's input being inputs[k];
// returns each replica's result.
std::vector<std::vector<float>> run_replicated(const Builder& b, const Value& out, const std::vector<int64_t>& devices,
                                               const std::vector<std::vector<float>>& inputs,
                                               const std::vector<int64_t>& dims, int launch_id) {
  auto client = four_device_client();
  std::vector<int64_t> ids;
  for (int64_t d : devices) ids.push_back(client->device_id(d));
  auto exe = client->compile(b.finish({out}), torch_tpu::pjrt::replicated_compile_options(ids));
  std::vector<std::vector<float>> results(devices.size());
  std::vector<std::thread> ranks;
  for (size_t k = 0; k < devices.size(); ++k) {
    ranks.emplace_back([&, k] {
      auto in = client->buffer_from_host(inputs[k].data(), PJRT_Buffer_Type_F32, dims, devices[k]);
      auto outs = exe->execute(client->devices().at(devices[k]), {in->raw()}, {false}, launch_id);
      const auto out_dims = outs[0]->dims();
      size_t n = 1;
      for (int64_t d : out_dims) n *= d;
      results[k].resize(n);
      outs[0]->to_host(results[k].data(), n * sizeof(float));
    });
  }
  for (auto& t : ranks) t.join();
  return results;
}

// Replica k's input: {10k, 10k + 1, ...}.
std::vector<std::vector<float>> rank_inputs(size_t ranks, size_t n) {
  std::vector<std::vector<float>> inputs(ranks);
  for (size_t k = 0; k < ranks; ++k) {
    for (size_t i = 0; i < n; ++i) inputs[k].push_back(10.0f * k + i);
  }
  return inputs;
}

}  // namespace

TEST(collectives, all_reduce_sums_and_takes_the_max_over_every_replica) {
  for (const char* combiner : {"add", "maximum"}) {
    Builder b;
    Value x = b.parameter({ElementType::F32, {3}});
    Value y = all_reduce(b, x, {{0, 1, 2, 3}}, combiner, 1);
    auto results = run_replicated(b, y, {0, 1, 2, 3}, rank_inputs(4, 3), {3}, 1);
    const bool add = std::string(combiner) == "add";
    const std::vector<float> expected = add ? std::vector<float>{60, 64, 68} : std::vector<float>{30, 31, 32};
    for (const auto& r : results) CHECK_EQ(r, expected);
  }
}

TEST(collectives, replica_groups_of_two_reduce_separately_on_a_permuted_assignment) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2}});
  Value y = all_reduce(b, x, {{0, 1}, {2, 3}}, "add", 1);
  // Replica k runs on device devices[k]; groups name replicas, not devices.
  auto results = run_replicated(b, y, {3, 1, 0, 2}, rank_inputs(4, 2), {2}, 2);
  CHECK_EQ(results[0], (std::vector<float>{10, 12}));
  CHECK_EQ(results[1], (std::vector<float>{10, 12}));
  CHECK_EQ(results[2], (std::vector<float>{50, 52}));
  CHECK_EQ(results[3], (std::vector<float>{50, 52}));
}

TEST(collectives, all_gather_concatenates_in_replica_order) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {1, 2}});
  Value y = all_gather(b, x, 0, {{0, 1, 2}}, 1);
  auto results = run_replicated(b, y, {0, 1, 2}, rank_inputs(3, 2), {1, 2}, 3);
  for (const auto& r : results) CHECK_EQ(r, (std::vector<float>{0, 1, 10, 11, 20, 21}));
}

TEST(collectives, reduce_scatter_leaves_each_replica_its_block_of_the_sum) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {4}});
  Value y = reduce_scatter(b, x, 0, {{0, 1}}, "add", 1);
  auto results = run_replicated(b, y, {0, 1}, rank_inputs(2, 4), {4}, 4);
  CHECK_EQ(results[0], (std::vector<float>{10, 12}));
  CHECK_EQ(results[1], (std::vector<float>{14, 16}));
}

TEST(collectives, all_to_all_sends_block_j_to_replica_j) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2}});
  Value y = all_to_all(b, x, 0, 0, {{0, 1}}, 1);
  auto results = run_replicated(b, y, {0, 1}, rank_inputs(2, 2), {2}, 5);
  CHECK_EQ(results[0], (std::vector<float>{0, 10}));
  CHECK_EQ(results[1], (std::vector<float>{1, 11}));
}

TEST(collectives, replica_id_tells_each_replica_which_it_is) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2}});
  Value id = b.broadcast_to(b.convert(replica_id(b), ElementType::F32), {2});
  Value y = b.binary("add", x, id);
  auto results = run_replicated(b, y, {2, 0, 3}, rank_inputs(3, 2), {2}, 6);
  CHECK_EQ(results[0], (std::vector<float>{0, 1}));
  CHECK_EQ(results[1], (std::vector<float>{11, 12}));
  CHECK_EQ(results[2], (std::vector<float>{22, 23}));
}

TEST(collectives, collective_permute_moves_along_the_pairs_and_zeros_the_rest) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2}});
  Value y = collective_permute(b, x, {{0, 1}, {1, 2}});
  auto results = run_replicated(b, y, {0, 1, 2}, rank_inputs(3, 2), {2}, 7);
  CHECK_EQ(results[0], (std::vector<float>{0, 0}));
  CHECK_EQ(results[1], (std::vector<float>{0, 1}));
  CHECK_EQ(results[2], (std::vector<float>{10, 11}));
}

TEST(collectives, replica_groups_of_different_sizes_are_refused) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {2}});
  CHECK_THROWS(all_reduce(b, x, {{0, 1}, {2}}, "add", 1), std::invalid_argument,
               "collective: replica groups of different sizes");
}

TEST(collectives, replicated_compile_options_encode_the_device_assignment) {
  // executable_build_options (3) { num_replicas (4): 2, num_partitions (5): 1,
  // device_assignment (9) { replica_count: 2, computation_count: 1,
  // computation_devices (3) { replica_device_ids (1): packed [5, 7] } } }
  const std::string expected("\x1a\x10\x20\x02\x28\x01\x4a\x0a\x08\x02\x10\x01\x1a\x04\x0a\x02\x05\x07", 18);
  CHECK_EQ(torch_tpu::pjrt::replicated_compile_options({5, 7}), expected);
}
