#include "device/tensor_program.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/generator.h"
#include "runtime/metrics.h"

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

TensorProgram::Slot& TensorProgram::slot_for(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "internal: expected a tpu tensor");
  StorageBuffer* sb = &storage_buffer(t);
  for (auto& s : slots_) {
    if (s.sb == sb) return s;
  }
  TORCH_CHECK(sb->device == device_, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              device_, " and tpu:", sb->device, "!");
  Slot slot{sb, t.storage(), std::nullopt, std::nullopt, false};
  if (sb->buffer) {
    slot.param = b_.parameter({sb->dtype, {sb->numel()}});
    slot.current = slot.param;
    size_t idx = param_index(*slot.param);
    if (args_.size() <= idx) args_.resize(idx + 1);
    args_[idx] = sb->buffer;
  }
  slots_.push_back(std::move(slot));
  return slots_.back();
}

Value TensorProgram::flat_as(Slot& slot, ElementType dtype) {
  const int64_t itemsize = hlo::byte_size(dtype);
  if (!slot.current) {  // never written: contents are unspecified, use zeros
    slot.current = b_.splat(0, {dtype, {static_cast<int64_t>(slot.sb->nbytes) / itemsize}});
  }
  Value flat = *slot.current;
  if (flat.dtype() == dtype) return flat;
  TORCH_CHECK_NOT_IMPLEMENTED(hlo::byte_size(flat.dtype()) == itemsize,
                              "tpu: viewing a storage of ", hlo::mlir_name(flat.dtype()), " elements as ",
                              hlo::mlir_name(dtype), " (a different element size) is not supported yet");
  if (flat.dtype() == ElementType::Pred || dtype == ElementType::Pred) {
    // bool has no bit pattern in StableHLO: go through u8 values.
    Value u8 = flat.dtype() == ElementType::Pred ? b_.convert(flat, ElementType::U8)
                                                 : b_.bitcast_convert(flat, {ElementType::U8, flat.shape()});
    return dtype == ElementType::Pred ? b_.convert(u8, dtype) : b_.bitcast_convert(u8, {dtype, flat.shape()});
  }
  return b_.bitcast_convert(flat, {dtype, flat.shape()});
}

Value TensorProgram::read(const at::Tensor& t) {
  Slot& slot = slot_for(t);
  Value flat = flat_as(slot, element_type(t.scalar_type()));
  return runtime::read_view(b_, flat, layout_of(t));
}

Value TensorProgram::host_input(const at::Tensor& cpu) {
  at::Tensor c = cpu.contiguous();
  ElementType dtype = element_type(c.scalar_type());
  Value p = b_.parameter({dtype, c.sizes().vec()});
  auto buf = runtime::DeviceRuntime::get().upload(c.data_ptr(), pjrt_type(dtype), c.sizes().vec(), device_);
  runtime::metrics().bytes_to_device += static_cast<int64_t>(c.nbytes());
  size_t idx = param_index(p);
  if (args_.size() <= idx) args_.resize(idx + 1);
  args_[idx] = buf;
  return p;
}

void TensorProgram::write(const at::Tensor& t, const Value& v) {
  Slot& slot = slot_for(t);
  ElementType dtype = element_type(t.scalar_type());
  Value flat = flat_as(slot, dtype);
  Value value = lower::coerce(b_, v, {dtype, t.sizes().vec()});
  slot.current = runtime::write_view(b_, flat, value, layout_of(t));
  slot.written = true;
}

void TensorProgram::produce_into(const at::Tensor& fresh, const Value& v) {
  StorageBuffer& sb = storage_buffer(fresh);
  ElementType dtype = element_type(fresh.scalar_type());
  const int64_t flat_numel = static_cast<int64_t>(sb.nbytes) / hlo::byte_size(dtype);
  Value value = lower::coerce(b_, v, {dtype, fresh.sizes().vec()});
  runtime::ViewLayout layout = layout_of(fresh);
  Value flat = (layout.is_contiguous() && layout.offset == 0 && layout.numel() == flat_numel)
                   ? b_.reshape(value, {flat_numel})
                   : runtime::write_view(b_, b_.splat(0, {dtype, {flat_numel}}), value, layout);
  fresh_.emplace_back(&sb, fresh.storage());
  fresh_values_.push_back(flat);
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
    size_t idx = param_index(ctx.host_scalar_params()[k]);
    if (args_.size() <= idx) args_.resize(idx + 1);
    args_[idx] = rt.upload(host.data_ptr(), pjrt_type(s.dtype), {}, device_);
  }
  if (!ctx.rng_params().empty()) {
    TpuGeneratorImpl* gen = tpu_generator(generator, device_);
    std::lock_guard<std::mutex> lock(gen->mutex_);
    for (const Value& p : ctx.rng_params()) {
      uint64_t state[2] = {gen->current_seed(), gen->next_counter()};
      size_t idx = param_index(p);
      if (args_.size() <= idx) args_.resize(idx + 1);
      args_[idx] = rt.upload(state, PJRT_Buffer_Type_U64, {2}, device_);
    }
  }
}

void TensorProgram::run() {
  std::vector<Value> outputs;
  std::vector<Slot*> written;
  for (auto& s : slots_) {
    if (!s.written) continue;
    outputs.push_back(*s.current);
    written.push_back(&s);
  }
  for (const auto& v : fresh_values_) outputs.push_back(v);
  if (outputs.empty()) return;
  // In-place results reuse the old buffer's memory: a written storage whose
  // buffer nobody else holds (the storage and our argument list are the only
  // owners) is donated to the program.
  std::vector<bool> donatable(args_.size(), false);
  for (Slot* s : written) {
    if (!s->param || s->sb->buffer.use_count() != 2) continue;
    b_.mark_donated(*s->param);
    donatable[param_index(*s->param)] = true;
  }
  TORCH_CHECK(args_.size() == b_.parameters().size(), "internal: program has ", b_.parameters().size(),
              " parameters but ", args_.size(), " bound inputs");
  std::string text = b_.finish(outputs);
  auto results = runtime::DeviceRuntime::get().run(text, device_, args_, donatable);
  size_t k = 0;
  for (Slot* s : written) s->sb->set(results[k++], s->current->dtype());
  for (size_t i = 0; i < fresh_.size(); ++i) fresh_[i].first->set(results[k++], fresh_values_[i].dtype());
}

}  // namespace torch_tpu::device
