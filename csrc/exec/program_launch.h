// Running a program over storages: the one launch step every path shares
// (donation, execution, write-back, range checks), a program's compile and
// launch with its failure points, and the queue of range checks verified at
// the next host wait.
#pragma once

#include <string>
#include <vector>

#include <c10/util/SmallVector.h>

#include "device/program_profiler.h"
#include "exec/program_state.h"
#include "runtime/device_runtime.h"

namespace torch_tpu::device {

// Testing failure paths: every program holding an op named `op` fails when
// compiled (`stage` "compile"), launched ("run", before the launch is
// queued) or executed by the plugin ("execute", on the launch queue's
// thread: the op returns, and a use of its results raises) with a
// PjrtError, as a compiler bug or an out-of-memory would. An empty `op`
// clears it.
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
  // Inline for the few an op writes: a launch per op allocates no list for them.
  c10::SmallVector<Target, 4> targets;
  std::vector<RangeCheckInfo> checks;
  PendingWork* owner = nullptr;
  // The ops the program holds: what an injected fault (inject_fault) matches
  // and torch.profiler's event shows. A replay passes its capture's list, so
  // a fault fires on a program the op cache or the step replay runs again as
  // on its first launch; a first launch builds it only while a fault is
  // armed or a profiler records (not copied on every op otherwise).
  const std::vector<std::string>* op_names = nullptr;
  // torch.profiler's name for the launch (device/program_profiler.h).
  const std::string* trace_name = nullptr;
  ProgramOrigin origin = ProgramOrigin::Replayed;
  // A replicated program's launch (ProgramState::Replication): the group's
  // devices, in rank order, or null. It donates nothing and runs outside
  // buffers_mutex(), since on the XLA:CPU plugin it returns only when every
  // rank's replica reached its collectives, and the other ranks' threads
  // launch programs meanwhile.
  //
  // Before entering the plugin, the ranks meet: each replica of a group's
  // n-th replicated launch waits until every rank's n-th launch is ready
  // (same executable, or all raise), and all pass the plugin the same
  // launch id. A rank that never arrives, or one that launches another
  // program, makes the others raise here (after
  // TORCH_TPU_DIST_LAUNCH_TIMEOUT seconds, default 300), where a replica
  // left alone inside the plugin would end the process.
  const std::vector<int64_t>* replica_devices = nullptr;
};
std::vector<runtime::BufferPtr> launch(pjrt::LoadedExecutable& executable, ProgramLaunch& launch);

// Queues a program's range-check results (results[first...], one per
// message) for verification at the next host wait.
void queue_range_checks(const std::vector<RangeCheckInfo>& checks, const std::vector<runtime::BufferPtr>& results,
                        size_t first);

// Index range checks of programs that ran: raises IndexError for the first
// that failed (naming its op). Called wherever the host waits anyway. A host
// read passes its own copy as `also`: the checks' flags and its bytes are
// read in one wait, and its bytes count only if every check passed.
void verify_range_checks(const std::vector<runtime::DeviceRuntime::HostCopy>& also = {});

struct RunOptions {
  bool donate = true;  // inputs nothing else holds may be updated in place
  bool apply = true;   // store the results into their storages
  bool wait = false;   // wait for the results (errors of the run surface here)
};
// What run_program launched, so a later launch of the same program over
// other buffers needs neither its text nor a cache lookup (step_replay.h).
struct LaunchedProgram {
  std::shared_ptr<pjrt::LoadedExecutable> executable;  // null: nothing ran (nothing alive was written)
  std::vector<size_t> output_slots;                    // the written slots stored, in result order
  std::vector<size_t> donated_params;                  // parameters the program updates in place
};
// Compiles (or finds) and launches `state`'s program; stores the results
// into the storages that are still alive. `launched`: filled when given.
void run_program(ProgramState& state, const RunOptions& options = {}, LaunchedProgram* launched = nullptr);

}  // namespace torch_tpu::device
