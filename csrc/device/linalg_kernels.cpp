// Linear algebra kernels besides the lowerings (csrc/lower/linalg/):
// - torch.cholesky (the old API) raises on a matrix that is not positive
//   definite, which needs the factorization's info on the host (a wait, as on
//   CUDA): it runs the lowered linalg_cholesky_ex and checks.
// - linalg_lstsq is composed from the lowered QR, triangular solve and SVD
//   (no host copy), for real and complex matrices, returning what CPU
//   returns for each driver. CPU's
//   default driver is gelsy and so is ours: solution and rank, no residuals
//   and no singular values. The solution is the least-squares one for a tall
//   matrix and the minimum-norm one for a wide matrix of full rank; a
//   rank-deficient matrix gets no basic solution as gelsy's (the rank is
//   counted from singular values above rcond * the largest).
// - ormqr multiplies by the Q of geqrf's reflectors: the lowered
//   householder_product forms Q (the reflectors padded with identity ones to
//   a square), then one matmul.
// - linalg_eig and the eigenvalues alone run on the host, as on CUDA:
//   CUDA's kernel calls MAGMA's geev, which takes host memory, so it copies
//   the input to the CPU and the results back (torch.linalg.eig: "this
//   function synchronizes that device with the CPU"). Here CPU's own kernel
//   (LAPACK's geev) computes them, so the eigenvalues come in CPU's order
//   and the eigenvectors with CPU's normalization; a nonsymmetric
//   eigensolver has no XLA lowering to take their place.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <limits>
#include <string>
#include <string_view>

#include "device/debug_checks.h"
#include "device/hand_written_kernels.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

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

// CPU's checks and messages (aten/src/ATen/native/BatchLinearAlgebra.cpp).
void check_lstsq_arguments(const at::Tensor& input, const at::Tensor& other, std::string_view driver) {
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(input.scalar_type() == other.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype ",
              input.scalar_type(), " and other's dtype ", other.scalar_type());
  const bool vector_case = at::native::linalg_solve_is_vector_rhs(input, other);
  TORCH_CHECK(input.size(-2) == (vector_case ? other.size(-1) : other.size(-2)), "torch.linalg.lstsq: input.size(-2) ",
              "should match other.size(", vector_case ? -1 : -2, ")");
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  TORCH_CHECK(at::isFloatingType(input.scalar_type()) || at::isComplexType(input.scalar_type()),
              "This function doesn't handle types other than float and double");
}

// Float32 matmuls at full precision while in scope, whatever the user's
// matmul precision: a factorization's products are part of its result, as
// ATen's linalg kernels disable TF32 (NoTF32Guard).
class FullPrecisionMatmuls {
 public:
  FullPrecisionMatmuls() : previous_(runtime::set_thread_matmul_precision("highest")) {}
  // The thread's own override again, or none: the process setting.
  ~FullPrecisionMatmuls() { runtime::set_thread_matmul_precision(previous_); }
  FullPrecisionMatmuls(const FullPrecisionMatmuls&) = delete;
  FullPrecisionMatmuls& operator=(const FullPrecisionMatmuls&) = delete;

 private:
  std::string previous_;
};

// X minimizing ||A X - B||, of minimum norm where A (m x n) is wide; A has
// full rank. (mH is mT for real matrices.)
at::Tensor full_rank_least_squares(const at::Tensor& a, const at::Tensor& b) {
  const int64_t m = a.size(-2), n = a.size(-1);
  if (m >= n) {
    auto [q, r] = at::linalg_qr(a);
    return at::linalg_solve_triangular(r, at::matmul(q.mH(), b), /*upper=*/true);
  }
  auto [q, r] = at::linalg_qr(a.mH());  // A = R^H Q^H: X = Q R^-H B
  return at::matmul(q, at::linalg_solve_triangular(r.mH(), b, /*upper=*/false));
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> lstsq_out(
    const at::Tensor& input, const at::Tensor& other, std::optional<double> rcond,
    std::optional<std::string_view> driver_name, at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank,
    at::Tensor& singular_values) {
  const std::string_view driver = driver_name.value_or("gelsy");
  check_lstsq_arguments(input, other, driver);
  FullPrecisionMatmuls full_precision;
  const bool vector_case = at::native::linalg_solve_is_vector_rhs(input, other);
  const int64_t m = input.size(-2), n = input.size(-1);
  at::Tensor b = vector_case ? other.unsqueeze(-1) : other;
  // Batch dims broadcast, as on CPU.
  auto [a_full, b_full] = at::native::_linalg_broadcast_batch_dims(input, b, nullptr);
  at::Tensor x;
  if (m == 0 || n == 0) {
    auto sizes = b_full.sizes().vec();
    sizes[sizes.size() - 2] = n;
    x = at::zeros(sizes, b_full.options());
  } else {
    x = full_rank_least_squares(a_full, b_full);
  }
  const std::vector<int64_t> batch(a_full.sizes().begin(), a_full.sizes().end() - 2);
  // Residuals and singular values are real for complex matrices too.
  const auto real_options = input.options().dtype(c10::toRealValueType(input.scalar_type()));
  at::Tensor res = at::empty({0}, real_options);
  at::Tensor rk = at::empty({0}, input.options().dtype(at::kLong));
  at::Tensor sv = at::empty({0}, real_options);
  if (driver != "gels") {
    at::Tensor values = at::linalg_svdvals(a_full);
    const double cutoff = rcond.value_or(std::numeric_limits<float>::epsilon() * std::max(m, n));
    if (values.size(-1) == 0) {
      rk = at::zeros(batch, input.options().dtype(at::kLong));
    } else {
      at::Tensor largest = std::get<0>(values.max(-1, /*keepdim=*/true));
      rk = values.gt(largest * cutoff).sum(-1);
    }
    if (driver != "gelsy") sv = values;
  }
  // LAPACK's residuals (tall matrices): gels always, gelsd and gelss where
  // every matrix has full rank, gelsy never.
  bool with_residuals = m > n && driver != "gelsy";
  if (with_residuals && driver != "gels") with_residuals = rk.eq(n).all().item<bool>();
  if (with_residuals) {
    res = (at::matmul(a_full, x) - b_full).abs().pow(2).sum(-2);  // a vector's residual stays (*, 1), as on CPU
  }
  if (vector_case) x = x.squeeze(-1);
  for (auto [out, value] :
       {std::pair<at::Tensor&, at::Tensor&>{solution, x}, {residuals, res}, {rank, rk}, {singular_values, sv}}) {
    at::native::resize_output(out, value.sizes());
    out.copy_(value);
  }
  return {solution, residuals, rank, singular_values};
}

// op(Q) other (left) or other op(Q), Q = H_1 ... H_k of input's reflectors.
at::Tensor reflectors_product(const at::Tensor& input, const at::Tensor& tau, const at::Tensor& other, bool left,
                              bool transpose) {
  // PyTorch's checks and messages: its meta kernel on the arguments' shapes.
  at::ormqr(input.to(at::kMeta), tau.to(at::kMeta), other.to(at::kMeta), left, transpose);
  FullPrecisionMatmuls full_precision;
  const int64_t order = input.size(-2), k = tau.size(-1);
  at::Tensor reflectors = at::constant_pad_nd(input.narrow(-1, 0, k), {0, order - k});
  at::Tensor q = at::linalg_householder_product(reflectors, at::constant_pad_nd(tau, {0, order - k}));
  if (transpose) q = q.mH();
  return left ? at::matmul(q, other) : at::matmul(other, q);
}

at::Tensor& ormqr_out(const at::Tensor& input, const at::Tensor& tau, const at::Tensor& other, bool left,
                      bool transpose, at::Tensor& out) {
  at::Tensor result = reflectors_product(input, tau, other, left, transpose);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// Debug mode checks the host kernel's results for NaN and Inf, as a lowered op's.
at::Tensor on_device_checked(const char* op, const at::Tensor& host, const at::Device& device) {
  at::Tensor result = host.to(device);
  check_finite_results(op, {result});
  return result;
}

std::tuple<at::Tensor, at::Tensor> eig(const at::Tensor& self) {
  auto [values, vectors] = at::linalg_eig(self.cpu());
  return {on_device_checked("aten::linalg_eig", values, self.device()),
          on_device_checked("aten::linalg_eig", vectors, self.device())};
}

// An out= result computed by CPU's out= kernel into host tensors of the
// out tensors' dtypes (its dtype checks and messages), then copied in.
at::Tensor host_like(const at::Tensor& out) { return at::empty({0}, out.options().device(at::kCPU)); }

void copy_out(const char* op, const at::Tensor& host, at::Tensor& out) {
  at::native::resize_output(out, host.sizes());
  out.copy_(on_device_checked(op, host, out.device()));
}

std::tuple<at::Tensor&, at::Tensor&> eig_out(const at::Tensor& self, at::Tensor& values, at::Tensor& vectors) {
  at::native::checkSameDevice("torch.linalg.eig", values, self, "eigenvalues");
  at::native::checkSameDevice("torch.linalg.eig", vectors, self, "eigenvectors");
  at::Tensor host_values = host_like(values), host_vectors = host_like(vectors);
  at::linalg_eig_out(host_values, host_vectors, self.cpu());
  copy_out("aten::linalg_eig", host_values, values);
  copy_out("aten::linalg_eig", host_vectors, vectors);
  return {values, vectors};
}

at::Tensor eigvals(const at::Tensor& self) {
  return on_device_checked("aten::_linalg_eigvals", at::_linalg_eigvals(self.cpu()), self.device());
}

at::Tensor& eigvals_out(const at::Tensor& self, at::Tensor& out) {
  at::native::checkSameDevice("torch.linalg.eigvals", out, self);
  at::Tensor host_values = host_like(out);
  at::linalg_eigvals_out(host_values, self.cpu());
  copy_out("aten::linalg_eigvals", host_values, out);
  return out;
}

}  // namespace

torch::CppFunction linalg_eig_kernel() { return torch::CppFunction(TORCH_FN(eig)); }
torch::CppFunction linalg_eig_out_kernel() { return torch::CppFunction(TORCH_FN(eig_out)); }
torch::CppFunction linalg_eigvals_kernel() { return torch::CppFunction(TORCH_FN(eigvals)); }
torch::CppFunction linalg_eigvals_out_kernel() { return torch::CppFunction(TORCH_FN(eigvals_out)); }
torch::CppFunction ormqr_kernel() { return torch::CppFunction(TORCH_FN(reflectors_product)); }
torch::CppFunction ormqr_out_kernel() { return torch::CppFunction(TORCH_FN(ormqr_out)); }
torch::CppFunction cholesky_kernel() { return torch::CppFunction(TORCH_FN(checked_cholesky)); }
torch::CppFunction cholesky_out_kernel() { return torch::CppFunction(TORCH_FN(checked_cholesky_out)); }
torch::CppFunction linalg_lstsq_out_kernel() { return torch::CppFunction(TORCH_FN(lstsq_out)); }

}  // namespace torch_tpu::device
