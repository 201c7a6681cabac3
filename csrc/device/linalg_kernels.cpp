// Linear algebra kernels besides the lowerings (csrc/lower/linalg.cpp):
// - aten::geqrf has CPU and CUDA kernels but no Meta kernel, and every
//   lowered op first runs its Meta kernel (lowered_kernel.cpp) for argument
//   checks and result types. Registered for the Meta key, so fake tensors
//   gain it too.
// - torch.cholesky (the old API) raises on a matrix that is not positive
//   definite, which needs the factorization's info on the host (a wait, as on
//   CUDA): it runs the lowered linalg_cholesky_ex and checks.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace torch_tpu::device {

namespace {

// CPU's checks and results (LAPACK layout: `a` batched column-major).
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "torch.geqrf: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  auto sizes = self.sizes();
  at::Tensor a =
      at::empty_strided(sizes, at::native::batched_matrix_contiguous_strides(sizes, /*f_contig=*/true), self.options());
  std::vector<int64_t> tau_sizes(sizes.begin(), sizes.end() - 2);
  tau_sizes.push_back(std::min(sizes[sizes.size() - 2], sizes[sizes.size() - 1]));
  return {a, at::empty(tau_sizes, self.options())};
}

std::tuple<at::Tensor&, at::Tensor&> geqrf_out_meta(const at::Tensor& self, at::Tensor& a, at::Tensor& tau) {
  auto [ra, rtau] = geqrf_meta(self);
  at::native::resize_output(a, ra.sizes());
  at::native::resize_output(tau, rtau.sizes());
  return {a, tau};
}

at::Tensor checked_cholesky(const at::Tensor& self, bool upper) {
  auto [factor, info] = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return factor;
}

at::Tensor& checked_cholesky_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  at::Tensor factor = checked_cholesky(self, upper);
  at::native::resize_output(out, factor.sizes());
  out.copy_(factor);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cholesky", TORCH_FN(checked_cholesky));
  m.impl("cholesky.out", TORCH_FN(checked_cholesky_out));
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", TORCH_FN(geqrf_meta));
  m.impl("geqrf.a", TORCH_FN(geqrf_out_meta));
}

}  // namespace torch_tpu::device
