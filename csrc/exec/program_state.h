// A program under construction over `tpu` storages, as data: its builder,
// the storages it reads and writes (slots), the buffers bound to its
// parameters and where they came from, its range checks, and where each
// recorded op began. TensorProgram (tensor_program.h) builds it; the launch
// step (program_launch.h) runs it; DeferAndFuse keeps one pending per thread
// and device (pending_work.h).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/storage_buffer.h"
#include "hlo/builder.h"

namespace torch_tpu::device {

// Where a program parameter's buffer came from; a captured graph program
// (csrc/exec/graph_capture.cpp) rebinds parameters from these on replay.
struct ParamSource {
  enum class Kind { Storage, HostTensor, Constant, Rng, HostScalar, ViewOffset };
  Kind kind = Kind::Constant;
  uint64_t storage_id = 0;                // Storage: the StorageBuffer id; ViewOffset: the view's storage's
  const c10::TensorImpl* host = nullptr;  // HostTensor, ViewOffset: the tensor; identity only, never dereferenced
  at::Generator generator;                // Rng: drawn from again on replay
  // ViewOffset: a view's storage offset as a program input
  // (runtime::ViewLayout::dynamic_offset); a replay feeds the offset of the
  // tensor at the same place in its call, so `host` must be one of the
  // call's arguments (a view a kernel made inside the call keeps its value).
  // HostScalar: a Python float the lowering made an input (lower::HostScalar):
  // its value, dtype, origins in the call's signature, whether the
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
  bool assertion = false;      // the op's only effect: checked even when the program keeps nothing else
};

// Whether a program must run for its checks alone.
inline bool asserts_something(const std::vector<std::pair<hlo::Value, RangeCheckInfo>>& checks) {
  for (const auto& check : checks)
    if (check.second.assertion) return true;
  return false;
}

// One program under construction and the buffers bound to its parameters.
struct StepOpKey;  // exec/step_replay.h

struct ProgramState {
  struct Slot {
    uint64_t storage_id;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // weak: dead storages need no output
    size_t nbytes;
    std::optional<hlo::Value> param;
    std::optional<hlo::Value> current;  // flat value after this program's writes
    bool written = false;
    bool produced = false;  // a storage an op of this program made (TensorProgram::produce)
  };
  // Where one recorded op began, so the program can be cut back to the ops
  // before it: an op that throws while recording, or, when a fused program
  // fails, the ops before the one that made it fail (they still run).
  struct OpRecord {
    std::string name;
    hlo::Builder::Checkpoint checkpoint;
    size_t slots = 0, args = 0, checks = 0, undo = 0;
    // What a later call must match to replay this op (exec/step_replay.h);
    // null for an op recorded outside the lowered kernel or with no signature.
    std::shared_ptr<const StepOpKey> key;
  };
  // A slot an op changed that existed before it, as it was.
  struct SlotUndo {
    size_t slot;
    std::optional<hlo::Value> param, current;
    bool written;
  };
  // A program replicated over a process group's devices (replica k on
  // devices[k], hlo/collectives.h): compiled with that device assignment
  // and launched as this device's replica, paired with the other ranks'
  // launches of it (program_launch.h). `channels`: the collectives it holds,
  // each numbered by its channel handle (1, 2, ...).
  struct Replication {
    std::vector<int64_t> devices;
    int channels = 0;
  };
  explicit ProgramState(int device) : device(device) {}
  int device;
  std::optional<Replication> replication;
  hlo::Builder b;
  std::vector<Slot> slots;
  std::vector<runtime::BufferPtr> args;                             // by parameter index
  std::vector<ParamSource> sources;                                 // by parameter index
  std::vector<std::pair<hlo::Value, RangeCheckInfo>> range_checks;  // extra tensor<i1> outputs
  std::vector<OpRecord> ops;                                        // one per op recorded (Strict: the one op)
  std::vector<SlotUndo> undo;
  PendingWork* owner = nullptr;  // DeferAndFuse: the thread whose pending program this is

  // Undoes what the ops from `op` on added (and the slot changes they made),
  // in reverse: the program is as it was before that op was recorded. A
  // recording op that threw passes where it began instead of a record.
  void rewind(size_t op, size_t slots_before, size_t args_before, size_t checks_before, size_t undo_before,
              const hlo::Builder::Checkpoint& checkpoint);
  void rewind_to_op(size_t op);
};

// The parameter index of a program parameter value (%argN).
inline size_t param_index(const hlo::Value& param) { return std::stoul(param.name.substr(4)); }

}  // namespace torch_tpu::device
