#include "device/program_launch.h"

#include <atomic>
#include <mutex>

#include "device/pending_work.h"
#include "runtime/eager_mode.h"

namespace torch_tpu::device {

using hlo::Value;

namespace {

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

void maybe_fail(const std::vector<std::string>* op_names, const char* stage) {
  InjectedFault& f = injected_fault();
  if (!op_names || !f.armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(f.mutex);
  if (f.stage != stage) return;
  for (const auto& op : *op_names) {
    if (op == f.op) throw pjrt::PjrtError(std::string("injected ") + stage + " failure of a program holding " + op);
  }
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

}  // namespace

// Compiles (or finds) and launches `state`'s program; stores the results
// into the storages that are still alive.
void run_program(ProgramState& state, const RunOptions& options) {
  std::vector<Value> outputs;
  std::vector<c10::intrusive_ptr<c10::StorageImpl>> alive;  // the targets' storages, held through the launch
  ProgramLaunch l;
  l.device = state.device;
  l.owner = state.owner;
  const bool capturing = state.owner && state.owner->capture.active;
  for (auto& s : state.slots) {
    if (!s.written) continue;
    auto storage = s.storage.lock();
    // An in-place result reuses the old buffer's memory when nothing else
    // holds it: only the storage (if alive) and our argument list. A graph
    // being captured donates nothing: its program is replayed with other buffers.
    if (s.param && !capturing && options.donate && !state.replication) {
      const size_t idx = param_index(*s.param);
      const long holders = storage ? 2 : 1;
      if (state.args[idx].use_count() <= holders) {
        state.b.mark_donated(*s.param);
        l.donors.push_back({idx, holders + 1});  // + the launch's copy of the arguments
      }
    }
    if (!storage) continue;  // died before the program ran: never materialized
    outputs.push_back(*s.current);
    l.targets.push_back({&storage_buffer(c10::Storage(storage)), s.current->dtype()});
    alive.push_back(std::move(storage));
  }
  if (outputs.empty()) return;  // nothing alive to write: checks of dead work are moot
  for (const auto& [pred, info] : state.range_checks) {
    outputs.push_back(pred);
    l.checks.push_back(info);
  }
  TORCH_CHECK(state.args.size() == state.b.parameters().size(), "internal: program has ", state.b.parameters().size(),
              " parameters but ", state.args.size(), " bound inputs");
  for (const auto& a : state.args) TORCH_CHECK(a != nullptr, "internal: unbound program parameter");
  std::vector<std::string> names;  // read only by injected faults: not copied on every op otherwise
  if (injected_fault().armed.load(std::memory_order_relaxed)) {
    for (const auto& op : state.ops) names.push_back(op.name);
  }
  l.op_names = &names;
  maybe_fail(l.op_names, "compile");
  auto& runtime = runtime::DeviceRuntime::get();
  auto executable = state.replication
                        ? runtime.replicated_executable(state.b.finish(outputs), state.replication->devices)
                        : runtime.executable(state.b.finish(outputs));
  if (state.replication) {
    l.replicated = true;
    l.launch_id = state.replication->launch_id;
  }
  l.args = state.args;
  if (!options.apply) l.targets.clear(), l.checks.clear();
  auto results = launch(*executable, l);
  if (options.wait) {
    for (const auto& r : results) r->await_ready();
  }
}

std::vector<runtime::BufferPtr> launch(pjrt::LoadedExecutable& executable, ProgramLaunch& l) {
  std::unique_lock<std::recursive_mutex> lock(buffers_mutex(), std::defer_lock);
  std::vector<bool> donatable(l.args.size(), false);
  std::vector<runtime::BufferPtr> results;
  if (l.replicated) {
    // Nothing donated, so no other thread's donation can race with ours:
    // our argument list holds every buffer it reads.
    maybe_fail(l.op_names, "run");
    results = runtime::DeviceRuntime::get().run(executable, l.device, l.args, donatable, l.launch_id);
    lock.lock();
  } else {
    lock.lock();
    for (const auto& d : l.donors) donatable[d.arg] = l.args[d.arg].use_count() <= d.holders;
    maybe_fail(l.op_names, "run");
    results = runtime::DeviceRuntime::get().run(executable, l.device, l.args, donatable);
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

void queue_range_checks(const std::vector<RangeCheckInfo>& checks, const std::vector<runtime::BufferPtr>& results,
                        size_t first) {
  if (checks.empty()) return;
  bool too_many = false;
  {
    PendingChecks& p = pending_checks();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (size_t k = 0; k < checks.size(); ++k) p.checks.emplace_back(results[first + k], checks[k]);
    too_many = p.checks.size() > 4096;
  }
  if (too_many) verify_range_checks();  // bound the list in loops that never sync
}

void verify_range_checks() {
  std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>> checks;
  {
    PendingChecks& p = pending_checks();
    std::lock_guard<std::mutex> lock(p.mutex);
    checks.swap(p.checks);
  }
  for (const auto& [flag, info] : checks) {
    bool ok = true;
    runtime::DeviceRuntime::get().download(*flag, &ok, sizeof(ok));
    if (ok) continue;
    // Debug mode checks eager ops' indices before they run; the checks
    // that reach here there come from a compiled graph, waited for at its call.
    const char* where =
        runtime::eager_mode() == runtime::EagerMode::Debug
            ? " (found by a compiled graph; Debug mode raises at the graph's call)"
            : " (found at the next synchronization; TORCH_TPU_LAUNCH_BLOCKING=1 raises at the op itself)";
    TORCH_CHECK(!info.runtime_error, info.message, where);
    TORCH_CHECK_INDEX(false, info.message, where);
  }
}

void inject_fault(const std::string& op, const std::string& stage) {
  InjectedFault& f = injected_fault();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.op = op;
  f.stage = stage;
  f.armed = !op.empty();
}

}  // namespace torch_tpu::device
