#include "device/tensor_program.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/generator.h"
#include "runtime/eager_mode.h"
#include "runtime/metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace torch_tpu::device {

using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

namespace {

size_t param_index(const Value& param) { return std::stoul(param.name.substr(4)); }

}  // namespace

int current_device() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
}

int checked_device_index(const c10::Device& d) {
  int count = runtime::DeviceRuntime::get().device_count();
  int index = d.has_index() ? d.index() : current_device();
  // CUDA raises RuntimeError "CUDA error: invalid device ordinal"; same type.
  TORCH_CHECK(index >= 0 && index < count, "tpu error: invalid device ordinal ", index, " (device_count() is ", count,
              ")");
  return index;
}

runtime::ViewLayout layout_of(const at::Tensor& t) {
  runtime::ViewLayout l;
  l.sizes = t.sizes().vec();
  l.strides = t.strides().vec();
  l.offset = t.storage_offset();
  return l;
}

at::Tensor empty_tpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype, int device) {
  c10::Device d(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  c10::Device prev = guard.exchangeDevice(d);
  at::Tensor t = at::detail::empty_strided_generic(sizes, strides, allocator(),
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
  guard.setDevice(prev);
  return t;
}

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

void maybe_fail(const ProgramState& state, const char* stage) {
  InjectedFault& f = injected_fault();
  if (!f.armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(f.mutex);
  if (f.stage != stage) return;
  for (const auto& op : state.ops) {
    if (op.name == f.op) throw pjrt::PjrtError(std::string("injected ") + stage + " failure of a program holding " + op.name);
  }
}

}  // namespace

// One thread's DeferAndFuse work: its pending program per device and its
// graph capture.
struct PendingWork {
  std::vector<std::unique_ptr<ProgramState>> per_device;
  struct {
    bool active = false;
    bool broken = false;
    int device = 0;
  } capture;
};

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

void flush_work(PendingWork& work, const char* reason);

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

// Range-check results of programs that ran, not yet read by the host.
struct PendingChecks {
  std::mutex mutex;
  std::vector<std::pair<runtime::BufferPtr, RangeCheckInfo>> checks;
};

PendingChecks& pending_checks() {
  static auto* p = new PendingChecks();
  return *p;
}

// Undoes what ops from `op` on added to `state` (and slot changes they made),
// in reverse: the state is as it was before that op was recorded.
void rewind(ProgramState& state, size_t op, size_t slots, size_t args, size_t checks, size_t undo,
            const hlo::Builder::Checkpoint& checkpoint) {
  for (size_t k = state.undo.size(); k > undo; --k) {
    const ProgramState::SlotUndo& u = state.undo[k - 1];
    ProgramState::Slot& slot = state.slots[u.slot];
    if (slot.written && !u.written && state.owner) {
      if (auto storage = slot.storage.lock()) storage_buffer(c10::Storage(storage)).pending_in = nullptr;
    }
    slot.param = u.param;
    slot.current = u.current;
    slot.written = u.written;
  }
  state.undo.resize(undo);
  for (size_t k = slots; k < state.slots.size(); ++k) {
    auto storage = state.slots[k].storage.lock();
    if (storage && state.owner) {
      StorageBuffer& sb = storage_buffer(c10::Storage(storage));
      if (sb.pending_in == state.owner) sb.pending_in = nullptr;
    }
  }
  state.b.rollback(checkpoint);
  state.slots.erase(state.slots.begin() + static_cast<std::ptrdiff_t>(slots), state.slots.end());
  state.args.resize(args);
  state.sources.resize(args);
  state.range_checks.resize(checks);
  state.ops.resize(op);
}

void rewind_to_op(ProgramState& state, size_t op) {
  const ProgramState::OpRecord r = state.ops.at(op);
  rewind(state, op, r.slots, r.args, r.checks, r.undo, r.checkpoint);
}

struct RunOptions {
  bool donate = true;  // inputs nothing else holds may be updated in place
  bool apply = true;   // store the results into their storages
  bool wait = false;   // wait for the results (errors of the run surface here)
};

// Compiles (or finds) and launches `state`'s program; stores the results
// into the storages that are still alive.
void execute(ProgramState& state, const RunOptions& options = {}) {
  std::vector<Value> outputs;
  std::vector<std::pair<c10::intrusive_ptr<c10::StorageImpl>, hlo::ElementType>> targets;
  std::vector<size_t> donor_params;  // parameters marked donated in the text
  const bool capturing = state.owner && state.owner->capture.active;
  for (auto& s : state.slots) {
    if (!s.written) continue;
    auto storage = s.storage.lock();
    // An in-place result reuses the old buffer's memory when nothing else
    // holds it: only the storage (if alive) and our argument list. A graph
    // being captured donates nothing: its program is replayed with other buffers.
    if (s.param && !capturing && options.donate) {
      size_t idx = param_index(*s.param);
      if (state.args[idx].use_count() <= (storage ? 2 : 1)) {
        state.b.mark_donated(*s.param);
        donor_params.push_back(idx);
      }
    }
    if (!storage) continue;  // died before the program ran: never materialized
    outputs.push_back(*s.current);
    targets.emplace_back(std::move(storage), s.current->dtype());
  }
  const size_t data_outputs = outputs.size();
  if (data_outputs == 0) return;  // nothing alive to write: checks of dead work are moot
  for (const auto& [pred, message] : state.range_checks) outputs.push_back(pred);
  TORCH_CHECK(state.args.size() == state.b.parameters().size(), "internal: program has ", state.b.parameters().size(),
              " parameters but ", state.args.size(), " bound inputs");
  for (const auto& a : state.args) TORCH_CHECK(a != nullptr, "internal: unbound program parameter");
  auto& rt = runtime::DeviceRuntime::get();
  maybe_fail(state, "compile");
  auto executable = rt.executable(state.b.finish(outputs));
  std::vector<runtime::BufferPtr> results;
  {
    // Donation is decided again under the lock: another thread may have
    // taken the buffer since (then the plugin copies instead).
    std::lock_guard<std::recursive_mutex> lock(buffers_mutex());
    std::vector<bool> donatable(state.args.size(), false);
    for (size_t idx : donor_params) donatable[idx] = state.args[idx].use_count() <= 2;
    maybe_fail(state, "run");
    results = rt.run(*executable, state.device, state.args, donatable);
    if (options.apply) {
      for (size_t k = 0; k < targets.size(); ++k) {
        StorageBuffer& sb = storage_buffer(c10::Storage(targets[k].first));
        sb.set(results[k], targets[k].second);
        if (sb.pending_in == state.owner) sb.pending_in = nullptr;
      }
    }
  }
  if (options.wait) {
    for (const auto& r : results) r->await_ready();
  }
  if (!options.apply) return;
  std::vector<RangeCheckInfo> checks;
  for (const auto& check : state.range_checks) checks.push_back(check.second);
  queue_range_checks(checks, results, data_outputs);
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
  while (bad - good > 1) {
    const size_t mid = (good + bad) / 2;
    ProgramState probe = *failed;
    rewind_to_op(probe, mid);
    try {
      execute(probe, {/*donate=*/false, /*apply=*/false, /*wait=*/true});
      good = mid;
    } catch (const std::exception&) {
      bad = mid;
    }
  }
  const std::string culprit = failed->ops[good].name.empty() ? "an op" : failed->ops[good].name;
  std::string ran;
  if (good > 0) {
    rewind_to_op(*failed, good);
    try {
      execute(*failed, {/*donate=*/false, /*apply=*/true, /*wait=*/false});
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

// Runs `work`'s pending programs. Call with the deferred mutex held.
void flush_work(PendingWork& work, const char* reason) {
  DeferredPrograms& d = deferred();
  if (work.capture.active) work.capture.broken = true;  // the graph no longer runs as one program
  for (auto& state : work.per_device) {
    if (!state || state->ops.empty()) continue;
    std::unique_ptr<ProgramState> pending = std::move(state);
    runtime::metrics().count_flush(reason);
    // Counted as pending until its results are in their storages: a thread
    // that finds no pending program reads storages without the lock.
    struct Uncount {
      DeferredPrograms& d;
      ~Uncount() { d.pending_programs--; }
    } uncount{d};
    std::string error;
    try {
      execute(*pending);
      continue;
    } catch (const std::exception& e) {
      error = e.what();
    }
    recover_failed_flush(std::move(pending), error);
  }
}

}  // namespace

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

void inject_fault(const std::string& op, const std::string& stage) {
  InjectedFault& f = injected_fault();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.op = op;
  f.stage = stage;
  f.armed = !op.empty();
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
    const char* where = runtime::eager_mode() == runtime::EagerMode::Debug
                            ? " (found by a compiled graph; Debug mode raises at the graph's call)"
                            : " (found at the next synchronization; TORCH_TPU_LAUNCH_BLOCKING=1 raises at the op itself)";
    TORCH_CHECK(!info.runtime_error, info.message, where);
    TORCH_CHECK_INDEX(false, info.message, where);
  }
}

void flush_deferred(const char* reason) {
  PendingWork* w = this_thread_work.work;
  if (!w || deferred().pending_programs.load() == 0) return;
  std::lock_guard<std::recursive_mutex> lock(deferred().mutex);
  flush_work(*w, reason);
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

TensorProgram::TensorProgram(int device)
    : device_(device), deferred_(runtime::eager_mode() == runtime::EagerMode::DeferAndFuse) {
  if (!deferred_) {
    own_ = std::make_unique<ProgramState>(device);
    state_ = own_.get();
  } else {
    DeferredPrograms& d = deferred();
    lock_ = std::unique_lock<std::recursive_mutex>(d.mutex);
    PendingWork& w = my_work();
    if (static_cast<int>(w.per_device.size()) <= device) w.per_device.resize(device + 1);
    if (!w.per_device[device]) {
      w.per_device[device] = std::make_unique<ProgramState>(device);
      w.per_device[device]->owner = &w;
    }
    state_ = w.per_device[device].get();
  }
  checkpoint_ = state_->b.checkpoint();
  slots_at_start_ = state_->slots.size();
  args_at_start_ = state_->args.size();
  checks_at_start_ = state_->range_checks.size();
  undo_at_start_ = state_->undo.size();
}

TensorProgram::~TensorProgram() {
  if (finished_ || !deferred_) return;
  // The op threw: drop what it added to the pending program.
  rewind(*state_, state_->ops.size(), slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_, checkpoint_);
}

void TensorProgram::save_for_undo(size_t slot_index) {
  if (!deferred_ || slot_index >= slots_at_start_) return;  // a slot this op made goes away whole
  const ProgramState::Slot& s = state_->slots[slot_index];
  state_->undo.push_back({slot_index, s.param, s.current, s.written});
}

void TensorProgram::bind(const Value& param, runtime::BufferPtr buffer, ParamSource source) {
  size_t idx = param_index(param);
  if (state_->args.size() <= idx) state_->args.resize(idx + 1);
  if (state_->sources.size() <= idx) state_->sources.resize(idx + 1);
  state_->args[idx] = std::move(buffer);
  state_->sources[idx] = std::move(source);
}

ProgramState::Slot& TensorProgram::slot_for(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "internal: expected a tpu tensor");
  StorageBuffer* sb = &storage_buffer(t);
  for (size_t k = 0; k < state_->slots.size(); ++k) {
    ProgramState::Slot& s = state_->slots[k];
    if (s.storage_id != sb->id) continue;
    // A pending program read this storage earlier; if another thread has
    // replaced its buffer since, later ops read the new one (earlier ops
    // keep what they read). Its own writes no other thread can replace:
    // writing it would have run this program first.
    if (deferred_ && !s.written) {
      ElementType dtype;
      runtime::BufferPtr now = sb->current(&dtype);
      if (now && now != (s.param ? state_->args[param_index(*s.param)] : nullptr)) {
        save_for_undo(k);
        s.param = state_->b.parameter({dtype, {static_cast<int64_t>(sb->nbytes) / hlo::byte_size(dtype)}});
        s.current = s.param;
        ParamSource source;
        source.kind = ParamSource::Kind::Storage;
        source.storage_id = sb->id;
        bind(*s.param, std::move(now), std::move(source));
        if (state_->owner && state_->owner->capture.active) state_->owner->capture.broken = true;
      }
    }
    return s;
  }
  TORCH_CHECK(sb->device == device_, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              device_, " and tpu:", sb->device, "!");
  settle_pending_writes(*sb);  // another thread's pending program writes it: run that first
  ProgramState::Slot slot{sb->id, c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl()),
                          sb->nbytes, std::nullopt, std::nullopt, false};
  ElementType dtype;
  if (runtime::BufferPtr buffer = sb->current(&dtype)) {
    slot.param = state_->b.parameter({dtype, {static_cast<int64_t>(sb->nbytes) / hlo::byte_size(dtype)}});
    slot.current = slot.param;
    ParamSource source;
    source.kind = ParamSource::Kind::Storage;
    source.storage_id = sb->id;
    bind(*slot.param, std::move(buffer), std::move(source));
  }
  state_->slots.push_back(std::move(slot));
  return state_->slots.back();
}

Value TensorProgram::flat_as(ProgramState::Slot& slot, ElementType dtype) {
  hlo::Builder& b = state_->b;
  if (!slot.current) {  // never written: contents are unspecified, use zeros
    save_for_undo(static_cast<size_t>(&slot - state_->slots.data()));
    const ElementType t = static_cast<int64_t>(slot.nbytes) % hlo::byte_size(dtype) == 0 ? dtype : ElementType::U8;
    slot.current = b.splat(0, {t, {static_cast<int64_t>(slot.nbytes) / hlo::byte_size(t)}});
  }
  // A storage is bytes: a view of another dtype (x.view(torch.uint8),
  // view_as_real) reads them through a bitcast.
  return runtime::reinterpret_flat(b, *slot.current, dtype);
}

Value TensorProgram::read(const at::Tensor& t) {
  ProgramState::Slot& slot = slot_for(t);
  Value flat = flat_as(slot, element_type(t.scalar_type()));
  return runtime::read_view(state_->b, flat, layout_of(t));
}

Value TensorProgram::host_input(const at::Tensor& cpu, int origin) {
  at::Tensor c = cpu.contiguous();
  // A Python complex number arrives wrapped as complex128, which the device
  // does not hold; a wrapped number only decides the result's category, so
  // complex64 computes the same result.
  if (cpu.unsafeGetTensorImpl()->is_wrapped_number() && c.scalar_type() == at::kComplexDouble) {
    c = c.to(at::kComplexFloat);
  }
  ElementType dtype = element_type(c.scalar_type());
  Value p = state_->b.parameter({dtype, c.sizes().vec()});
  ParamSource source;
  // A Python number the dispatcher wrapped into a 0-d tensor (x * 2.5 in a
  // graph's code) is a fresh tensor on every call but the same value: a
  // captured graph keeps it as a constant parameter instead of refusing to
  // replay a program that reads a CPU tensor it was not given.
  source.kind = cpu.unsafeGetTensorImpl()->is_wrapped_number() ? ParamSource::Kind::Constant
                                                                : ParamSource::Kind::HostTensor;
  source.host = cpu.unsafeGetTensorImpl();
  if (origin >= 0 && source.kind == ParamSource::Kind::Constant && c.scalar_type() == at::kDouble) {
    // Lowerings see only the parameter, never the number: any float serves.
    source.kind = ParamSource::Kind::HostScalar;
    source.value = c.item<double>();
    source.dtype = dtype;
    source.origins = {origin};
    source.fixed = false;
  }
  bind(p, runtime::DeviceRuntime::get().upload(c.data_ptr(), pjrt_type(dtype), c.sizes().vec(), device_),
       std::move(source));
  runtime::metrics().bytes_to_device += static_cast<int64_t>(c.nbytes());
  return p;
}

void TensorProgram::write(const at::Tensor& t, const Value& v) {
  ProgramState::Slot& slot = slot_for(t);
  ElementType dtype = element_type(t.scalar_type());
  Value flat = flat_as(slot, dtype);
  hlo::Builder& b = state_->b;
  Value value = lower::coerce(b, v, {dtype, t.sizes().vec()});
  const runtime::ViewLayout layout = layout_of(t);
  if (state_->range_checks.size() > checks_at_start_ && slot.param) {
    // The op's index or value checks failed: it raises by the next
    // synchronization, and the tensor it updates in place keeps the value
    // it had before the op, never one computed from clamped indices.
    Value ok = state_->range_checks[checks_at_start_].first;
    for (size_t k = checks_at_start_ + 1; k < state_->range_checks.size(); ++k) {
      ok = b.binary("and", ok, state_->range_checks[k].first);
    }
    Value before = runtime::read_view(b, flat, layout);
    value = b.select(b.broadcast_to(ok, value.shape()), value, before);
  }
  save_for_undo(static_cast<size_t>(&slot - state_->slots.data()));
  Value written;
  if (dtype == ElementType::BF16 || dtype == ElementType::F16) {
    // XLA:CPU moves some 16-bit floats through f32 (a dynamic_update_slice
    // of bf16 does), which quiets the NaN payloads of elements the write
    // does not touch: a storage is bytes, so they are moved as u16.
    Value bits = runtime::write_view(b, runtime::reinterpret_flat(b, flat, ElementType::U16),
                                     b.bitcast_convert(value, {ElementType::U16, value.shape()}), layout);
    written = runtime::reinterpret_flat(b, bits, dtype);
  } else {
    written = runtime::write_view(b, flat, value, layout);
  }
  slot.current = runtime::merge_flat(b, *slot.current, written);
  slot.written = true;
  if (state_->owner) storage_buffer(t).pending_in = state_->owner;
}

void TensorProgram::produce_into(const at::Tensor& fresh, const Value& v) {
  hlo::Builder& b = state_->b;
  StorageBuffer& sb = storage_buffer(fresh);
  ElementType dtype = element_type(fresh.scalar_type());
  const int64_t flat_numel = static_cast<int64_t>(sb.nbytes) / hlo::byte_size(dtype);
  Value value = lower::coerce(b, v, {dtype, fresh.sizes().vec()});
  runtime::ViewLayout layout = layout_of(fresh);
  Value flat = (layout.is_contiguous() && layout.offset == 0 && layout.numel() == flat_numel)
                   ? b.reshape(value, {flat_numel})
                   : runtime::write_view(b, b.splat(0, {dtype, {flat_numel}}), value, layout);
  ProgramState::Slot slot{sb.id, c10::weak_intrusive_ptr<c10::StorageImpl>(fresh.storage().getWeakStorageImpl()),
                          sb.nbytes, std::nullopt, flat, true};
  state_->slots.push_back(std::move(slot));
  if (state_->owner) sb.pending_in = state_->owner;
}

at::Tensor TensorProgram::produce(const Value& v, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype) {
  at::Tensor t = empty_tpu(sizes, strides, dtype, device_);
  produce_into(t, v);
  return t;
}

void TensorProgram::bind_lowering_inputs(lower::LowerContext& ctx, const at::Generator& generator) {
  auto& rt = runtime::DeviceRuntime::get();
  for (size_t k = 0; k < ctx.host_scalars().size(); ++k) {
    const lower::HostScalar& s = ctx.host_scalars()[k];
    at::Tensor host = s.is_float ? at::scalar_tensor(s.f, at::kDouble) : at::scalar_tensor(s.i, at::kLong);
    host = host.to(scalar_type(s.dtype));
    ParamSource source;
    if (s.is_float) {
      source.kind = ParamSource::Kind::HostScalar;
      source.value = s.f;
      source.dtype = s.dtype;
      source.origins = s.origins;
      source.fixed = s.fixed;
    }
    bind(ctx.host_scalar_params()[k], rt.upload(host.data_ptr(), pjrt_type(s.dtype), {}, device_), source);
  }
  for (const auto& check : ctx.range_checks()) {
    state_->range_checks.emplace_back(check.all_in_range, RangeCheckInfo{check.message, check.runtime_error});
  }
  if (!ctx.rng_params().empty()) {
    TpuGeneratorImpl* gen = tpu_generator(generator, device_);
    ParamSource source;
    source.kind = ParamSource::Kind::Rng;
    source.generator = generator.defined() ? generator : default_generator(static_cast<c10::DeviceIndex>(device_));
    std::lock_guard<std::mutex> lock(gen->mutex_);
    for (const Value& p : ctx.rng_params()) {
      uint64_t state[2] = {gen->current_seed(), gen->next_counter()};
      bind(p, rt.upload(state, PJRT_Buffer_Type_U64, {2}, device_), source);
    }
  }
}

void TensorProgram::run(const std::string& op) {
  finished_ = true;
  state_->ops.push_back({op, checkpoint_, slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_});
  if (!deferred_) {
    execute(*state_);
    return;
  }
  if (state_->ops.size() == 1) deferred().pending_programs++;
  // A graph being captured stays one program whatever its size.
  PendingWork* w = state_->owner;
  if (static_cast<int>(state_->ops.size()) >= max_deferred_ops() && !w->capture.active) flush_work(*w, "size_bound");
}

std::unique_ptr<ProgramState> TensorProgram::release() {
  TORCH_CHECK(!deferred_, "internal: only a Strict program can be released");
  finished_ = true;
  own_->ops.push_back({"", checkpoint_, slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_});
  return std::move(own_);
}

}  // namespace torch_tpu::device
