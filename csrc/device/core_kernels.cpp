// The kernels every PrivateUse1 backend needs besides lowered ops: tensor
// creation, metadata views over one storage, resize, set_, copies across
// devices, and reading one value. Registered in op_table.cpp.
#include "device/core_kernels.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>

#include "device/debug_checks.h"
#include "device/storage_buffer.h"
#include "device/sync_debug.h"
#include "exec/step_replay.h"
#include "exec/tensor_program.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

int device_of(std::optional<at::Device> device) {
  if (!device) return current_device();
  TORCH_CHECK(device->type() == c10::DeviceType::PrivateUse1, "internal: tpu kernel called for ", *device);
  return checked_device_index(*device);
}

std::vector<int64_t> row_major_strides(at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<int64_t>(sizes[i + 1], 1);
  return strides;
}

// Whether `t` is exactly its storage's buffer (no program needed to read it).
// `t`'s storage buffer when `t` is exactly that buffer (no program needed
// to read it), else null.
runtime::BufferPtr whole_storage_buffer(const at::Tensor& t) {
  const StorageBuffer& sb = storage_buffer(t);
  hlo::ElementType dtype;
  runtime::BufferPtr buffer = sb.current(&dtype);
  // The buffer may hold the bytes as another element type (a byte-level
  // view wrote them, torch.load filled them as bytes): bytes are bytes.
  const bool whole = buffer && t.is_contiguous() && t.storage_offset() == 0 &&
                     t.numel() * t.element_size() == static_cast<int64_t>(sb.nbytes) &&
                     static_cast<int64_t>(sb.nbytes) % hlo::byte_size(dtype) == 0;
  return whole ? buffer : nullptr;
}

// A contiguous copy of a tpu tensor on the host, in its own dtype.
at::Tensor download(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (src.numel() == 0) return host;
  warn_or_error_on_sync();      // torch.tpu.set_sync_debug_mode: before anything runs or waits
  flush_deferred("host_read");  // pending writes first: this thread's,
  StorageBuffer& sb = storage_buffer(src);
  settle_pending_writes(sb);               // and another thread's
  if (!sb.current()) return host.zero_();  // never written
  runtime::BufferPtr buffer = whole_storage_buffer(src);
  if (!buffer) {
    TensorProgram prog(sb.device);
    at::Tensor whole = prog.produce(prog.read(src), src.sizes(), row_major_strides(src.sizes()), src.scalar_type());
    prog.run("host_read");
    flush_deferred("host_read");
    buffer = storage_buffer(whole).current();
  }
  // One wait for the bytes and the pending range checks, which must all
  // pass: never hand out values computed from clamped indices.
  verify_range_checks({{buffer.get(), host.data_ptr(), host.nbytes()}});
  return host;
}

// A copy that converts can overflow (1e6 is inf in float16): Debug mode
// checks its result as it checks an op's. A copy within one dtype makes no
// new values. The aten op names quoted in this file are labels for messages
// (this check's, and prog.run's name of the op in a failed program's
// error), not keys of any rule.
void check_cast_result(const at::Tensor& src, const at::Tensor& dst) {
  if (src.scalar_type() == dst.scalar_type()) return;
  check_finite_results(std::string("aten::_copy_from (a cast from ") + c10::toString(src.scalar_type()) + " to " +
                           c10::toString(dst.scalar_type()) + ")",
                       {dst});
}

}  // namespace

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> /*pin_memory*/, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "tpu supports only strided tensors, got layout ", *layout);
  int index = device_of(device);
  at::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
  element_type(st);  // raises TypeError for dtypes the device lacks
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  c10::Device prev =
      guard.exchangeDevice(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  at::Tensor t = at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st,
                                           memory_format);
  guard.setDevice(prev);
  return t;
}

// The zero gradient autograd formulas return where one is zero by definition
// (sgn's and sign's for real inputs). CUDA's is a ZeroTensor: no storage,
// and a dispatch key whose fallback computes with it as zeros. Our kernels
// read every input's storage, so here it is a zero-filled tensor: the same
// values, without the saving.
at::Tensor efficient_zero_tensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                                 std::optional<bool> pin_memory) {
  return empty_memory_format(size, dtype, layout, device, pin_memory, std::nullopt).zero_();
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "tpu supports only strided tensors, got layout ", *layout);
  at::ScalarType st = dtype.value_or(at::get_default_dtype_as_scalartype());
  element_type(st);
  return empty_tpu(size, stride, st, device_of(device));
}

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }

at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

at::Tensor reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> memory_format) {
  for (int64_t s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  size_t needed =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                                      at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1, "set_: expected a tpu storage, got ",
              source.device());
  if (auto slice = storage_slice_root(source)) {
    // storage[a:b]: the tensor aliases the bytes of the storage the slice
    // points into, `a` bytes in (device buffers have no addresses to share).
    // Bounds are the slice's: set_ grows a storage too small for the view,
    // and a slice is not resizable (CPU's and CUDA's message).
    const int64_t itemsize = static_cast<int64_t>(self.dtype().itemsize());
    size_t needed = at::detail::computeStorageNbytes(size, stride, itemsize, storage_offset);
    TORCH_CHECK(needed <= source.nbytes(), "Trying to resize storage that is not resizable");
    TORCH_CHECK_NOT_IMPLEMENTED(
        slice->byte_offset % itemsize == 0, "tpu: a ", self.dtype().name(), " tensor over a storage slice starting ",
        slice->byte_offset, " bytes into its storage (not a multiple of the element size ", itemsize,
        "); slice the storage at a multiple of the element size, or view the bytes as uint8 first");
    source = std::move(slice->root);
    storage_offset += static_cast<int64_t>(slice->byte_offset) / itemsize;
  }
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, stride, storage_offset);
  // As CPU's and CUDA's set_: a view past the storage's end grows it.
  size_t needed = at::detail::computeStorageNbytes(size, stride, self.dtype().itemsize(), storage_offset);
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_source_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage fresh(c10::Storage::use_byte_size_t(), 0, allocator(), true);
  return set_source_storage_offset(self, fresh, 0, {0}, {1});
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  // `self` is the source (ATen's _copy_from(src, dst) convention).
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_neg() && !dst.is_neg(),
                              "tpu: copying a tensor with the negative bit set (a lazy neg view of a complex "
                              "tensor) is not supported yet");
  // copy_ broadcasts the source to the destination (TensorIterator's
  // checks and messages on CPU and CUDA; ATen calls _copy_from before them).
  const std::vector<int64_t> shape = at::infer_size(dst.sizes(), self.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  // A lazy conj() (the conjugate bit) is resolved by the copy, as on CPU.
  const bool conjugate = self.is_conj() != dst.is_conj();
  if (self.numel() == 0) return dst;
  // TensorIterator's overlap checks, which ATen runs for copy_ only after
  // _copy_from, so never for tpu: a destination whose elements share memory,
  // and a source that partly overlaps it (x[1:].copy_(x[:-1])), raise as on
  // CPU and CUDA instead of computing some order's answer. A source exactly
  // the destination returned before _copy_from.
  if (is_tpu(dst)) {
    at::assert_no_internal_overlap(dst);
    if (is_tpu(self)) at::assert_no_partial_overlap(dst, self);
  }
  if (self.device() != dst.device()) flush_deferred("host_transfer");  // raw buffers cross below
  if (is_tpu(dst) && is_tpu(self)) {
    at::Tensor src = self;
    if (self.device() != dst.device()) {  // another device: whole buffer across, then as below
      at::Tensor packed = self.contiguous();
      StorageBuffer& psb = storage_buffer(packed);
      settle_pending_writes(psb);
      hlo::ElementType dtype;
      runtime::BufferPtr buffer = psb.current(&dtype);
      int target = dst.device().index();
      src = empty_tpu(packed.sizes(), packed.strides(), packed.scalar_type(), target);
      if (buffer) {
        storage_buffer(src).set(buffer->copy_to_device(runtime::DeviceRuntime::get().client().devices().at(target)),
                                dtype);
      }
      src = src.as_strided(packed.sizes(), packed.strides(), packed.storage_offset());
    }
    // DeferAndFuse: the next copy of a remembered step replays (exec/step_replay.h).
    static const char copy_kernel = 0;
    const std::vector<c10::IValue> step_args{src, dst};
    const std::optional<OpCall> step_call =
        self.device() == dst.device() ? step_kernel_call(&copy_kernel, step_args) : std::nullopt;
    if (step_call && step_replay_kernel(&copy_kernel, "aten::copy_", *step_call, step_args)) {
      check_cast_result(self, dst);
      return dst;
    }
    TensorProgram prog(dst.device().index());
    hlo::Value v = prog.read(src);
    if (conjugate) v = prog.builder().conjugate(v);
    prog.write(dst, prog.builder().broadcast_to(v, dst.sizes().vec()));
    if (step_call) set_step_kernel_key(&copy_kernel, *step_call, prog);
    prog.run("aten::copy_");
    check_cast_result(self, dst);
    return dst;
  }
  if (is_tpu(dst)) {  // host to device; dtype conversion on the host, as PyTorch does it
    at::Tensor host = self.resolve_conj().to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    if (dst.is_conj()) host = host.conj_physical();
    int device = dst.device().index();
    hlo::ElementType et = element_type(dst.scalar_type());
    auto& rt = runtime::DeviceRuntime::get();
    runtime::metrics().bytes_to_device += static_cast<int64_t>(host.nbytes());
    StorageBuffer& sb = storage_buffer(dst);
    if (dst.is_contiguous() && dst.storage_offset() == 0 && static_cast<size_t>(host.nbytes()) == sb.nbytes) {
      // The whole storage: no program reads the old value, but another
      // thread's pending program may still write it (this thread's ran
      // above); it runs first so it cannot overwrite this copy later.
      settle_pending_writes(sb);
      sb.set(rt.upload(host.data_ptr(), pjrt_type(et), {dst.numel()}, device), et);
    } else {
      TensorProgram prog(device);
      prog.write(dst, prog.host_input(host));
      prog.run("aten::copy_");
    }
    check_cast_result(self, dst);
    return dst;
  }
  TORCH_CHECK(is_tpu(self), "internal: _copy_from with no tpu tensor");
  at::Tensor host = download(self);
  dst.copy_(self.is_conj() ? host.conj() : host);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// Data-dependent result sizes: the host needs the values (a wait, as on CUDA).
at::Tensor nonzero(const at::Tensor& self) { return self.cpu().nonzero().to(self.device()); }

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  // torch 2.13's CPU and CUDA kernels take bool masks only (uint8 ones were deprecated, then refused).
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  // A 0-d mask selects from a 0-d input like a 1-element one (CPU returns 1-d).
  if (shape.empty()) shape = {1};
  // Advanced indexing by a mask takes the coordinates of its true elements.
  return at::index(self.expand(shape), c10::List<std::optional<at::Tensor>>({mask.expand(shape)}));
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  // CPU's kernel refuses an out= that shares memory with an input at all.
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  at::Tensor result = torch_tpu::device::masked_select(self, mask);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// nn.Module.to() keeps shared (tied) parameters shared only when it may
// assign `param.data` in place, i.e. when this says a CPU and a tpu tensor
// have the same TensorImpl type; c10's default lists built-in backends only.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.device().is_cpu() || t.device().is_privateuseone());
  };
  return dense(self) && dense(from);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = download(self);
  return host.item();
}

}  // namespace torch_tpu::device
