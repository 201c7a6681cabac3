// DeferAndFuse and graph capture, per thread: each thread's pending programs
// (one per device) and its torch.compile capture, and how threads that share
// storages see each other's pending writes.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "exec/program_state.h"

namespace torch_tpu::device {

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

// DeferAndFuse: runs the calling thread's pending programs if the one on
// `sb`'s device reads or writes `sb` (a storage about to be replaced under
// its tensors); a storage no pending op touched, such as a fresh out=
// tensor being resized, leaves a graph capture unsplit.
void flush_if_pending_uses(const StorageBuffer& sb, const char* reason);
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
// Whether the calling thread is capturing a graph on `device`.
bool graph_capture_on(int device);
// The calling thread's capture program on `device`, locked into `lock`; null
// (and nothing locked) when the thread is not capturing there. One lock for
// the question and the program, so no flush can come between them.
ProgramState* lock_capture_program(int device, std::unique_lock<std::recursive_mutex>& lock);

// Whether `sb` is written by the calling thread's pending DeferAndFuse work.
bool pending_in_this_thread(const StorageBuffer& sb);

struct StepReplay;
struct StepTemplate;

// One thread's DeferAndFuse work: its pending program per device, the step
// it is replaying instead (step_replay.h; then it has no pending program),
// the flushes it remembers for replay, and its graph capture. Guarded by
// the pending-work mutex.
struct PendingWork {
  std::vector<std::unique_ptr<ProgramState>> per_device;
  std::shared_ptr<StepReplay> replay;
  std::vector<std::shared_ptr<const StepTemplate>> templates;  // most recently recorded last
  struct {
    bool active = false;
    bool broken = false;
    int device = 0;
  } capture;
};

// For TensorProgram: the calling thread's pending program on `device`,
// locking the pending-work mutex into `lock` (held while the op records).
// A step being replayed becomes that pending program first, made of the ops
// it matched (step_replay.h): the op recording now is not the step's next.
ProgramState& lock_pending_program(int device, std::unique_lock<std::recursive_mutex>& lock);
// For the step replay: the calling thread's pending work, locked into
// `lock`, made on first use.
PendingWork& lock_pending_work(std::unique_lock<std::recursive_mutex>& lock);
// For the step replay: a replay began (it counts as a pending program
// until its flush), or its ops became the pending program `state` on its
// device (which then counts instead).
void replay_began();
void replay_became_program(PendingWork& work, std::unique_ptr<ProgramState> state);
// Runs `work`'s pending programs now (the replayed step completed a flush
// that a size bound made).
void flush_pending_work(PendingWork& work, const char* reason);
// For TensorProgram: an op was recorded into `state` (flushes at the size bound).
void op_recorded(ProgramState& state);

}  // namespace torch_tpu::device
