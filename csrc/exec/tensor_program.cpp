#include "exec/tensor_program.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/generator.h"
#include "exec/mode_executor.h"
#include "runtime/metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>

namespace torch_tpu::device {

using hlo::ElementType;
using hlo::Shape;
using hlo::TensorType;
using hlo::Value;

int current_device() { return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index(); }

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

runtime::BufferPtr view_offset_buffer(int64_t offset, int device) {
  // A loop over t reads a few hundred offsets at most; a bound keeps a
  // loop over ever new ones from growing the table.
  constexpr size_t kMaxOffsets = 4096;
  static std::mutex mutex;
  static auto* buffers = new std::map<std::pair<int, int64_t>, runtime::BufferPtr>();  // leaked: used at exit
  std::lock_guard<std::mutex> lock(mutex);
  auto it = buffers->find({device, offset});
  if (it != buffers->end()) return it->second;
  if (buffers->size() >= kMaxOffsets) buffers->clear();
  runtime::BufferPtr buffer = runtime::DeviceRuntime::get().upload(&offset, PJRT_Buffer_Type_S64, {}, device);
  runtime::metrics().bytes_to_device += static_cast<int64_t>(sizeof(offset));
  buffers->emplace(std::make_pair(device, offset), buffer);
  return buffer;
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

void ProgramState::rewind(size_t op, size_t slots_before, size_t args_before, size_t checks_before, size_t undo_before,
                          const hlo::Builder::Checkpoint& checkpoint) {
  ProgramState& state = *this;
  for (size_t k = state.undo.size(); k > undo_before; --k) {
    const ProgramState::SlotUndo& u = state.undo[k - 1];
    ProgramState::Slot& slot = state.slots[u.slot];
    if (slot.written && !u.written && state.owner) {
      if (auto storage = slot.storage.lock()) storage_buffer(c10::Storage(storage)).pending_in = nullptr;
    }
    slot.param = u.param;
    slot.current = u.current;
    slot.written = u.written;
  }
  state.undo.resize(undo_before);
  for (size_t k = slots_before; k < state.slots.size(); ++k) {
    auto storage = state.slots[k].storage.lock();
    if (storage && state.owner) {
      StorageBuffer& sb = storage_buffer(c10::Storage(storage));
      if (sb.pending_in == state.owner) sb.pending_in = nullptr;
    }
  }
  state.b.rollback(checkpoint);
  state.slots.erase(state.slots.begin() + static_cast<std::ptrdiff_t>(slots_before), state.slots.end());
  state.args.resize(args_before);
  state.sources.resize(args_before);
  state.range_checks.resize(checks_before);
  state.ops.resize(op);
}

void ProgramState::rewind_to_op(size_t op) {
  const OpRecord r = ops.at(op);
  rewind(op, r.slots, r.args, r.checks, r.undo, r.checkpoint);
}

TensorProgram::TensorProgram(int device) : device_(device), deferred_(current_mode_executor().defers_programs()) {
  if (!deferred_) {
    own_ = std::make_unique<ProgramState>(device);
    state_ = own_.get();
  } else {
    state_ = &lock_pending_program(device, lock_);
  }
  remember_start();
}

void TensorProgram::remember_start() {
  checkpoint_ = state_->b.checkpoint();
  slots_at_start_ = state_->slots.size();
  args_at_start_ = state_->args.size();
  checks_at_start_ = state_->range_checks.size();
  undo_at_start_ = state_->undo.size();
}

TensorProgram::TensorProgram(int device, ProgramState::Replication replication) : device_(device), deferred_(false) {
  if (ProgramState* capture = lock_capture_program(device, lock_)) {
    if (!capture->replication || capture->replication->devices == replication.devices) {
      deferred_ = true;
      state_ = capture;
      if (!capture->replication) {
        capture->replication = std::move(replication);
        made_replicated_ = true;
      }
      channel_ = ++capture->replication->channels;
      remember_start();
      return;
    }
    lock_.unlock();  // another group's collective: a program of its own (the capture is split)
  }
  flush_deferred("collective");
  own_ = std::make_unique<ProgramState>(device);
  own_->replication = std::move(replication);
  state_ = own_.get();
  remember_start();
  channel_ = ++own_->replication->channels;
}

TensorProgram::~TensorProgram() {
  if (finished_ || !deferred_) return;
  if (made_replicated_) state_->replication.reset();
  // The op threw: drop what it added to the pending program.
  state_->rewind(state_->ops.size(), slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_, checkpoint_);
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

void TensorProgram::bind_storage(ProgramState::Slot& slot, runtime::BufferPtr buffer, ElementType dtype) {
  slot.param = state_->b.parameter({dtype, {static_cast<int64_t>(slot.nbytes) / hlo::byte_size(dtype)}});
  slot.current = slot.param;
  ParamSource source;
  source.kind = ParamSource::Kind::Storage;
  source.storage_id = slot.storage_id;
  bind(*slot.param, std::move(buffer), std::move(source));
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
        bind_storage(s, std::move(now), dtype);
        if (state_->owner && state_->owner->capture.active) state_->owner->capture.broken = true;
      }
    }
    return s;
  }
  TORCH_CHECK(sb->device == device_,
              "Expected all tensors to be on the same device, but found at least two devices, tpu:", device_,
              " and tpu:", sb->device, "!");
  settle_pending_writes(*sb);  // another thread's pending program writes it: run that first
  ProgramState::Slot slot{sb->id,       c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl()),
                          sb->nbytes,   std::nullopt,
                          std::nullopt, false};
  ElementType dtype;
  if (runtime::BufferPtr buffer = sb->current(&dtype)) bind_storage(slot, std::move(buffer), dtype);
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
  return runtime::read_view(state_->b, flat, program_layout(slot, t));
}

runtime::ViewLayout TensorProgram::program_layout(const ProgramState::Slot& slot, const at::Tensor& t) {
  runtime::ViewLayout layout = layout_of(t);
  if (layout.offset == 0 || layout.numel() == 0) return layout;
  if (slot.produced) {
    static_offset_views_.push_back(t.unsafeGetTensorImpl());
    return layout;
  }
  layout.dynamic_offset = state_->b.parameter({ElementType::S64, {}});
  ParamSource source;
  source.kind = ParamSource::Kind::ViewOffset;
  source.storage_id = storage_buffer(t).id;
  source.host = t.unsafeGetTensorImpl();
  bind(*layout.dynamic_offset, view_offset_buffer(layout.offset, device_), std::move(source));
  return layout;
}

Value TensorProgram::host_input(const at::Tensor& cpu, int origin) {
  at::Tensor c = cpu.contiguous();
  ElementType dtype = element_type(c.scalar_type());
  Value p = state_->b.parameter({dtype, c.sizes().vec()});
  ParamSource source;
  // A Python number the dispatcher wrapped into a 0-d tensor (x * 2.5 in a
  // graph's code) is a fresh tensor on every call but the same value: a
  // captured graph keeps it as a constant parameter instead of refusing to
  // replay a program that reads a CPU tensor it was not given.
  source.kind =
      cpu.unsafeGetTensorImpl()->is_wrapped_number() ? ParamSource::Kind::Constant : ParamSource::Kind::HostTensor;
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
  const runtime::ViewLayout layout = program_layout(slot, t);
  const std::optional<Value> ok = slot.param ? op_checks_hold() : std::nullopt;
  if (ok) {
    // The op's index or value checks failed: it raises by the next
    // synchronization, and the tensor it updates in place keeps the value
    // it had before the op, never one computed from clamped indices.
    Value before = runtime::read_view(b, flat, layout);
    value = b.select(b.broadcast_to(*ok, value.shape()), value, before);
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

std::optional<Value> TensorProgram::op_checks_hold() {
  if (state_->range_checks.size() <= checks_at_start_) return std::nullopt;
  Value ok = state_->range_checks[checks_at_start_].first;
  for (size_t k = checks_at_start_ + 1; k < state_->range_checks.size(); ++k) {
    ok = state_->b.binary("and", ok, state_->range_checks[k].first);
  }
  return ok;
}

namespace {

// Whether no two elements of a view share a storage element: its dims of
// size > 1, by decreasing stride, each stride spanning the next dim's whole
// extent. Sufficient, and true of every view but as_strided's odd ones.
bool elements_disjoint(const runtime::ViewLayout& l) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < l.sizes.size(); ++d) {
    if (l.sizes[d] <= 1) continue;
    if (l.strides[d] <= 0) return false;
    dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(), [&](size_t x, size_t y) { return l.strides[x] > l.strides[y]; });
  for (size_t k = 0; k + 1 < dims.size(); ++k) {
    if (l.strides[dims[k]] < l.strides[dims[k + 1]] * l.sizes[dims[k + 1]]) return false;
  }
  return true;
}

}  // namespace

void TensorProgram::write_points(const at::Tensor& t, const Value& whole,
                                 const lower::LowerContext::PointUpdate& points) {
  ProgramState::Slot& slot = slot_for(t);
  const ElementType dtype = element_type(t.scalar_type());
  runtime::ViewLayout layout = layout_of(t);
  if (layout.sizes.empty()) layout.sizes = {1}, layout.strides = {1};  // a 0-d self is addressed as one element
  const int64_t rank = static_cast<int64_t>(layout.sizes.size());
  const bool bits = dtype == ElementType::BF16 || dtype == ElementType::F16;
  hlo::Builder& b = state_->b;
  Value flat = flat_as(slot, dtype);
  // A storage last written through another dtype (a byte-level view) keeps
  // that type: its elements are not this view's, so the whole result goes.
  if (slot.current->dtype() != dtype || points.updates.dtype() != dtype || points.coords.shape().back() != rank ||
      !elements_disjoint(layout) || (bits && !points.overwrite)) {
    write(t, whole);
    return;
  }
  const Shape at = points.updates.shape();
  const TensorType index_type{ElementType::S64, at};
  Value coords = b.convert(points.coords, ElementType::S64);
  // A point past the storage's end is dropped by the scatter (below), so an
  // offset input needs no window here: it is added to every index.
  const std::optional<Value> offset = program_layout(slot, t).dynamic_offset;
  Value index = offset ? b.broadcast_in_dim(*offset, at, {}) : b.splat(static_cast<double>(layout.offset), index_type);
  Value inside = b.splat(1, {ElementType::Pred, at});
  for (int64_t d = 0; d < rank; ++d) {
    Shape lo(at.size() + 1, 0), hi = at;
    lo.back() = d;
    hi.push_back(d + 1);
    Value c = b.reshape(b.slice(coords, lo, hi, Shape(at.size() + 1, 1)), at);
    inside = b.binary("and", inside, b.compare(c, b.splat(0, index_type), hlo::CompareDirection::GE));
    inside =
        b.binary("and", inside,
                 b.compare(c, b.splat(static_cast<double>(layout.sizes[d]), index_type), hlo::CompareDirection::LT));
    index =
        b.binary("add", index, b.binary("multiply", c, b.splat(static_cast<double>(layout.strides[d]), index_type)));
  }
  // The op's checks failed: no point is written, so the tensor keeps its
  // value from before the op, as write() keeps it. Selecting over the points
  // instead of over the whole result is what keeps the scatter in place: a
  // select between the result and the old value needs both buffers. A
  // point goes nowhere by being sent past the storage's end: XLA's scatter
  // skips updates whose index is out of bounds (the behaviour JAX's "drop"
  // scatter mode and our lowerings rely on), and so does a point outside
  // the view, which would otherwise land on another element of the storage.
  if (slot.param) {
    if (const std::optional<Value> ok = op_checks_hold()) inside = b.binary("and", inside, b.broadcast_to(*ok, at));
  }
  index = b.select(inside, index, b.splat(static_cast<double>(flat.shape()[0]), index_type));
  Shape column = at;
  column.push_back(1);
  Value written;
  if (bits) {
    // As in write(): 16-bit floats are moved as their bits, so XLA:CPU's
    // float32 detour cannot quiet a NaN's payload (measured: a bf16 scatter
    // there converts the whole storage to f32 and back). XLA:CPU copies the
    // storage for the two bitcasts (scratch of the storage's size), once.
    Value moved = b.scatter_points(runtime::reinterpret_flat(b, flat, ElementType::U16), b.reshape(index, column),
                                   b.bitcast_convert(points.updates, {ElementType::U16, at}), hlo::overwrite);
    written = runtime::reinterpret_flat(b, moved, dtype);
  } else {
    written = b.scatter_points(flat, b.reshape(index, column), points.updates, points.combiner);
  }
  save_for_undo(static_cast<size_t>(&slot - state_->slots.data()));
  slot.current = written;
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
  ProgramState::Slot slot{sb.id,     c10::weak_intrusive_ptr<c10::StorageImpl>(fresh.storage().getWeakStorageImpl()),
                          sb.nbytes, std::nullopt,
                          flat,      true,
                          true};
  state_->slots.push_back(std::move(slot));
  if (state_->owner) sb.pending_in = state_->owner;
}

at::Tensor TensorProgram::produce(const Value& v, at::IntArrayRef sizes, at::IntArrayRef strides,
                                  at::ScalarType dtype) {
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
    bind(ctx.host_scalar_params()[k], rt.upload_for_launch(host.data_ptr(), pjrt_type(s.dtype), {}, device_), source);
  }
  for (const auto& check : ctx.range_checks()) {
    state_->range_checks.emplace_back(check.all_in_range,
                                      RangeCheckInfo{check.message, check.runtime_error, check.assertion});
  }
  if (!ctx.rng_params().empty()) {
    TpuGeneratorImpl* gen = tpu_generator(generator, device_);
    ParamSource source;
    source.kind = ParamSource::Kind::Rng;
    source.generator = generator.defined() ? generator : default_generator(static_cast<c10::DeviceIndex>(device_));
    std::lock_guard<std::mutex> lock(gen->mutex_);
    for (const Value& p : ctx.rng_params()) {
      uint64_t state[2] = {gen->current_seed(), gen->next_counter()};
      bind(p, rt.upload_for_launch(state, PJRT_Buffer_Type_U64, {2}, device_), source);
    }
  }
}

void TensorProgram::run(const std::string& op) {
  finished_ = true;
  state_->ops.push_back(
      {op, checkpoint_, slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_, std::move(step_key_)});
  if (!deferred_) {
    run_program(*state_);
    return;
  }
  op_recorded(*state_);
}

std::unique_ptr<ProgramState> TensorProgram::release() {
  TORCH_CHECK(!deferred_, "internal: only a Strict program can be released");
  finished_ = true;
  own_->ops.push_back({"", checkpoint_, slots_at_start_, args_at_start_, checks_at_start_, undo_at_start_});
  return std::move(own_);
}

}  // namespace torch_tpu::device
