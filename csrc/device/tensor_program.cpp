#include "device/tensor_program.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/generator.h"
#include "runtime/eager_mode.h"
#include "runtime/metrics.h"

#include <atomic>
#include <cstdlib>

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

// DeferAndFuse's pending programs, one per device.
struct DeferredPrograms {
  std::recursive_mutex mutex;
  std::vector<std::unique_ptr<ProgramState>> per_device;
  std::atomic<bool> any_pending{false};
};

DeferredPrograms& deferred() {
  static auto* d = new DeferredPrograms();  // never destroyed: used at exit
  return *d;
}

// The graph being captured, if any (one at a time, under the deferred mutex).
struct GraphCapture {
  bool active = false;
  bool broken = false;
  int device = 0;
};

GraphCapture& graph_capture() {
  static GraphCapture c;
  return c;
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

// Compiles (or finds) and launches `state`'s program; stores the results
// into the storages that are still alive.
void execute(ProgramState& state) {
  std::vector<Value> outputs;
  std::vector<std::pair<c10::intrusive_ptr<c10::StorageImpl>, hlo::ElementType>> targets;
  std::vector<bool> donatable(state.args.size(), false);
  for (auto& s : state.slots) {
    if (!s.written) continue;
    auto storage = s.storage.lock();
    // An in-place result reuses the old buffer's memory when nothing else
    // holds it: only the storage (if alive) and our argument list.
    if (s.param && !graph_capture().active) {
      size_t idx = param_index(*s.param);
      if (state.args[idx].use_count() <= (storage ? 2 : 1)) {
        state.b.mark_donated(*s.param);
        donatable[idx] = true;
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
  auto results = runtime::DeviceRuntime::get().run(state.b.finish(outputs), state.device, state.args, donatable);
  for (size_t k = 0; k < targets.size(); ++k) {
    c10::Storage storage(targets[k].first);
    storage_buffer(storage).set(results[k], targets[k].second);
  }
  std::vector<RangeCheckInfo> checks;
  for (const auto& check : state.range_checks) checks.push_back(check.second);
  queue_range_checks(checks, results, data_outputs);
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
  GraphCapture& c = graph_capture();
  TORCH_CHECK(!c.active, "internal: nested graph capture");
  c = GraphCapture{true, false, device};
}

std::unique_ptr<ProgramState> end_graph_capture(int device, bool* broken) {
  DeferredPrograms& d = deferred();
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  GraphCapture& c = graph_capture();
  *broken = c.broken || c.device != device;
  c.active = false;
  std::unique_ptr<ProgramState> state;
  for (size_t k = 0; k < d.per_device.size(); ++k) {
    if (!d.per_device[k] || d.per_device[k]->ops == 0) continue;
    if (static_cast<int>(k) == device) {
      state = std::move(d.per_device[k]);
    } else {
      *broken = true;  // the graph touched another device
    }
  }
  d.any_pending = false;
  for (auto& s : d.per_device) d.any_pending = d.any_pending || (s && s->ops > 0);
  return state;
}

void abort_graph_capture() {
  {
    DeferredPrograms& d = deferred();
    std::lock_guard<std::recursive_mutex> lock(d.mutex);
    graph_capture().active = false;
  }
  flush_deferred("graph");
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
  DeferredPrograms& d = deferred();
  if (!d.any_pending.load()) return;
  std::lock_guard<std::recursive_mutex> lock(d.mutex);
  if (!d.any_pending.load()) return;
  d.any_pending = false;  // before running: a nested flush finds nothing
  if (graph_capture().active) graph_capture().broken = true;  // the graph no longer runs as one program
  for (auto& state : d.per_device) {
    if (!state || state->ops == 0) continue;
    std::unique_ptr<ProgramState> pending = std::move(state);
    runtime::metrics().count_flush(reason);
    execute(*pending);
  }
}

TensorProgram::TensorProgram(int device)
    : device_(device), deferred_(runtime::eager_mode() == runtime::EagerMode::DeferAndFuse) {
  if (!deferred_) {
    own_ = std::make_unique<ProgramState>(device);
    state_ = own_.get();
  } else {
    DeferredPrograms& d = deferred();
    lock_ = std::unique_lock<std::recursive_mutex>(d.mutex);
    if (static_cast<int>(d.per_device.size()) <= device) d.per_device.resize(device + 1);
    if (!d.per_device[device]) d.per_device[device] = std::make_unique<ProgramState>(device);
    state_ = d.per_device[device].get();
  }
  checkpoint_ = state_->b.checkpoint();
  slots_at_start_ = state_->slots.size();
  args_at_start_ = state_->args.size();
  checks_at_start_ = state_->range_checks.size();
}

TensorProgram::~TensorProgram() {
  if (finished_ || !deferred_) return;
  // The op threw: drop what it added to the pending program. (Writes happen
  // only after a lowering succeeded, so existing slots are untouched.)
  state_->b.rollback(checkpoint_);
  state_->slots.erase(state_->slots.begin() + static_cast<std::ptrdiff_t>(slots_at_start_), state_->slots.end());
  state_->args.resize(args_at_start_);
  state_->sources.resize(args_at_start_);
  state_->range_checks.resize(checks_at_start_);
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
  for (auto& s : state_->slots) {
    if (s.storage_id == sb->id) return s;
  }
  TORCH_CHECK(sb->device == device_, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              device_, " and tpu:", sb->device, "!");
  ProgramState::Slot slot{sb->id, c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl()),
                          sb->nbytes, std::nullopt, std::nullopt, false};
  if (sb->buffer) {
    slot.param = state_->b.parameter({sb->dtype, {sb->numel()}});
    slot.current = slot.param;
    ParamSource source;
    source.kind = ParamSource::Kind::Storage;
    source.storage_id = sb->id;
    bind(*slot.param, sb->buffer, std::move(source));
  }
  state_->slots.push_back(std::move(slot));
  return state_->slots.back();
}

Value TensorProgram::flat_as(ProgramState::Slot& slot, ElementType dtype) {
  hlo::Builder& b = state_->b;
  const int64_t itemsize = hlo::byte_size(dtype);
  if (!slot.current) {  // never written: contents are unspecified, use zeros
    slot.current = b.splat(0, {dtype, {static_cast<int64_t>(slot.nbytes) / itemsize}});
  }
  Value flat = *slot.current;
  if (flat.dtype() == dtype) return flat;
  // view_as_real / view_as_complex: a complex<f32> element is (real, imag)
  // f32 pairs in memory. bitcast_convert takes no complex types, so split
  // and join with real/imag/complex.
  if (flat.dtype() == ElementType::C64 && dtype == ElementType::F32) {
    const int64_t n = flat.shape()[0];
    Value re = b.reshape(b.op("real", {flat}, {dtype, {n}}), {n, 1});
    Value im = b.reshape(b.op("imag", {flat}, {dtype, {n}}), {n, 1});
    return b.reshape(b.concatenate({re, im}, 1), {2 * n});
  }
  if (flat.dtype() == ElementType::F32 && dtype == ElementType::C64 && flat.shape()[0] % 2 == 0) {
    const int64_t n = flat.shape()[0] / 2;
    Value pairs = b.reshape(flat, {n, 2});
    Value re = b.reshape(b.slice(pairs, {0, 0}, {n, 1}, {1, 1}), {n});
    Value im = b.reshape(b.slice(pairs, {0, 1}, {n, 2}, {1, 1}), {n});
    return b.op("complex", {re, im}, {dtype, {n}});
  }
  TORCH_CHECK_NOT_IMPLEMENTED(hlo::byte_size(flat.dtype()) == itemsize,
                              "tpu: viewing a storage of ", hlo::mlir_name(flat.dtype()), " elements as ",
                              hlo::mlir_name(dtype), " (a different element size) is not supported yet");
  if (flat.dtype() == ElementType::Pred || dtype == ElementType::Pred) {
    // bool has no bit pattern in StableHLO: go through u8 values.
    Value u8 = flat.dtype() == ElementType::Pred ? b.convert(flat, ElementType::U8)
                                                 : b.bitcast_convert(flat, {ElementType::U8, flat.shape()});
    return dtype == ElementType::Pred ? b.convert(u8, dtype) : b.bitcast_convert(u8, {dtype, flat.shape()});
  }
  return b.bitcast_convert(flat, {dtype, flat.shape()});
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
  Value value = lower::coerce(state_->b, v, {dtype, t.sizes().vec()});
  slot.current = runtime::write_view(state_->b, flat, value, layout_of(t));
  slot.written = true;
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
      source.range_checked = s.range_checked;
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

void TensorProgram::run() {
  finished_ = true;
  if (!deferred_) {
    execute(*state_);
    return;
  }
  state_->ops++;
  deferred().any_pending = true;
  // A graph being captured stays one program whatever its size.
  if (state_->ops >= max_deferred_ops() && !graph_capture().active) flush_deferred("size_bound");
}

std::unique_ptr<ProgramState> TensorProgram::release() {
  TORCH_CHECK(!deferred_, "internal: only a Strict program can be released");
  finished_ = true;
  own_->ops++;
  return std::move(own_);
}

}  // namespace torch_tpu::device
