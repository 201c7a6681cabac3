#include "exec/pending_work.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>

#include "device/program_profiler.h"
#include "exec/program_launch.h"
#include "exec/step_replay.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

// Every thread's pending work, under one mutex: recording an op, running a
// pending program and reading `StorageBuffer::pending_in` hold it.
struct DeferredPrograms {
  std::recursive_mutex mutex;
  std::atomic<int> pending_programs{0};  // programs holding at least one op, all threads
};

DeferredPrograms& deferred() {
  static auto* d = new DeferredPrograms();  // never destroyed: used at exit
  return *d;
}

// Replicated programs a flush took out of the pending work, to run once the
// deferred mutex is released (run_replicated).
using Replicated = std::vector<std::unique_ptr<ProgramState>>;
void flush_work(PendingWork& work, const char* reason, Replicated* replicated = nullptr);

// The thread that loaded us: its pending work at exit is dropped, not run
// (the interpreter is gone; nobody can read it, and the plugin's threads
// must go idle before its static objects die).
const std::thread::id loading_thread = std::this_thread::get_id();

// The calling thread's work, made on first use. When another thread exits,
// its pending programs run (a tensor it handed over may be read later by a
// thread that never saw the program), then the work is deleted.
struct ThreadWorkHandle {
  PendingWork* work = nullptr;
  ~ThreadWorkHandle() {
    if (!work) return;
    DeferredPrograms& d = deferred();
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    work->capture.active = false;
    if (std::this_thread::get_id() != loading_thread) {
      try {
        flush_work(*work, "thread_exit");
      } catch (const std::exception&) {
        // Lost tensors raise the error to whoever reads them.
      }
    }
    if (work->replay) {
      d.pending_programs--;
      for (const auto& [recorded, storage] : work->replay->storages) {
        if (auto alive = storage.storage.lock()) storage_buffer(c10::Storage(alive)).pending_in = nullptr;
      }
    }
    for (auto& state : work->per_device) {
      if (!state || state->ops.empty()) continue;
      d.pending_programs--;
      for (const auto& slot : state->slots) {
        if (auto storage = slot.storage.lock()) storage_buffer(c10::Storage(storage)).pending_in = nullptr;
      }
    }
    delete work;
  }
};

thread_local ThreadWorkHandle this_thread_work;

PendingWork& my_work() {  // call with the deferred mutex held
  if (!this_thread_work.work) this_thread_work.work = new PendingWork();
  return *this_thread_work.work;
}

int max_deferred_ops() {
  static int n = [] {
    const char* v = std::getenv("TORCH_TPU_DEFER_MAX_OPS");
    return v ? std::max(1, std::atoi(v)) : 4000;
  }();
  return n;
}

// A fused program failed to compile or run. Its ops did not happen; but the
// ops before the one that made it fail did, as far as the user can tell (a
// Strict run would have run them): find that op by running ever shorter
// prefixes, run the ops before it, and leave the rest undone. Tensors they
// created hold no value (reading one raises `error`); tensors they modified
// keep their values from before the failing op. Raises the error, naming the op.
[[noreturn]] void recover_failed_flush(std::unique_ptr<ProgramState> failed, const std::string& error) {
  const size_t n = failed->ops.size();
  std::vector<ProgramState::Slot> all_slots = failed->slots;
  // ops [0, good) run; a program of `bad` ops fails.
  size_t good = 0, bad = n;
  // A replicated program's prefixes cannot run on one rank alone (their
  // collectives would wait for the other ranks): none of it ran.
  while (!failed->replication && bad - good > 1) {
    const size_t mid = (good + bad) / 2;
    ProgramState probe = *failed;
    probe.rewind_to_op(mid);
    try {
      run_program(probe, {/*donate=*/false, /*apply=*/false, /*wait=*/true});
      good = mid;
    } catch (const std::exception&) {
      bad = mid;
    }
  }
  const std::string culprit = failed->replication              ? "its collectives' replicated program"
                              : failed->ops[good].name.empty() ? "an op"
                                                               : failed->ops[good].name;
  std::string ran;
  if (good > 0) {
    failed->rewind_to_op(good);
    try {
      run_program(*failed, {/*donate=*/false, /*apply=*/true, /*wait=*/false});
      ran = "the " + std::to_string(good) + " ops before it took effect; ";
    } catch (const std::exception& e) {
      ran = "the ops before it failed too (" + std::string(e.what()) + "); ";
      failed->slots.clear();
    }
  } else {
    failed->slots.clear();
  }
  auto lost = std::make_shared<const std::string>(culprit + " failed in a deferred program: " + error);
  std::lock_guard<std::recursive_mutex> lock(buffers_mutex());
  for (const auto& slot : all_slots) {
    auto storage = slot.storage.lock();
    if (!storage || !slot.written) continue;
    StorageBuffer& sb = storage_buffer(c10::Storage(storage));
    if (sb.pending_in == failed->owner) sb.pending_in = nullptr;
    bool computed = false;
    for (const auto& s : failed->slots) computed = computed || (s.storage_id == slot.storage_id && s.written);
    if (!computed && !sb.buffer) sb.lost = lost;
  }
  TORCH_CHECK(false, error, "\n(tpu DeferAndFuse: the program of ", n, " ops recorded failed at op ", good + 1, ", ",
              culprit, "; ", ran, "it and the ", n - good - 1,
              " after it did not: tensors they created raise when read, tensors they modified keep their earlier "
              "values.)");
}

// Runs a program a flush took out of the pending work. It counts as pending
// until its results are in their storages: a thread that finds no pending
// program reads storages without the lock. A failure is recovered under the
// deferred mutex (recursive: the caller may hold it already).
void run_flushed(std::unique_ptr<ProgramState> pending, LaunchedProgram* launched = nullptr) {
  DeferredPrograms& d = deferred();
  struct Uncount {
    DeferredPrograms& d;
    ~Uncount() { d.pending_programs--; }
  } uncount{d};
  std::string error;
  try {
    run_program(*pending, {}, launched);
    return;
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  recover_failed_flush(std::move(pending), error);
}

// Runs the step `work` replays: its remembered executable when every op
// matched and the same results are alive, else its ops as a program (a
// prefix of the step, or the whole with other results to store), not
// remembered in place of the step. Call with the deferred mutex held.
void flush_replay(PendingWork& work, const char* reason) {
  std::shared_ptr<StepReplay> replay = std::move(work.replay);
  runtime::metrics().count_flush(reason);
  const FlushReasonScope named(reason);
  if (replay->matched == replay->step->keys.size()) {
    DeferredPrograms& d = deferred();
    std::string error;
    try {
      if (launch_replay(*replay, &work)) {
        d.pending_programs--;
        return;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) {
      d.pending_programs--;
      recover_failed_flush(replay_as_program(*replay, &work), error);
    }
  }
  runtime::metrics().step_replay_fallbacks++;
  run_flushed(replay_as_program(*replay, &work));
}

// Runs `work`'s pending programs. Call with the deferred mutex held.
// `replicated`: where a program replicated over a process group's devices
// (a graph capture's, with its collectives, split by this flush) goes
// instead of running: its launch waits for the other ranks' replicas, and
// ranks that are threads of this process need the deferred mutex to get
// there, so the caller runs it after releasing the mutex (run_replicated).
void flush_work(PendingWork& work, const char* reason, Replicated* replicated) {
  if (work.capture.active) work.capture.broken = true;  // the graph no longer runs as one program
  if (work.replay) flush_replay(work, reason);
  for (auto& state : work.per_device) {
    if (!state || state->ops.empty()) continue;
    std::unique_ptr<ProgramState> pending = std::move(state);
    runtime::metrics().count_flush(reason);
    const FlushReasonScope named(reason);
    if (pending->replication && replicated) {
      replicated->push_back(std::move(pending));  // still counted as pending until it ran
      continue;
    }
    std::unique_ptr<StepTemplate> step = template_of(*pending, reason);
    LaunchedProgram launched;
    run_flushed(std::move(pending), step ? &launched : nullptr);
    remember_step(work, std::move(step), std::move(launched));
  }
}

// Runs the replicated programs flush_work took out, without the deferred
// mutex; every one runs, and the first failure is raised after.
void run_replicated(Replicated replicated) {
  std::exception_ptr first_failure;
  for (auto& pending : replicated) {
    try {
      run_flushed(std::move(pending));
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace

void begin_graph_capture(int device) {
  flush_deferred("graph_boundary");
  DeferredPrograms& d = deferred();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  PendingWork& w = my_work();
  TORCH_CHECK(!w.capture.active, "internal: nested graph capture");
  w.capture.active = true;
  w.capture.broken = false;
  w.capture.device = device;
}

std::unique_ptr<ProgramState> end_graph_capture(int device, bool* broken) {
  DeferredPrograms& d = deferred();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  PendingWork& w = my_work();
  *broken = w.capture.broken || w.capture.device != device;
  w.capture.active = false;
  std::unique_ptr<ProgramState> state;
  for (size_t k = 0; k < w.per_device.size(); ++k) {
    if (!w.per_device[k] || w.per_device[k]->ops.empty()) continue;
    if (static_cast<int>(k) == device) {
      state = std::move(w.per_device[k]);
      d.pending_programs--;
    } else {
      *broken = true;  // the graph touched another device
    }
  }
  if (state) {
    // The capture runs it now (capture_program); nothing of it is pending.
    for (const auto& slot : state->slots) {
      auto storage = slot.storage.lock();
      if (!storage) continue;
      StorageBuffer& sb = storage_buffer(c10::Storage(storage));
      if (sb.pending_in == &w) sb.pending_in = nullptr;
    }
    state->owner = nullptr;
  }
  return state;
}

void abort_graph_capture() {
  {
    DeferredPrograms& d = deferred();
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    my_work().capture.active = false;
  }
  flush_deferred("graph");
}

bool graph_capture_on(int device) {
  PendingWork* w = this_thread_work.work;
  if (!w) return false;
  std::lock_guard<std::recursive_mutex> lock(deferred().mutex);
  return w->capture.active && w->capture.device == device;
}

void flush_deferred(const char* reason) {
  PendingWork* w = this_thread_work.work;
  if (!w || deferred().pending_programs.load() == 0) return;
  Replicated replicated;
  {
    std::lock_guard<std::recursive_mutex> lock(deferred().mutex);
    flush_work(*w, reason, &replicated);
  }
  run_replicated(std::move(replicated));
}

void flush_if_pending_uses(const StorageBuffer& sb, const char* reason) {
  PendingWork* w = this_thread_work.work;
  if (!w || deferred().pending_programs.load() == 0) return;
  Replicated replicated;
  {
    std::lock_guard<std::recursive_mutex> lock(deferred().mutex);
    bool uses = w->replay && w->replay->replay_ids.count(sb.id);
    if (sb.device < static_cast<int>(w->per_device.size()) && w->per_device[sb.device]) {
      for (const ProgramState::Slot& slot : w->per_device[sb.device]->slots) uses = uses || slot.storage_id == sb.id;
    }
    if (!uses) return;
    flush_work(*w, reason, &replicated);
  }
  run_replicated(std::move(replicated));
}

void settle_pending_writes(StorageBuffer& sb) {
  DeferredPrograms& d = deferred();
  if (d.pending_programs.load() == 0) return;
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  PendingWork* owner = sb.pending_in;
  if (!owner) return;
  flush_work(*owner, owner == this_thread_work.work ? "mode_change" : "other_thread");
  sb.pending_in = nullptr;
}

ProgramState* lock_capture_program(int device, std::unique_lock<std::recursive_mutex>& lock) {
  PendingWork* w = this_thread_work.work;
  if (!w) return nullptr;
  std::unique_lock<std::recursive_mutex> held(deferred().mutex);
  if (!w->capture.active || w->capture.device != device) return nullptr;
  ProgramState& program = lock_pending_program(device, held);
  lock = std::move(held);
  return &program;
}

ProgramState& lock_pending_program(int device, std::unique_lock<std::recursive_mutex>& lock) {
  DeferredPrograms& d = deferred();
  if (!lock.owns_lock()) lock = std::unique_lock<std::recursive_mutex>(d.mutex);
  PendingWork& w = my_work();
  if (w.replay) {
    std::shared_ptr<StepReplay> replay = std::move(w.replay);
    runtime::metrics().step_replay_fallbacks++;
    replay_became_program(w, replay_as_program(*replay, &w));
  }
  if (static_cast<int>(w.per_device.size()) <= device) w.per_device.resize(device + 1);
  if (!w.per_device[device]) {
    w.per_device[device] = std::make_unique<ProgramState>(device);
    w.per_device[device]->owner = &w;
  }
  return *w.per_device[device];
}

PendingWork& lock_pending_work(std::unique_lock<std::recursive_mutex>& lock) {
  if (!lock.owns_lock()) lock = std::unique_lock<std::recursive_mutex>(deferred().mutex);
  return my_work();
}

bool pending_in_this_thread(const StorageBuffer& sb) {
  PendingWork* w = this_thread_work.work;
  if (!w || deferred().pending_programs.load() == 0) return false;
  std::lock_guard<std::recursive_mutex> lock(deferred().mutex);
  return sb.pending_in == w;
}

void replay_began() { deferred().pending_programs++; }

void replay_became_program(PendingWork& work, std::unique_ptr<ProgramState> state) {
  const int device = state->device;
  if (static_cast<int>(work.per_device.size()) <= device) work.per_device.resize(device + 1);
  TORCH_CHECK(!work.per_device[device] || work.per_device[device]->ops.empty(),
              "internal: a replayed step met a pending program");
  if (state->ops.empty()) deferred().pending_programs--;
  work.per_device[device] = std::move(state);
}

void flush_pending_work(PendingWork& work, const char* reason) { flush_work(work, reason); }

void op_recorded(ProgramState& state) {
  if (state.ops.size() == 1) deferred().pending_programs++;
  // A graph being captured stays one program whatever its size.
  PendingWork* w = state.owner;
  if (static_cast<int>(state.ops.size()) >= max_deferred_ops() && !w->capture.active) flush_work(*w, "size_bound");
}

}  // namespace torch_tpu::device
