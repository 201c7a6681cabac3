#include "device/debug_checks.h"

#include "device/argument_checks.h"
#include "exec/mode_executor.h"
#include "runtime/eager_mode.h"

namespace torch_tpu::device {

namespace {

// [min, max] of an index tensor, read on the host.
std::pair<int64_t, int64_t> index_extent(const at::Tensor& index) {
  at::Tensor host = index.cpu().to(at::kLong);
  return {host.min().item<int64_t>(), host.max().item<int64_t>()};
}

// gather, scatter, scatter_add, index_add, index_select: (self, dim, index, ...).
// `index_error`: CPU raises IndexError, worded as index_select's and
// index_add's kernels word it; otherwise RuntimeError.
void check_dim_index(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, bool index_error) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = args[2].toTensor();
  if (index.numel() == 0) return;
  const int64_t dim = at::maybe_wrap_dim(args[1].toInt(), self.dim());
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  auto [lo, hi] = index_extent(index);
  const int64_t bad = lo < 0 ? lo : hi;
  if (lo >= 0 && hi < size) return;
  if (index_error) {
    TORCH_CHECK_INDEX(false, "index out of range in self (", schema.name(), ": index ", bad, " with size ", size, ")");
  }
  TORCH_CHECK(false, schema.name(), ": index ", bad, " is out of bounds for dimension ", dim, " with size ", size);
}

}  // namespace

void check_dim_index_range(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  check_dim_index(schema, args, /*index_error=*/false);
}

void check_dim_index_range_index_error(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  check_dim_index(schema, args, /*index_error=*/true);
}

void check_advanced_index_ranges(const c10::FunctionSchema&, const std::vector<c10::IValue>& args) {
  const at::Tensor& self = args[0].toTensor();
  auto list = args[1].toList();
  int64_t dim = 0;
  for (size_t i = 0; i < list.size(); ++i, ++dim) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined() || e.toTensor().numel() == 0) continue;
    const at::Tensor& index = e.toTensor();
    if (index.scalar_type() == at::kBool || index.scalar_type() == at::kByte) {
      dim += index.dim() - 1;  // a mask covers as many dims as it has
      continue;
    }
    const int64_t size = self.size(dim);
    auto [lo, hi] = index_extent(index);
    const int64_t bad = lo < -size ? lo : hi;
    TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", bad, " is out of bounds for dimension ", dim, " with size ",
                      size);
  }
}

void check_finite_results(const std::string& op, const std::vector<c10::IValue>& results) {
  if (!current_mode_executor().checks_each_op() || !runtime::check_nans()) return;
  std::vector<at::Tensor> tensors;
  for (const auto& r : results) collect_tensors(r, tensors);
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    at::Tensor host = t.cpu();
    TORCH_CHECK(at::isfinite(host).all().item<bool>(), "tpu debug (TORCH_TPU_CHECK_NANS): ", op,
                " produced NaN or Inf");
  }
}

}  // namespace torch_tpu::device
