#include "exec/program_launch.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "exec/compile_log.h"
#include "exec/mode_executor.h"
#include "exec/pending_work.h"
#include "runtime/metrics.h"
#include "runtime/program_timeline.h"

namespace torch_tpu::device {

using hlo::Value;

namespace {

// A name for `state`'s program in a profile: its op (one op) or "fused N
// ops (cut: R)" (a DeferAndFuse flush, R its reason). A captured graph's name
// is made at its capture (graph_capture.cpp, name_next_graph).
std::string program_trace_name(const ProgramState& state) {
  if (state.owner) {
    const size_t n = state.ops.size();
    const char* reason = current_flush_reason();
    return "fused " + std::to_string(n) + (n == 1 ? " op" : " ops") + " (cut: " + (reason ? reason : "flush") + ")";
  }
  if (state.ops.size() == 1) return state.ops.front().name;
  return state.ops.empty() ? "tpu program" : "program of " + std::to_string(state.ops.size()) + " ops";
}

// Fault injection (inject_fault): off unless a test asks.
struct InjectedFault {
  std::mutex mutex;
  std::atomic<bool> armed{false};
  std::string op, stage;
};

InjectedFault& injected_fault() {
  static auto* f = new InjectedFault();
  return *f;
}

// The injected failure of a program holding `op_names` at `stage`, or "".
std::string injected_failure(const std::vector<std::string>* op_names, const char* stage) {
  InjectedFault& f = injected_fault();
  if (!op_names || !f.armed.load(std::memory_order_relaxed)) return {};
  std::lock_guard<std::mutex> lock(f.mutex);
  if (f.stage != stage) return {};
  for (const auto& op : *op_names) {
    if (op == f.op) return std::string("injected ") + stage + " failure of a program holding " + op;
  }
  return {};
}

void maybe_fail(const std::vector<std::string>* op_names, const char* stage) {
  std::string failure = injected_failure(op_names, stage);
  if (!failure.empty()) throw pjrt::PjrtError(failure);
}

// Range-check results of programs that ran, not yet read by the host.
struct PendingChecks {
  std::mutex mutex;
  std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>> checks;
};

PendingChecks& pending_checks() {
  static auto* p = new PendingChecks();
  return *p;
}

// The replicated launches of each device group, met by its ranks in launch
// order (ProgramLaunch::replica_devices).
struct ReplicaMeetings {
  struct Meeting {
    const pjrt::LoadedExecutable* executable = nullptr;  // the first arrival's
    size_t arrived = 0, left = 0;
    bool mismatch = false;
    bool abandoned = false;  // a rank gave up waiting: the late ones raise too
  };
  struct Group {
    std::unordered_map<int64_t, uint64_t> launches;  // per device: how many it made
    std::map<uint64_t, Meeting> meetings;            // by launch number
  };
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::vector<int64_t>, Group> groups;
};

ReplicaMeetings& replica_meetings() {
  static auto* m = new ReplicaMeetings();
  return *m;
}

double launch_timeout_seconds() {
  const char* v = std::getenv("TORCH_TPU_DIST_LAUNCH_TIMEOUT");
  const double seconds = v ? std::atof(v) : 0;
  return seconds > 0 ? seconds : 300;
}

// Waits until every rank of `devices` reached the launch this device makes
// now, and returns the launch id they share. Each device numbers its own
// launches on the group; the ranks make the same launches in the same order,
// so the n-th of each pair up, and n, in 31 bits, is the id.
int meet_other_replicas(const pjrt::LoadedExecutable& executable, const std::vector<int64_t>& devices, int device) {
  ReplicaMeetings& m = replica_meetings();
  std::unique_lock<std::mutex> lock(m.mutex);
  ReplicaMeetings::Group& group = m.groups[devices];
  const uint64_t number = group.launches[device]++;
  ReplicaMeetings::Meeting& meeting = group.meetings[number];
  if (meeting.arrived == 0) meeting.executable = &executable;
  meeting.mismatch = meeting.mismatch || meeting.executable != &executable;
  meeting.arrived++;
  m.arrived.notify_all();
  const double timeout = launch_timeout_seconds();
  const bool everyone = m.arrived.wait_for(lock, std::chrono::duration<double>(timeout), [&] {
    return meeting.arrived == devices.size() || meeting.abandoned;
  }) && !meeting.abandoned;
  if (!everyone) meeting.abandoned = true;
  const bool mismatch = meeting.mismatch;
  if (++meeting.left == devices.size()) group.meetings.erase(number);  // the last to leave ends it
  std::string group_text;
  for (int64_t d : devices) group_text += (group_text.empty() ? "" : ", ") + std::to_string(d);
  TORCH_CHECK(everyone, "tpu_dist: the rank on tpu:", device, " waited ", timeout,
              " s for the other ranks of its group (devices ", group_text, ") to launch their replicas of its ",
              number + 1,
              "-th collective program; some rank did not reach it (it failed, or is blocked elsewhere). "
              "TORCH_TPU_DIST_LAUNCH_TIMEOUT sets the wait.");
  TORCH_CHECK(!mismatch, "tpu_dist: the ranks of the group on devices ", group_text,
              " launched different programs as their ", number + 1,
              "-th collective program (a graph compiled differently on some rank, or a collective one rank "
              "skipped); none of them ran.");
  return static_cast<int>(number & 0x7fffffff);
}

}  // namespace

// Compiles (or finds) and launches `state`'s program; stores the results
// into the storages that are still alive.
void run_program(ProgramState& state, const RunOptions& options, LaunchedProgram* launched) {
  std::vector<Value> outputs;
  std::vector<c10::intrusive_ptr<c10::StorageImpl>> alive;  // the targets' storages, held through the launch
  ProgramLaunch l;
  l.device = state.device;
  l.owner = state.owner;
  const bool capturing = state.owner && state.owner->capture.active;
  for (size_t slot = 0; slot < state.slots.size(); ++slot) {
    ProgramState::Slot& s = state.slots[slot];
    if (!s.written) continue;
    auto storage = s.storage.lock();
    // An in-place result reuses the old buffer's memory when nothing else
    // holds it: only the storage (if alive) and our argument list. A graph
    // being captured donates nothing: its program is replayed with other buffers.
    if (s.param && !capturing && options.donate && !state.replication) {
      const size_t idx = param_index(*s.param);
      const long holders = storage ? 2 : 1;
      if (state.args[idx].use_count() <= holders) {
        // Its memory becomes the storage's new value, the output pushed
        // below; a dead storage's, any output of its type.
        state.b.mark_donated(*s.param, storage ? static_cast<int>(outputs.size()) : -1);
        l.donors.push_back({idx, holders + 1});  // + the launch's copy of the arguments
        if (launched) launched->donated_params.push_back(idx);
      }
    }
    if (!storage) continue;  // died before the program ran: never materialized
    if (launched) launched->output_slots.push_back(slot);
    outputs.push_back(*s.current);
    l.targets.push_back({&storage_buffer(c10::Storage(storage)), s.current->dtype()});
    alive.push_back(std::move(storage));
  }
  // Nothing alive to write: checks of dead work are moot, an assertion is not.
  if (outputs.empty() && !asserts_something(state.range_checks)) return;
  for (const auto& [pred, info] : state.range_checks) {
    outputs.push_back(pred);
    l.checks.push_back(info);
  }
  TORCH_CHECK(state.args.size() == state.b.parameters().size(), "internal: program has ", state.b.parameters().size(),
              " parameters but ", state.args.size(), " bound inputs");
  for (const auto& a : state.args) TORCH_CHECK(a != nullptr, "internal: unbound program parameter");
  const bool profiled = programs_profiled(), logged = compile_log_on();
  std::vector<std::string> names;
  if (profiled || injected_fault().armed.load(std::memory_order_relaxed)) {
    for (const auto& op : state.ops) names.push_back(op.name);
  }
  l.op_names = &names;
  maybe_fail(l.op_names, "compile");
  const std::optional<ExecutableLookup> lookup =
      profiled || logged ? std::optional<ExecutableLookup>(std::in_place) : std::nullopt;
  auto& runtime = runtime::DeviceRuntime::get();
  auto executable = state.replication
                        ? runtime.replicated_executable(state.b.finish(outputs), state.replication->devices)
                        : runtime.executable(state.b.finish(outputs));
  std::string trace_name;
  if (profiled) {
    trace_name = program_trace_name(state);
    l.trace_name = &trace_name;
    l.origin = lookup->origin();
  }
  if (logged) {
    const ProgramOrigin origin = lookup->origin();
    log_program_lookup(state, origin == ProgramOrigin::Compiled    ? "compiled"
                              : origin == ProgramOrigin::DiskCache ? "loaded from the disk cache"
                                                                   : nullptr);
    if (state.owner) forget_deferred_ops(state);
  }
  if (state.replication) l.replica_devices = &state.replication->devices;
  l.args = state.args;
  if (!options.apply) l.targets.clear(), l.checks.clear();
  if (launched) launched->executable = executable;
  auto results = launch(*executable, l);
  if (options.wait) {
    for (const auto& r : results) r->await_ready();
  }
}

std::vector<runtime::BufferPtr> launch(pjrt::LoadedExecutable& executable, ProgramLaunch& l) {
  std::unique_lock<std::recursive_mutex> lock(buffers_mutex(), std::defer_lock);
  std::vector<bool> donatable(l.args.size(), false);
  std::vector<runtime::BufferPtr> results;
  int64_t launched_ns = 0, bytes_in = 0;
  if (programs_profiled()) {
    for (const auto& a : l.args) bytes_in += static_cast<int64_t>(a->on_device_size());
    launched_ns = runtime::timeline_clock_ns();
  }
  if (l.replica_devices) {
    // Nothing donated, so no other thread's donation can race with ours:
    // our argument list holds every buffer it reads.
    maybe_fail(l.op_names, "run");
    const int launch_id = meet_other_replicas(executable, *l.replica_devices, l.device);
    results = runtime::DeviceRuntime::get().run(executable, l.device, l.args, donatable, launch_id);
    lock.lock();
  } else {
    lock.lock();
    for (const auto& d : l.donors) donatable[d.arg] = l.args[d.arg].use_count() <= d.holders;
    maybe_fail(l.op_names, "run");
    // Through the launch queue, which takes the arguments (a donated one's
    // last holder) and runs them here where it is off; a profiled launch
    // runs here, so its span is the launch's. "execute" faults fail in the
    // plugin's execute, wherever that runs.
    auto& runtime = runtime::DeviceRuntime::get();
    if (launched_ns) {
      maybe_fail(l.op_names, "execute");
      results = runtime.run(executable, l.device, l.args, donatable);
    } else {
      results = runtime.run_queued(executable, l.device, std::move(l.args), std::move(donatable),
                                   injected_failure(l.op_names, "execute"));
    }
  }
  if (launched_ns) {
    profile_launch(l.trace_name ? *l.trace_name : "tpu program", l.origin, l.op_names, l.device, launched_ns, bytes_in,
                   results);
  }
  l.args.clear();  // donated buffers must not be used again
  for (size_t k = 0; k < l.targets.size(); ++k) {
    StorageBuffer& sb = *l.targets[k].storage;
    sb.set(results[k], l.targets[k].dtype);
    if (l.owner && sb.pending_in == l.owner) sb.pending_in = nullptr;
  }
  queue_range_checks(l.checks, results, l.targets.size());
  return results;
}

namespace {

// Pending checks beyond this many are read at the next launch: a loop that
// never waits for the host must not grow the list without bound.
constexpr size_t kMaxPendingChecks = 4096;

// Reads the flags of `checks` and the copies in `also` in one wait (every
// copy started first), then raises for the first check that failed, before
// any error of the reads themselves: an index out of range explains what
// came after it.
void read_range_checks(const std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>>& checks,
                       const std::vector<runtime::DeviceRuntime::HostCopy>& also) {
  if (checks.empty() && also.empty()) return;
  std::vector<uint8_t> ok(checks.size(), 1);  // tensor<i1>: one byte each; a flag not read stays 1
  std::vector<runtime::DeviceRuntime::HostCopy> copies;
  copies.reserve(checks.size() + also.size());
  for (size_t k = 0; k < checks.size(); ++k) copies.push_back({checks[k].first.get(), &ok[k], 1});
  copies.insert(copies.end(), also.begin(), also.end());
  std::exception_ptr read_error;
  try {
    runtime::DeviceRuntime::get().download(copies);
  } catch (...) {
    read_error = std::current_exception();
  }
  for (size_t k = 0; k < checks.size(); ++k) {
    if (ok[k]) continue;
    const RangeCheckInfo& info = checks[k].second;
    // Debug mode checks eager ops' indices before they run; the checks
    // that reach here there come from a compiled graph, waited for at its call.
    // An assertion (_assert_async) is checked nowhere else: in Debug mode it
    // raises at its own call, eager or compiled, as on CPU.
    const bool debug = current_mode_executor().checks_each_op();
    const char* where =
        debug ? (info.assertion ? "" : " (found by a compiled graph; Debug mode raises at the graph's call)")
              : " (found at the next synchronization; TORCH_TPU_LAUNCH_BLOCKING=1 raises at the op itself)";
    TORCH_CHECK(!info.runtime_error, info.message, where);
    TORCH_CHECK_INDEX(false, info.message, where);
  }
  if (read_error) std::rethrow_exception(read_error);
}

}  // namespace

void queue_range_checks(const std::vector<RangeCheckInfo>& checks, const std::vector<runtime::BufferPtr>& results,
                        size_t first) {
  if (checks.empty()) return;
  std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>> oldest;
  {
    PendingChecks& p = pending_checks();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (size_t k = 0; k < checks.size(); ++k) p.checks.emplace_back(results[first + k], checks[k]);
    if (p.checks.size() > kMaxPendingChecks) {
      // The older half: their programs ran long ago. Reading every check
      // would wait for the program just launched, draining the device's
      // queue in a loop that otherwise never waits.
      const auto half = p.checks.begin() + static_cast<std::ptrdiff_t>(p.checks.size() / 2);
      oldest.assign(std::make_move_iterator(p.checks.begin()), std::make_move_iterator(half));
      p.checks.erase(p.checks.begin(), half);
    }
  }
  read_range_checks(oldest, {});
}

void verify_range_checks(const std::vector<runtime::DeviceRuntime::HostCopy>& also) {
  std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>> checks;
  {
    PendingChecks& p = pending_checks();
    std::lock_guard<std::mutex> lock(p.mutex);
    checks.swap(p.checks);
  }
  read_range_checks(checks, also);
}

void inject_fault(const std::string& op, const std::string& stage) {
  InjectedFault& f = injected_fault();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.op = op;
  f.stage = stage;
  f.armed = !op.empty();
}

}  // namespace torch_tpu::device
