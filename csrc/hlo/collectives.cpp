#include "hlo/collectives.h"

#include <stdexcept>

namespace torch_tpu::hlo {
namespace {

// dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>. StableHLO wants equal-size
// groups in this attribute.
std::string groups_attr(const ReplicaGroups& groups) {
  if (groups.empty()) throw std::invalid_argument("collective: no replica groups");
  const size_t size = groups[0].size();
  std::string s = "dense<[";
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].size() != size) throw std::invalid_argument("collective: replica groups of different sizes");
    s += g ? ", [" : "[";
    for (size_t i = 0; i < size; ++i) s += (i ? ", " : "") + std::to_string(groups[g][i]);
    s += "]";
  }
  return s + "]> : tensor<" + std::to_string(groups.size()) + "x" + std::to_string(size) + "xi64>";
}

// A device-to-device channel (ChannelHandle type 1). With it and without
// use_global_device_ids, replica groups still name replicas.
std::string channel_attr(int64_t channel) {
  return "channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) + ", type = 1>";
}

int64_t group_size(const ReplicaGroups& groups) { return static_cast<int64_t>(groups.at(0).size()); }

// The 0-d combiner region every reducing collective carries.
Builder::RegionBody combine(const std::string& combiner) {
  return [combiner](Builder& b, const std::vector<Value>& args) {
    return std::vector<Value>{b.binary(combiner, args[0], args[1])};
  };
}

}  // namespace

Value all_reduce(Builder& b, const Value& v, const ReplicaGroups& groups, const std::string& combiner,
                 int64_t channel) {
  const TensorType scalar{v.dtype(), {}};
  return b.op_with_region("all_reduce", {v}, {v.type},
                          "replica_groups = " + groups_attr(groups) + ", " + channel_attr(channel), {scalar, scalar},
                          combine(combiner))[0];
}

Value all_gather(Builder& b, const Value& v, int64_t dim, const ReplicaGroups& groups, int64_t channel) {
  TensorType result = v.type;
  result.shape.at(dim) *= group_size(groups);
  return b.op("all_gather", {v}, result,
              "all_gather_dim = " + std::to_string(dim) + " : i64, replica_groups = " + groups_attr(groups) + ", " +
                  channel_attr(channel));
}

Value reduce_scatter(Builder& b, const Value& v, int64_t dim, const ReplicaGroups& groups, const std::string& combiner,
                     int64_t channel) {
  TensorType result = v.type;
  const int64_t n = group_size(groups);
  if (result.shape.at(dim) % n != 0) throw std::invalid_argument("reduce_scatter: dim not divisible by group size");
  result.shape[dim] /= n;
  const TensorType scalar{v.dtype(), {}};
  return b.op_with_region("reduce_scatter", {v}, {result},
                          "scatter_dimension = " + std::to_string(dim) +
                              " : i64, replica_groups = " + groups_attr(groups) + ", " + channel_attr(channel),
                          {scalar, scalar}, combine(combiner))[0];
}

Value all_to_all(Builder& b, const Value& v, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups,
                 int64_t channel) {
  TensorType result = v.type;
  const int64_t n = group_size(groups);
  if (result.shape.at(split_dim) % n != 0) throw std::invalid_argument("all_to_all: dim not divisible by group size");
  result.shape[split_dim] /= n;
  result.shape.at(concat_dim) *= n;
  // No channel handle: with one, XLA reads all_to_all's groups as
  // partitions. Its launches pair by the executable's own instruction id,
  // so the ranks of a process share one executable (DeviceRuntime).
  (void)channel;
  return b.op("all_to_all", {v}, result,
              "split_dimension = " + std::to_string(split_dim) +
                  " : i64, concat_dimension = " + std::to_string(concat_dim) +
                  " : i64, split_count = " + std::to_string(n) + " : i64, replica_groups = " + groups_attr(groups));
}

Value replica_id(Builder& b) { return b.op("replica_id", {}, {ElementType::U32, {}}); }

Value collective_permute(Builder& b, const Value& v, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::string s = "dense<[";
  for (size_t i = 0; i < pairs.size(); ++i)
    s += (i ? ", [" : "[") + std::to_string(pairs[i].first) + ", " + std::to_string(pairs[i].second) + "]";
  s += "]> : tensor<" + std::to_string(pairs.size()) + "x2xi64>";
  return b.op("collective_permute", {v}, v.type, "source_target_pairs = " + s);
}

}  // namespace torch_tpu::hlo
