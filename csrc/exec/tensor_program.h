// Building and running programs over `tpu` tensors: storages become
// parameters (deduplicated, so `x.add_(x)` reads one buffer), views are read
// and written through their layouts, fresh outputs get new storages. Used by
// every kernel: lowered ops, copies, factories.
//
// Strict and Debug: each op builds and launches its own program.
// DeferAndFuse: ops append to the thread's pending program for the device
// (pending_work.h); a flush (a value needed on the host, sync, a mode
// change, a size bound, an optimizer step) compiles the whole run of ops as
// one program. Storages that died before the flush are never materialized.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/storage_buffer.h"
#include "exec/pending_work.h"
#include "exec/program_launch.h"
#include "exec/program_state.h"
#include "hlo/builder.h"
#include "lower/lowering.h"
#include "runtime/view_layout.h"

namespace torch_tpu::device {

runtime::ViewLayout layout_of(const at::Tensor& t);

// A view's storage offset as a 0-d S64 buffer on `device`, shared by every
// program input of that offset (buffers are immutable and never donated).
runtime::BufferPtr view_offset_buffer(int64_t offset, int device);

class TensorProgram {
 public:
  explicit TensorProgram(int device);
  // A collective's program, replicated over a process group's devices.
  // In a graph capture (torch.compile) it joins the graph's program, as a
  // TPU runs a compiled step: every rank captures the same graph, so the
  // ranks' programs hold the same collectives in the same order. Elsewhere
  // it is a program of its own, launched by run() in every mode after the
  // thread's DeferAndFuse work (which may write what it reads): eager
  // ranks flush at different points (a host read on rank 0 alone), so
  // their pending programs could not be trusted to pair up.
  TensorProgram(int device, ProgramState::Replication replication);
  // The collective's channel handle in this program (replicated programs).
  int channel() const { return channel_; }
  ~TensorProgram();  // an op that threw leaves the pending program as it was
  TensorProgram(const TensorProgram&) = delete;
  TensorProgram& operator=(const TensorProgram&) = delete;

  hlo::Builder& builder() { return state_->b; }
  int device() const { return device_; }
  // The program so far, and its first parameter this op added.
  const ProgramState& state() const { return *state_; }
  size_t first_param() const { return args_at_start_; }
  // The tensors this op read or wrote at a static non-zero offset (views of
  // storages the program made, program_layout): a replay's key keeps
  // their offsets exact.
  const std::vector<const c10::TensorImpl*>& static_offset_views() const { return static_offset_views_; }
  // DeferAndFuse: what a later call must match to replay this op
  // (step_replay.h), kept with the op when run() records it.
  void set_step_key(std::shared_ptr<const StepOpKey> key) { step_key_ = std::move(key); }

  // The tensor's elements (its view), in its own dtype.
  hlo::Value read(const at::Tensor& t);
  // A CPU tensor (a wrapped scalar, say) as a program input.
  // `origin`: for a Python float the dispatcher wrapped (x * 2.5), its
  // position in the call's signature (call_signature.h), so a replay can feed a new number
  // (ParamSource::HostScalar); -1 keeps the number the program's.
  hlo::Value host_input(const at::Tensor& cpu, int origin = -1);
  // Writes `v` (converted to t's dtype) into t's view of its storage.
  void write(const at::Tensor& t, const hlo::Value& v);
  // An in-place scatter (lower::LowerContext::PointUpdate): each point goes
  // through t's view to its element of the flat storage, and one scatter
  // updates the storage's buffer, which XLA then updates in place (its
  // buffer is donated): the cost is the update's, not the storage's.
  // Where points cannot be placed so (a byte-level view, a layout whose
  // elements may overlap), writes `whole`, the op's full result, as write().
  void write_points(const at::Tensor& t, const hlo::Value& whole, const lower::LowerContext::PointUpdate& points);
  // A new tensor with `sizes`/`strides`/`dtype` holding `v`.
  at::Tensor produce(const hlo::Value& v, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);
  void produce_into(const at::Tensor& fresh, const hlo::Value& v);

  // Host scalars, RNG states and index range checks a lowering asked for.
  void bind_lowering_inputs(lower::LowerContext& ctx, const at::Generator& generator);

  // Strict/Debug: compiles (or finds) and launches the program, no waiting.
  // DeferAndFuse: records the op; flushes when the pending program is full.
  // `op` names it in errors (a failed fused program names the op that failed).
  void run(const std::string& op = "");
  // Strict/Debug, instead of run(): hands the program over unrun, for the
  // op cache to capture (csrc/exec/op_cache.h).
  std::unique_ptr<ProgramState> release();

 private:
  // Where the program stood before this op, to rewind to if the op throws.
  void remember_start();
  ProgramState::Slot& slot_for(const at::Tensor& t);
  void save_for_undo(size_t slot_index);
  hlo::Value flat_as(ProgramState::Slot& slot, hlo::ElementType dtype);
  void bind(const hlo::Value& param, runtime::BufferPtr buffer, ParamSource source);
  // The slot reads `buffer` (its storage's, as `dtype` elements) from here on.
  void bind_storage(ProgramState::Slot& slot, runtime::BufferPtr buffer, hlo::ElementType dtype);
  // t's layout in this program: a non-zero offset is a program input
  // (ParamSource::Kind::ViewOffset); offset 0 stays static, the common
  // whole-tensor read keeping its plain reshape, and so does a view of a
  // storage this program made (a fused program's q and k of its own qkv
  // projection, whose offsets its own ops fix: XLA sees them as constants).
  runtime::ViewLayout program_layout(const ProgramState::Slot& slot, const at::Tensor& t);
  // Whether every range check of this op holds (tensor<i1>); none without checks.
  std::optional<hlo::Value> op_checks_hold();

  int device_;
  bool deferred_;
  std::unique_ptr<ProgramState> own_;  // Strict/Debug
  ProgramState* state_;
  std::unique_lock<std::recursive_mutex> lock_;  // DeferAndFuse: the device's pending program
  hlo::Builder::Checkpoint checkpoint_;
  size_t slots_at_start_ = 0, args_at_start_ = 0, checks_at_start_ = 0, undo_at_start_ = 0;
  bool finished_ = false;
  int channel_ = 0;
  bool made_replicated_ = false;  // this op made the pending program replicated (undone if it throws)
  std::shared_ptr<const StepOpKey> step_key_;
  std::vector<const c10::TensorImpl*> static_offset_views_;
};

at::Tensor empty_tpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype, int device);
int current_device();
int checked_device_index(const c10::Device& d);  // raises for an index >= device_count()

}  // namespace torch_tpu::device
