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
  // its value, dtype, origins in the op cache's signature, and whether the
  // program also serves a number with no origin (then it is a constant).
  double value = 0;
  hlo::ElementType dtype = hlo::ElementType::F32;
  std::vector<int> origins;
  bool fixed = true;
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
  // Where one recorded op began, so the program can be cut back to the ops
  // before it: an op that throws while recording, or, when a fused program
  // fails, the ops before the one that made it fail (they still run).
  struct OpRecord {
    std::string name;
    hlo::Builder::Checkpoint checkpoint;
    size_t slots = 0, args = 0, checks = 0, undo = 0;
  };
  // A slot an op changed that existed before it, as it was.
  struct SlotUndo {
    size_t slot;
    std::optional<hlo::Value> param, current;
    bool written;
  };
  explicit ProgramState(int device) : device(device) {}
  int device;
  hlo::Builder b;
  std::vector<Slot> slots;
  std::vector<runtime::BufferPtr> args;  // by parameter index
  std::vector<ParamSource> sources;      // by parameter index
  std::vector<std::pair<hlo::Value, RangeCheckInfo>> range_checks;  // extra tensor<i1> outputs
  std::vector<OpRecord> ops;  // one per op recorded (Strict: the one op)
  std::vector<SlotUndo> undo;
  PendingWork* owner = nullptr;  // DeferAndFuse: the thread whose pending program this is
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
  // `op` names it in errors (a failed fused program names the op that failed).
  void run(const std::string& op = "");
  // Strict/Debug, instead of run(): hands the program over unrun, for the
  // op cache to capture (csrc/device/op_cache.h).
  std::unique_ptr<ProgramState> release();

 private:
  ProgramState::Slot& slot_for(const at::Tensor& t);
  void save_for_undo(size_t slot_index);
  hlo::Value flat_as(ProgramState::Slot& slot, hlo::ElementType dtype);
  void bind(const hlo::Value& param, runtime::BufferPtr buffer, ParamSource source);

  int device_;
  bool deferred_;
  std::unique_ptr<ProgramState> own_;  // Strict/Debug
  ProgramState* state_;
  std::unique_lock<std::recursive_mutex> lock_;  // DeferAndFuse: the device's pending program
  hlo::Builder::Checkpoint checkpoint_;
  size_t slots_at_start_ = 0, args_at_start_ = 0, checks_at_start_ = 0, undo_at_start_ = 0;
  bool finished_ = false;
};

// Threads. Each thread has its own eager mode (runtime/eager_mode.h), its
// own pending DeferAndFuse programs and its own graph capture: its ops never
// land in another thread's program. What threads share are storages: a
// program that reads a storage another thread's pending program writes runs
// that program first (settle_pending_writes), and a storage rewritten by
// another thread while a pending program reads it is read anew by later ops.

// DeferAndFuse: runs the calling thread's pending programs (every device).
// `reason` is counted in the metrics (flushes::<reason>). Cheap when nothing
// is pending.
void flush_deferred(const char* reason);

// Runs the pending program (of any thread) that writes `sb`, so its buffer
// is current. Cheap when no thread has pending work.
void settle_pending_writes(StorageBuffer& sb);

// Graph capture (torch.compile), per thread: between begin and end, the
// thread's ops on the device record into one pending program that no flush
// may split (a flush marks the capture broken) and that donates nothing, so
// it can be replayed with other buffers. end_graph_capture hands the program
// over (null when nothing was recorded); `broken` says whether a flush split it.
void begin_graph_capture(int device);
std::unique_ptr<ProgramState> end_graph_capture(int device, bool* broken);
// Abandons a capture after an error; the pending program is flushed.
void abort_graph_capture();

// Testing failure paths: every program holding an op named `op` fails when
// compiled (`stage` "compile") or launched ("run") with a PjrtError, as a
// compiler bug or an out-of-memory would. An empty `op` clears it.
void inject_fault(const std::string& op, const std::string& stage);

// One launch of a compiled program over storages: the step every path that
// runs a program shares (an eager op, a fused DeferAndFuse program, a graph's
// capture and its replays, a storage resize). Under buffers_mutex(): each
// donor argument is donated when only its `holders` hold it (its storage, if
// alive, and the caller's argument lists, `args` included), so no other
// thread is about to pass it to a program (otherwise the plugin copies it);
// the program runs; result k is stored into
// target k; results past the targets are `checks`, queued for the next host
// wait. `owner` (a DeferAndFuse program's thread) is no longer pending in the
// targets. Returns every result.
struct ProgramLaunch {
  struct Donor {
    size_t arg;
    long holders;
  };
  struct Target {
    StorageBuffer* storage;
    hlo::ElementType dtype;
  };
  int device = 0;
  std::vector<runtime::BufferPtr> args;
  std::vector<Donor> donors;
  std::vector<Target> targets;
  std::vector<RangeCheckInfo> checks;
  PendingWork* owner = nullptr;
  const std::vector<std::string>* op_names = nullptr;  // for injected faults
};
std::vector<runtime::BufferPtr> launch(pjrt::LoadedExecutable& executable, ProgramLaunch& launch);

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
