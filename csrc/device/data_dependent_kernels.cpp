// Data-dependent ops: the result's size (or a bool result) is known only
// from the values, so the host waits for what decides it, as on CUDA.
// bincount, unique and unique_consecutive read that one number (a length, a
// count of distinct values) and compute everything else on the device with
// lowered ops (sort, cumsum, scatter-add), as does repeat_interleave given
// its output_size (nothing to read). The rest (unique along a dim,
// repeat_interleave without output_size) read the input, run PyTorch's CPU
// kernel and upload the result, so their semantics (sorting, counts, errors)
// are exactly CPU's.
#include "device/data_dependent_kernels.h"

#include <memory>

#include "device/debug_checks.h"
#include "exec/mode_executor.h"

namespace torch_tpu::device {

namespace {

at::Tensor on_host(const at::Tensor& t) { return t.cpu(); }

// Debug's NaN/Inf check of every tensor a kernel returns, under the op's name.
template <typename... T>
void check_finite(const char* op, const std::tuple<T...>& r) {
  std::apply([&](const auto&... t) { check_finite_results(op, {t...}); }, r);
}

// The CPU kernel's results on the device. Debug mode checks them for NaN
// and Inf as it checks a lowered op's. `op` (the aten names below) is
// only a label for that check's message: these kernels are registered by
// name in op_table.cpp and keep no rule keyed by it.
template <typename... T>
std::tuple<T...> to_device(const char* op, const std::tuple<T...>& r, const at::Device& device) {
  std::tuple<T...> out = std::apply([&](const auto&... t) { return std::make_tuple(t.to(device)...); }, r);
  check_finite(op, out);
  return out;
}

// A kernel built from lowered ops is one op to Debug mode: its own ops run
// unchecked (Strict) while it computes, and then its results are checked for
// NaN/Inf under its own name, the op the user called.
class AsOneOp {
 public:
  explicit AsOneOp(const char* op) : op_(op) {
    if (current_mode_executor().checks_each_op())
      unchecked_ = std::make_unique<ScopedEagerMode>(runtime::EagerMode::Strict);
  }

  template <typename... T>
  std::tuple<T...> results(std::tuple<T...> r) {
    if (unchecked_) {
      unchecked_.reset();  // back in the caller's mode, which checks
      check_finite(op_, r);
    }
    return r;
  }

 private:
  const char* op_;
  std::unique_ptr<ScopedEagerMode> unchecked_;  // while its own ops run
};

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

// bincount(self, weights?, minlength): the length, max(self) + 1 but at least
// minlength, is read to the host together with min(self) (both in one wait);
// the counts are a scatter-add on the device. Weights sum in float32 when
// float32, else in float64, as on CPU.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_tpu\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  // CPU's and CUDA's kernels return int64 zeros for an empty input before
  // they look at the weights, whatever their dtype or length.
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  const bool weighted = weights && weights->defined();
  TORCH_CHECK(!weighted || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  AsOneOp one_op("aten::bincount");
  int64_t length = minlength;
  if (self.numel() > 0) {
    const auto [lo, hi] = at::aminmax(self);
    const at::Tensor range = at::stack({lo, hi}).to(at::kLong).cpu();
    TORCH_CHECK(range[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(range[1].item<int64_t>() + 1, minlength);
  }
  const at::ScalarType dtype =
      !weighted ? at::kLong : (weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble);
  at::Tensor counts = at::zeros({length}, self.options().dtype(dtype));
  if (self.numel() == 0) return counts;
  const at::Tensor values = weighted ? weights->to(dtype) : at::ones({self.numel()}, self.options().dtype(dtype));
  // As int64: a uint8 index tensor would be read as a mask.
  return std::get<0>(
      one_op.results(std::make_tuple(counts.index_put_({self.to(at::kLong)}, values, /*accumulate=*/true))));
}

// repeat_interleave(repeats, output_size): index i repeated repeats[i] times.
// Without output_size the length is the sum of repeats, read on the host
// with the whole input (CPU's kernel computes). With it, nothing is read, as
// on CUDA: position j holds the number of i whose run ends at or before j,
// the prefix count of run ends scattered into output_size + 1 slots. A sum
// that is not output_size, or a negative repeat, raises RuntimeError with
// CPU's message at the next synchronization (CUDA's device assertions).
at::Tensor repeat_interleave_tensor(const at::Tensor& repeats, std::optional<int64_t> output_size) {
  if (!output_size) return at::repeat_interleave(on_host(repeats), output_size).to(repeats.device());
  // CPU's and CUDA's order: the index-type dispatch, then the shape.
  TORCH_CHECK_NOT_IMPLEMENTED(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
                              "\"repeat_interleave_tpu\" not implemented for '", repeats.scalar_type(), "'");
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  const int64_t total = *output_size;
  if (total < 0) return at::empty({total}, repeats.options());  // raises CPU's negative-dimension error
  const at::Tensor ends = repeats.cumsum(0);                    // int64
  at::_assert_async(ends.select(0, -1).eq(total), "allocated size does not match required size");
  at::_assert_async(repeats.ge(0).all(), "repeats can not be negative");
  const at::Tensor slots = at::zeros({total + 1}, ends.options());
  slots.index_put_({ends.clamp(0, total)}, at::ones_like(ends), /*accumulate=*/true);
  return slots.cumsum(0).narrow(0, 0, total).to(repeats.scalar_type());
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

namespace {

// The distinct values of `values` (flattened; `sort` first, else only runs of
// equal neighbours merge), each element's index among them and each value's
// count. NaN equals nothing, as in CPU's and CUDA's kernels. The number of
// distinct values is the one host read.
std::tuple<at::Tensor, at::Tensor, at::Tensor> distinct_values(const char* op, const at::Tensor& self, bool sort) {
  AsOneOp one_op(op);
  const at::Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  const at::TensorOptions index_options = self.options().dtype(at::kLong);
  if (n == 0) {
    return one_op.results(std::make_tuple(at::empty({0}, self.options()), at::zeros(self.sizes(), index_options),
                                          at::empty({0}, index_options)));
  }
  at::Tensor ordered = flat, order;
  if (sort) std::tie(ordered, order) = flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  // A run starts where a value differs from the one before it.
  const at::Tensor starts =
      at::cat({at::ones({1}, self.options().dtype(at::kBool)), ordered.slice(0, 1).ne(ordered.slice(0, 0, n - 1))});
  const at::Tensor group = starts.cumsum(0).sub_(1);  // each sorted element's distinct value
  const int64_t count = group[n - 1].item<int64_t>() + 1;
  // Every element of a group holds the same value, so which one lands is immaterial.
  const at::Tensor values = at::empty({count}, self.options()).index_put_({group}, ordered);
  const at::Tensor inverse = sort ? at::empty({n}, index_options).index_put_({order}, group) : group;
  const at::Tensor counts = at::zeros({count}, index_options).index_put_({group}, at::ones({n}, index_options), true);
  return one_op.results(std::make_tuple(values, inverse.view(self.sizes()), counts));
}

at::Tensor empty_index(const at::Tensor& self) { return at::empty({0}, self.options().dtype(at::kLong)); }

}  // namespace

// _unique / _unique2: sorted whether or not `sorted` is asked, as on CUDA.
std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool /*sorted*/, bool return_inverse) {
  auto [values, inverse, counts] = distinct_values("aten::_unique", self, /*sort=*/true);
  return {values, return_inverse ? inverse : empty_index(self)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool /*sorted*/, bool return_inverse,
                                                       bool return_counts) {
  auto [values, inverse, counts] = distinct_values("aten::_unique2", self, /*sort=*/true);
  return {values, return_inverse ? inverse : empty_index(self), return_counts ? counts : empty_index(self)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  if (dim) {  // whole slices compare: CPU's kernel
    return to_device("aten::unique_consecutive",
                     at::unique_consecutive(on_host(self), return_inverse, return_counts, dim), self.device());
  }
  auto [values, inverse, counts] = distinct_values("aten::unique_consecutive", self, /*sort=*/false);
  return {values, return_inverse ? inverse : empty_index(self), return_counts ? counts : empty_index(self)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts) {
  return to_device("aten::unique_dim", at::unique_dim(on_host(self), dim, sorted, return_inverse, return_counts),
                   self.device());
}

}  // namespace torch_tpu::device
