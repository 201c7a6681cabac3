// The in-program transport of `tpu_dist` (csrc/distributed/): each
// collective is a program replicated over the process group's devices,
// rank k being replica k, holding StableHLO's collective
// (lower/collective.h), launched by every rank as its own replica. This is
// how a TPU slice runs collectives (over ICI, inside programs). Here it
// runs where every rank of a group is a thread of this process driving its
// own device (TORCH_TPU_NUM_DEVICES), the XLA:CPU plugin's collectives
// being in-process. The ops are in the `torch_tpu` namespace, called by the
// backend through the dispatcher, so the distributed module needs nothing
// of the device layer but these schemas:
//
//   torch_tpu::collective_all_reduce_(self, op, factor, devices)
//   torch_tpu::collective_broadcast_(self, root, devices)
//   torch_tpu::collective_all_gather_into(out, input, devices)
//   torch_tpu::collective_reduce_scatter_into(out, input, op, factor, devices)
//   torch_tpu::collective_all_to_all_into(out, input, devices)
//   torch_tpu::collective_write_back_(self, src)   (the host transport's)
//   torch_tpu::collective_joins_program(self)      (in a graph capture?)
//
// `devices` are the group's device indices in rank order; the program's
// text is the same on every rank (what differs per rank is computed from
// its replica id). Eager, each collective is a program of its own (channel
// 1); in a graph capture it joins the graph's program (the n-th collective
// there is channel n), so a compiled step with collectives replays as one
// program (tensor_program.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "exec/mode_executor.h"
#include "exec/tensor_program.h"
#include "lower/collective.h"

namespace torch_tpu::device {
namespace {

using lower::CollectiveReduce;

CollectiveReduce reduce_op(std::string_view name) {
  static const std::pair<std::string_view, CollectiveReduce> kOps[] = {{"SUM", CollectiveReduce::Sum},
                                                                       {"AVG", CollectiveReduce::Avg},
                                                                       {"PRODUCT", CollectiveReduce::Product},
                                                                       {"MIN", CollectiveReduce::Min},
                                                                       {"MAX", CollectiveReduce::Max},
                                                                       {"BAND", CollectiveReduce::BitwiseAnd},
                                                                       {"BOR", CollectiveReduce::BitwiseOr},
                                                                       {"BXOR", CollectiveReduce::BitwiseXor},
                                                                       {"PREMUL_SUM", CollectiveReduce::PremulSum}};
  for (const auto& [n, op] : kOps) {
    if (n == name) return op;
  }
  TORCH_CHECK(false, "tpu_dist: unknown reduce op ", name);
}

// The replicated program one rank runs: on `t`'s device, which must be
// one of the group's.
ProgramState::Replication replication(const at::Tensor& t, at::IntArrayRef devices) {
  TORCH_CHECK(t.device().is_privateuseone(), "tpu_dist: expected a tpu tensor, got one on ", t.device());
  const int64_t device = t.device().index();
  bool member = false;
  for (int64_t d : devices) member = member || d == device;
  TORCH_CHECK(member, "tpu_dist: tensor on ", t.device(), " is not on a device of the process group (", devices, ")");
  return {std::vector<int64_t>(devices.begin(), devices.end())};
}

// A lowering's refusal (std::invalid_argument) is the user's mistake.
template <typename Body>
void record(const char* op, Body body) {
  try {
    body();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK(false, op, ": ", e.what());
  }
}

at::Tensor& all_reduce_(at::Tensor& self, c10::string_view op, double factor, at::IntArrayRef devices) {
  record("allreduce", [&] {
    TensorProgram p(self.device().index(), replication(self, devices));
    hlo::Value x = p.read(self);
    p.write(self, lower::lower_all_reduce(p.builder(), x, reduce_op(op), factor, devices.size(), p.channel()));
    p.run("c10d::allreduce");
  });
  return self;
}

at::Tensor& broadcast_(at::Tensor& self, int64_t root, at::IntArrayRef devices) {
  record("broadcast", [&] {
    TensorProgram p(self.device().index(), replication(self, devices));
    hlo::Value x = p.read(self);
    p.write(self, lower::lower_broadcast(p.builder(), x, root, devices.size(), p.channel()));
    p.run("c10d::broadcast");
  });
  return self;
}

// The flat elements of `input`, as the block-of-dim-0 collectives move them
// (a row-major flattening keeps each dim-0 block contiguous).
hlo::Value flat(TensorProgram& p, const at::Tensor& input) {
  hlo::Value x = p.read(input);
  return p.builder().reshape(x, {input.numel()});
}

void write_flat(TensorProgram& p, const at::Tensor& out, const hlo::Value& v) {
  p.write(out, p.builder().reshape(v, out.sizes().vec()));
}

// An output collective's tensors: the program runs on the input's device
// and writes the output there.
void check_output(const at::Tensor& out, const at::Tensor& input) {
  TORCH_CHECK(out.device() == input.device(), "tpu_dist: the output tensor is on ", out.device(),
              " but the input tensor is on ", input.device(), "; both must be on the rank's device");
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "output tensor must have the same type as input tensor");
}

at::Tensor& all_gather_into(at::Tensor& out, const at::Tensor& input, at::IntArrayRef devices) {
  TORCH_CHECK(out.numel() == input.numel() * static_cast<int64_t>(devices.size()),
              "output tensor size must be equal to world_size times input tensor size");
  check_output(out, input);
  record("allgather", [&] {
    TensorProgram p(input.device().index(), replication(input, devices));
    write_flat(p, out, lower::lower_all_gather(p.builder(), flat(p, input), devices.size(), p.channel()));
    p.run("c10d::allgather");
  });
  return out;
}

at::Tensor& reduce_scatter_into(at::Tensor& out, const at::Tensor& input, c10::string_view op, double factor,
                                at::IntArrayRef devices) {
  TORCH_CHECK(input.numel() == out.numel() * static_cast<int64_t>(devices.size()),
              "input tensor must be the same size as output size times world size");
  check_output(out, input);
  record("reduce_scatter", [&] {
    TensorProgram p(input.device().index(), replication(input, devices));
    hlo::Value x = flat(p, input);
    write_flat(p, out, lower::lower_reduce_scatter(p.builder(), x, reduce_op(op), factor, devices.size(), p.channel()));
    p.run("c10d::reduce_scatter");
  });
  return out;
}

at::Tensor& all_to_all_into(at::Tensor& out, const at::Tensor& input, at::IntArrayRef devices) {
  // Rank r's block is rows [r*n/k, (r+1)*n/k) of dim 0, as c10d's equal
  // split cuts it: the row-major flattening keeps it contiguous only when
  // k divides dim 0.
  const int64_t ranks = static_cast<int64_t>(devices.size());
  TORCH_CHECK(input.dim() > 0 && input.size(0) % ranks == 0 && out.dim() > 0 && out.size(0) % ranks == 0,
              "Tensor's dim 0 does not divide equally across group size");
  TORCH_CHECK(out.numel() == input.numel(), "alltoall: the output tensor has ", out.numel(),
              " elements but the input has ", input.numel());
  check_output(out, input);
  record("alltoall", [&] {
    TensorProgram p(input.device().index(), replication(input, devices));
    write_flat(p, out, lower::lower_all_to_all(p.builder(), flat(p, input), devices.size(), p.channel()));
    p.run("c10d::alltoall");
  });
  return out;
}

// Whether a collective on `self` joins a graph capture's program (the
// calling thread is capturing on its device) rather than running now.
bool joins_program(const at::Tensor& self) {
  return self.device().is_privateuseone() && graph_capture_on(self.device().index());
}

// The host transport's asynchronous write-back: a collective's result,
// copied into its tpu tensor from whichever thread completes it (gloo's, in
// a completion callback), in Strict mode there, so the copy runs now rather
// than waiting in that thread's DeferAndFuse program.
at::Tensor& write_back_(at::Tensor& self, const at::Tensor& src) {
  ScopedEagerMode strict(runtime::EagerMode::Strict);
  self.copy_(src);
  return self;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_tpu, m) {
  m.def("collective_write_back_(Tensor(a!) self, Tensor src) -> Tensor(a!)");
  m.def("collective_joins_program(Tensor self) -> bool");
  m.def("collective_all_reduce_(Tensor(a!) self, str op, float factor, int[] devices) -> Tensor(a!)");
  m.def("collective_broadcast_(Tensor(a!) self, int root, int[] devices) -> Tensor(a!)");
  m.def("collective_all_gather_into(Tensor(a!) out, Tensor input, int[] devices) -> Tensor(a!)");
  m.def(
      "collective_reduce_scatter_into(Tensor(a!) out, Tensor input, str op, float factor, int[] devices) -> "
      "Tensor(a!)");
  m.def("collective_all_to_all_into(Tensor(a!) out, Tensor input, int[] devices) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(torch_tpu, PrivateUse1, m) {
  m.impl("collective_all_reduce_", TORCH_FN(all_reduce_));
  m.impl("collective_broadcast_", TORCH_FN(broadcast_));
  m.impl("collective_all_gather_into", TORCH_FN(all_gather_into));
  m.impl("collective_reduce_scatter_into", TORCH_FN(reduce_scatter_into));
  m.impl("collective_all_to_all_into", TORCH_FN(all_to_all_into));
  m.impl("collective_write_back_", TORCH_FN(write_back_));
  m.impl("collective_joins_program", TORCH_FN(joins_program));
}

}  // namespace torch_tpu::device
