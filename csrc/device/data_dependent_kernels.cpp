// Data-dependent ops: the result's size (or a bool result) is known only
// from the values, so the host reads the input (a synchronization, as on
// CUDA), runs PyTorch's CPU kernel on it, and uploads the result. The CPU
// kernel is PyTorch's own, so the semantics (sorting, counts, errors) are
// exactly CPU's.
#include "device/data_dependent_kernels.h"

#include "device/debug_checks.h"

namespace torch_tpu::device {

namespace {

at::Tensor on_host(const at::Tensor& t) { return t.cpu(); }

std::optional<at::Tensor> on_host(const std::optional<at::Tensor>& t) {
  if (!t || !t->defined()) return t;
  return t->cpu();
}

// The CPU kernel's results on the device. Debug mode checks them for NaN
// and Inf as it checks a lowered op's. `op` (the aten names below) is
// only a label for that check's message: these kernels are registered by
// name in op_table.cpp and keep no rule keyed by it.
at::Tensor to_device(const char* op, const at::Tensor& r, const at::Device& device) {
  at::Tensor out = r.to(device);
  check_finite_results(op, {out});
  return out;
}

template <typename... T>
std::tuple<T...> to_device(const char* op, const std::tuple<T...>& r, const at::Device& device) {
  std::tuple<T...> out = std::apply([&](const auto&... t) { return std::make_tuple(t.to(device)...); }, r);
  std::apply([&](const auto&... t) { check_finite_results(op, {t...}); }, out);
  return out;
}

}  // namespace

// torch.equal: same sizes and equal values after type promotion (NaN is
// unequal to itself, as on CPU).
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ", self.device(), " and ",
              other.device(), "!");
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  return to_device("aten::bincount", at::bincount(on_host(self), on_host(weights), minlength), self.device());
}

at::Tensor repeat_interleave_tensor(const at::Tensor& repeats, std::optional<int64_t> output_size) {
  return at::repeat_interleave(on_host(repeats), output_size).to(repeats.device());
}

// The meta kernel cannot serve a factory without tensors (the device
// argument would dispatch it back here), so these do not go through a lowering.
at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory) {
  at::Tensor host = at::tril_indices(row, col, offset, at::TensorOptions().dtype(dtype.value_or(at::kLong)));
  return host.to(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory) {
  at::Tensor host = at::triu_indices(row, col, offset, at::TensorOptions().dtype(dtype.value_or(at::kLong)));
  return host.to(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
}

std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse) {
  return to_device("aten::_unique", at::_unique(on_host(self), sorted, return_inverse), self.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  return to_device("aten::_unique2", at::_unique2(on_host(self), sorted, return_inverse, return_counts), self.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  return to_device("aten::unique_consecutive",
                   at::unique_consecutive(on_host(self), return_inverse, return_counts, dim), self.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts) {
  return to_device("aten::unique_dim", at::unique_dim(on_host(self), dim, sorted, return_inverse, return_counts),
                   self.device());
}

}  // namespace torch_tpu::device
