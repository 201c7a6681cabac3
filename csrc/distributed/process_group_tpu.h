// ProcessGroupTpu: the c10d backend `tpu_dist` for device type "tpu".
//
// The transport is an existing host engine, c10d's own ProcessGroupGloo,
// passed in already connected (Python builds it from the same store, rank,
// size and timeout). Each collective stages its tpu tensors through host
// memory: inputs are copied to CPU tensors of the same sizes and strides
// (the copy waits for every earlier device op that writes them, in every
// eager mode), gloo runs the collective on those, and results are copied
// back into the tpu tensors in place, so views and aliases see them exactly
// as they would on CUDA. CPU tensors pass straight through to gloo.
//
// Before each collective the ranks exchange a fingerprint of the call (op,
// dtype, shape) through gloo, so mismatched calls raise the same
// RuntimeError on every rank instead of hanging or corrupting a buffer.
//
// Where every rank of the group is a thread of this process driving its own
// device (`program_devices`, one per rank), all_reduce, broadcast,
// all_gather, reduce_scatter and equal-split all_to_all of tpu tensors run
// in-program instead: one program replicated over the group's devices
// holding StableHLO's collective, each rank launching its own replica
// (csrc/device/collective_kernels.cpp), as a TPU slice runs them; inside a
// torch.compile graph the collective joins the graph's one program. The
// fingerprint then also says which transport each rank chose, and is always
// exchanged (eager calls), so mismatched calls raise with what each rank
// ran; the ranks' replicas then meet before entering the plugin
// (exec/program_launch.h), since a replica left alone there would end the
// process.
//
// A collective that fails in the transport (a peer died, the timeout passed,
// gloo saw mismatched data) raises at its call, or at wait() of its Work,
// and leaves the tpu tensors as they were. The ranks then no longer agree on
// where each is in the sequence of collectives, so the group is poisoned:
// every later call raises DistBackendError at once, naming the first
// failure, as gloo and NCCL do once a collective failed.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace torch_tpu::distributed {

class TransportFailure;

class ProcessGroupTpu : public c10d::Backend {
 public:
  ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                  std::vector<int64_t> program_devices = {});
  // Releases the host transport with the GIL released (see the definition).
  ~ProcessGroupTpu() override;

  const std::string getBackendName() const override { return "tpu_dist"; }
  const c10::intrusive_ptr<c10d::Backend>& host() const { return host_; }
  // The group's devices by rank when collectives run in-program, else empty.
  const std::vector<int64_t>& program_devices() const { return program_devices_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // dist.split_group: each new group is a tpu_dist group of its own, made by
  // `factory` (Python's creator, as c10d makes any tpu_dist group: its own
  // gloo group, its transport chosen anew) from the store c10d prefixed for
  // it. gloo's own split is not used: it reads the parent's global ranks,
  // which c10d leaves empty for a default group (a re-created one then
  // indexes an empty list), and writes the child's into the options it is
  // given.
  using GroupFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout)>;
  void set_split_factory(GroupFactory factory, std::chrono::milliseconds timeout) {
    split_factory_ = std::move(factory);
    timeout_ = timeout;
  }
  bool supportsSplitting() const override { return static_cast<bool>(split_factory_); }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // What c10d gives split(): only the timeout is read.
  c10::intrusive_ptr<Options> getBackendOptions() override {
    return c10::make_intrusive<Options>(getBackendName(), timeout_);
  }
  void abort() override;
  void shutdown() override;

 private:
  // Raises on every rank when the ranks' fingerprints of this call differ.
  void check_same_call(const char* op, const std::vector<at::Tensor>& tensors, bool shapes_must_match,
                       bool in_program = false);
  // Whether `t` is a tpu tensor on this rank's device of the in-program group.
  bool in_program(const at::Tensor& t) const;

  c10::intrusive_ptr<c10d::Backend> host_;
  // Shared with the completion callbacks of collectives still in flight.
  std::shared_ptr<TransportFailure> failure_;
  std::vector<int64_t> program_devices_;
  GroupFactory split_factory_;
  std::chrono::milliseconds timeout_{kBackendDefaultTimeout};
};

}  // namespace torch_tpu::distributed
