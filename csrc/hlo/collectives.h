// StableHLO's collectives over the replicas of a replicated program
// (pjrt::replicated_compile_options): all_reduce, all_gather,
// reduce_scatter, all_to_all, collective_permute, and replica_id.
// (collective_broadcast is left out: XLA:CPU cannot compile it.)
// Replica groups name replicas, so one program text serves any device
// assignment of the same size. all_reduce, all_gather and reduce_scatter
// carry a channel handle (XLA reads all_to_all's and collective_permute's
// groups as partitions when they have one): `channel`, unique per collective in the program
// and the same on every replica, is how the replicas' launches pair that
// collective (the plugin's rendezvous key), even where each rank compiled
// the program itself.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::hlo {

// Replica ids, one list per group; every replica is in exactly one group.
using ReplicaGroups = std::vector<std::vector<int64_t>>;

// Every replica's `v` combined elementwise by `combiner` ("add", "multiply",
// "maximum", "minimum", "and", "or"), on every replica of its group.
Value all_reduce(Builder& b, const Value& v, const ReplicaGroups& groups, const std::string& combiner, int64_t channel);
// The group's `v`s concatenated along `dim`, in replica order.
Value all_gather(Builder& b, const Value& v, int64_t dim, const ReplicaGroups& groups, int64_t channel);
// all_reduce, then replica k of a group keeps the k-th of the group-size
// equal blocks of `dim`.
Value reduce_scatter(Builder& b, const Value& v, int64_t dim, const ReplicaGroups& groups, const std::string& combiner,
                     int64_t channel);
// `v` split into group-size blocks along `split_dim`; block j goes to the
// group's j-th replica, which concatenates what it receives along
// `concat_dim` in sender order.
Value all_to_all(Builder& b, const Value& v, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups,
                 int64_t channel);
// This replica's id, a 0-d ui32: one program text serves every replica,
// and what differs per replica is computed from it.
Value replica_id(Builder& b);
// Replica `target` receives the `v` of replica `source` for each (source,
// target) pair; a replica no pair targets gets zeros.
Value collective_permute(Builder& b, const Value& v, const std::vector<std::pair<int64_t, int64_t>>& pairs);

}  // namespace torch_tpu::hlo
