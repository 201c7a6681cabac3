// DeferAndFuse's loop detection: a training step flushes the same ops every
// time, so a flush whose ops all had keys is remembered (a StepTemplate: its
// recorded program, the executable that ran it, each op's key), and when the
// next flush's first op matches a template's, the ops that follow are
// matched key by key instead of being lowered. A matched op gets its fresh
// results from the remembered metadata and its program inputs bound (the
// storages it reads, CPU tensors uploaded, new Python floats, random
// states drawn, in the order recording would have), and nothing else: no
// meta kernel, lowering, program text or hash. The flush launches the
// remembered executable over the gathered inputs.
//
// A key is an op's call signature under the program policy
// (call_signature.h: dtypes, sizes, strides, offsets (only whether each is
// 0 where the program takes them as inputs), storage sizes and
// aliasing within the call, every baked-in number by value; floats that
// only feed program inputs by kind, any value) plus, across the step, which storage
// each tensor is: the template's storages map one to one onto the replay's
// (a result of an earlier op to that op's replayed result, any other
// storage to one the replay has not yet seen).
//
// Falling back is always possible and gives the same program: the template
// cut back to the ops matched so far, rebound to the replay's storages and
// inputs, becomes the pending program (ProgramState), and recording goes
// on. That happens when an op does not match (another shape, another
// baked-in number, an op outside the lowered kernel), when the flush comes
// before the step's end (a host read mid-step: the prefix runs, compiled
// from its text), and when tensors alive at the flush differ from the
// recorded run's (another set of results to store: compiled from the text).
//
// Not replayed: graph capture, the compile log (it logs each op), programs
// replicated over devices, a storage read again after another thread
// replaced its buffer. TORCH_TPU_STEP_REPLAY=0 turns it off.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exec/call_signature.h"
#include "exec/op_cache.h"
#include "exec/program_launch.h"
#include "exec/program_state.h"

namespace torch_tpu::device {

class TensorProgram;

// One recorded op, as a later call must match it to replay it.
struct StepOpKey {
  const void* op = nullptr;  // the operator's schema
  uint64_t hash = 0;         // OpCall::key
  SignatureRecord record;    // its FreeFloat entries are the floats fed to program inputs
  int device = 0;
  // Per flat signature position: the storage of a tpu tensor there (its
  // StorageBuffer id in the recorded run), else 0.
  std::vector<uint64_t> storages;
  // The program parameters the op added, in order, and where a replay
  // takes each from.
  struct Param {
    enum class Kind { Storage, HostTensor, Constant, HostFloat, Rng, ViewOffset } kind = Kind::Constant;
    int position = -1;         // Storage, HostTensor, ViewOffset (the view's offset): the flat position
    std::vector<int> origins;  // HostFloat
    hlo::ElementType dtype = hlo::ElementType::F32;
    bool range_checked = false;
    at::Generator generator;  // Rng
  };
  std::vector<Param> params;
  // The op's returns.
  struct Result {
    enum class Kind { Argument, Fresh, FreshList, Value, Undefined } kind = Kind::Undefined;
    int argument = -1;  // Argument: the argument it returns
    struct Fresh {
      std::vector<int64_t> sizes, strides;
      at::ScalarType dtype = at::kFloat;
      uint64_t storage = 0;  // recorded run's
    };
    std::vector<Fresh> fresh;  // Fresh: one; FreshList: each
    c10::IValue value;         // Value: the meta kernel's (an int return)
  };
  std::vector<Result> results;
  // out= arguments the op resizes (as the meta kernel asked), before it
  // reads or writes anything; `record` holds them as the call passed them.
  struct Resize {
    int argument = -1;
    std::vector<int64_t> sizes, strides;
  };
  std::vector<Resize> resizes;
};

// A remembered flush.
struct StepTemplate {
  std::unique_ptr<const ProgramState> program;  // as recorded; args: constants only
  std::vector<std::shared_ptr<const StepOpKey>> keys;
  std::shared_ptr<pjrt::LoadedExecutable> executable;
  LaunchedProgram launched;
  std::vector<RangeCheckInfo> checks;
  std::unordered_map<uint64_t, size_t> slot_of_storage;   // recorded storage id -> slot
  std::unordered_map<uint64_t, size_t> param_of_storage;  // recorded storage id -> its parameter
  size_t storage_count = 0;                               // distinct storages its ops name
  bool flush_when_complete = false;                       // it was cut by the size bound
  // torch.profiler's name for its launches, and the ops they hold (what an
  // injected fault matches too: ProgramLaunch::op_names).
  std::string trace_name;
  std::vector<std::string> op_names;
};

// A replay under way: the template, how far it matched, what it bound.
struct StepReplay {
  std::shared_ptr<const StepTemplate> step;
  size_t matched = 0;
  struct Storage {
    uint64_t id;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  };
  std::unordered_map<uint64_t, Storage> storages;  // recorded id -> the replay's
  std::unordered_set<uint64_t> replay_ids;         // the replay's ids, each mapped once
  std::vector<runtime::BufferPtr> args;            // by parameter; bound as ops match
};

// DeferAndFuse: the call's key, or nullopt (replay off, no signature, a
// graph capture).
std::optional<OpCall> step_op_call(const c10::OperatorHandle& op, const OpSpec& spec,
                                   const std::vector<c10::IValue>& args);

// The op's returns when it is the next op of a replayed step (a replay
// starts at a template's first op while nothing is pending), or nullopt:
// the caller records it (a replay under way becomes the pending program
// first, lock_pending_program).
std::optional<std::vector<c10::IValue>> step_replay_op(const c10::OperatorHandle& op, const OpCall& call,
                                                       const std::vector<c10::IValue>& args);

// A hand-written kernel that records one program over its tensor
// arguments and makes no tensor (a copy between tpu tensors), keyed and
// replayed as a lowered op is; `kernel` is its identity (an address of its
// own). The call's key under DeferAndFuse, or nullopt:
std::optional<OpCall> step_kernel_call(const void* kernel, const std::vector<c10::IValue>& args);
// Whether the call replayed (else the kernel records it, then keys it).
bool step_replay_kernel(const void* kernel, const char* name, const OpCall& call, const std::vector<c10::IValue>& args);
void set_step_kernel_key(const void* kernel, const OpCall& call, TensorProgram& program);

// The signature record of a call (its key's), taken before an out=
// argument is resized.
SignatureRecord step_record(const OpCall& call);

// The key of an op `program` recorded; `results` describes its returns
// (their fresh storages read from `returns`); `record` and `resizes`: an
// out= op's, from before its resize.
std::shared_ptr<const StepOpKey> make_step_key(const c10::OperatorHandle& op, const OpCall& call,
                                               TensorProgram& program, std::vector<StepOpKey::Result> results,
                                               const std::vector<c10::IValue>& returns,
                                               std::optional<SignatureRecord> record,
                                               std::vector<StepOpKey::Resize> resizes);

// The key of a call `program` recorded, the lowered op's or a kernel's (`id`).
std::shared_ptr<const StepOpKey> make_key(const void* id, const OpCall& call, TensorProgram& program,
                                          std::vector<StepOpKey::Result> results,
                                          const std::vector<c10::IValue>& returns,
                                          std::optional<SignatureRecord> record,
                                          std::vector<StepOpKey::Resize> resizes);

// For pending_work.cpp, with the pending-work mutex held:
// The replay's ops so far as a pending program, rebound to its storages.
std::unique_ptr<ProgramState> replay_as_program(const StepReplay& replay, PendingWork* owner);
// Launches a replay whose ops all matched; false when the tensors alive
// differ from the recorded run's (the caller runs replay_as_program's).
bool launch_replay(StepReplay& replay, PendingWork* owner);
// A copy of a flush about to run, to remember once it ran (null when some
// op has no key or the program is not replayable).
std::unique_ptr<StepTemplate> template_of(const ProgramState& program, const char* reason);
// Remembers `step`, which ran as `launched`.
void remember_step(PendingWork& work, std::unique_ptr<StepTemplate> step, LaunchedProgram launched);

}  // namespace torch_tpu::device
