// Building and running programs over `tpu` tensors: storages become
// parameters (deduplicated, so `x.add_(x)` reads one buffer), views are read
// and written through their layouts, fresh outputs get new storages. Used by
// every kernel: lowered ops, copies, factories.
//
// Strict and Debug: each op builds and launches its own program.
// DeferAndFuse: ops append to one pending program per device; a flush (a
// value needed on the host, sync, a mode change, a size bound, an optimizer
// step) compiles the whole run of ops as one program. Storages that died
// before the flush are never materialized.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/storage_buffer.h"
#include "hlo/builder.h"
#include "lower/lowering.h"
#include "runtime/view_layout.h"

namespace torch_tpu::device {

runtime::ViewLayout layout_of(const at::Tensor& t);

// Where a program parameter's buffer came from; a captured graph program
// (csrc/device/graph_capture.cpp) rebinds parameters from these on replay.
struct ParamSource {
  enum class Kind { Storage, HostTensor, Constant, Rng, HostScalar };
  Kind kind = Kind::Constant;
  uint64_t storage_id = 0;                // Storage: the StorageBuffer id
  const c10::TensorImpl* host = nullptr;  // HostTensor: identity only, never dereferenced
  at::Generator generator;                // Rng: drawn from again on replay
  // HostScalar: a Python float the lowering made an input (lower::HostScalar):
  // its value, dtype, origins in the op cache's signature, whether the
  // program also serves a number with no origin (then it is a constant), and
  // whether another number must fit `dtype` to be fed to it.
  double value = 0;
  hlo::ElementType dtype = hlo::ElementType::F32;
  std::vector<int> origins;
  bool fixed = true;
  bool range_checked = false;
};

// An index range check's failure: its message and exception type.
struct RangeCheckInfo {
  std::string message;
  bool runtime_error = false;  // RuntimeError (gather/scatter on CPU) rather than IndexError
};

// One program under construction and the buffers bound to its parameters.
struct ProgramState {
  struct Slot {
    uint64_t storage_id;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // weak: dead storages need no output
    size_t nbytes;
    std::optional<hlo::Value> param;
    std::optional<hlo::Value> current;  // flat value after this program's writes
    bool written = false;
  };
  explicit ProgramState(int device) : device(device) {}
  int device;
  hlo::Builder b;
  std::vector<Slot> slots;
  std::vector<runtime::BufferPtr> args;  // by parameter index
  std::vector<ParamSource> sources;      // by parameter index
  std::vector<std::pair<hlo::Value, RangeCheckInfo>> range_checks;  // extra tensor<i1> outputs
  int ops = 0;
};

class TensorProgram {
 public:
  explicit TensorProgram(int device);
  ~TensorProgram();  // an op that threw leaves the pending program as it was
  TensorProgram(const TensorProgram&) = delete;
  TensorProgram& operator=(const TensorProgram&) = delete;

  hlo::Builder& builder() { return state_->b; }
  int device() const { return device_; }

  // The tensor's elements (its view), in its own dtype.
  hlo::Value read(const at::Tensor& t);
  // A CPU tensor (a wrapped scalar, say) as a program input.
  // `origin`: for a Python float the dispatcher wrapped (x * 2.5), its
  // position in the op cache's signature, so a replay can feed a new number
  // (ParamSource::HostScalar); -1 keeps the number the program's.
  hlo::Value host_input(const at::Tensor& cpu, int origin = -1);
  // Writes `v` (converted to t's dtype) into t's view of its storage.
  void write(const at::Tensor& t, const hlo::Value& v);
  // A new tensor with `sizes`/`strides`/`dtype` holding `v`.
  at::Tensor produce(const hlo::Value& v, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);
  void produce_into(const at::Tensor& fresh, const hlo::Value& v);

  // Host scalars, RNG states and index range checks a lowering asked for.
  void bind_lowering_inputs(lower::LowerContext& ctx, const at::Generator& generator);

  // Strict/Debug: compiles (or finds) and launches the program, no waiting.
  // DeferAndFuse: records the op; flushes when the pending program is full.
  void run();
  // Strict/Debug, instead of run(): hands the program over unrun, for the
  // op cache to capture (csrc/device/op_cache.h).
  std::unique_ptr<ProgramState> release();

 private:
  ProgramState::Slot& slot_for(const at::Tensor& t);
  hlo::Value flat_as(ProgramState::Slot& slot, hlo::ElementType dtype);
  void bind(const hlo::Value& param, runtime::BufferPtr buffer, ParamSource source);

  int device_;
  bool deferred_;
  std::unique_ptr<ProgramState> own_;  // Strict/Debug
  ProgramState* state_;
  std::unique_lock<std::recursive_mutex> lock_;  // DeferAndFuse: the device's pending program
  hlo::Builder::Checkpoint checkpoint_;
  size_t slots_at_start_ = 0, args_at_start_ = 0, checks_at_start_ = 0;
  bool finished_ = false;
};

// DeferAndFuse: runs every device's pending program. `reason` is counted in
// the metrics (flushes::<reason>). Cheap when nothing is pending.
void flush_deferred(const char* reason);

// Graph capture (torch.compile): between begin and end, the device's ops
// record into one pending program that no flush may split (a flush marks
// the capture broken) and that donates nothing, so it can be replayed with
// other buffers. end_graph_capture hands the program over (null when nothing
// was recorded); `broken` says whether a flush split it.
void begin_graph_capture(int device);
std::unique_ptr<ProgramState> end_graph_capture(int device, bool* broken);
// Abandons a capture after an error; the pending program is flushed.
void abort_graph_capture();

// Queues a program's range-check results (results[first...], one per
// message) for verification at the next host wait.
void queue_range_checks(const std::vector<RangeCheckInfo>& checks, const std::vector<runtime::BufferPtr>& results,
                        size_t first);

// Index range checks of programs that ran: raises IndexError for the first
// that failed (naming its op). Called wherever the host waits anyway.
void verify_range_checks();

at::Tensor empty_tpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype, int device);
int current_device();
int checked_device_index(const c10::Device& d);  // raises for an index >= device_count()

}  // namespace torch_tpu::device
