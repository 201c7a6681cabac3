// The rows of the registration table (csrc/device/rows/rows.h) for matrix
// products, factorizations, attention, convolutions and FFTs; their lowerings
// are in csrc/lower/ (matmul, linalg, attention, conv, im2col and fft). Above
// the rows, the checks, argument rewrites and meta kernels only these rows
// name.
#include "device/rows/rows.h"

#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <algorithm>
#include <limits>
#include <string>

#include "device/argument_checks.h"
#include "device/meta_inference.h"
#include "device/missing_meta_kernels.h"
#include "lower/attention.h"
#include "lower/conv.h"
#include "lower/fft.h"
#include "lower/im2col.h"
#include "lower/linalg.h"
#include "lower/lowering.h"
#include "lower/matmul.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// Matrix products: ATen's own checks and messages.
// mm and addmm share structured meta functions between CPU and CUDA
// (native/LinearAlgebra.cpp, native/Blas.cpp); PyTorch's Python meta kernels,
// which compute our result shapes, word theirs differently and check no
// dtypes. mm's dtype check is in each device's kernel: CUDA's wording here.
// The installed torch's CPU kernel words the others (torch 2.15 prefixes its
// messages with the op's name, "mm: ", which is also how addmm names mat1).

std::string matrix_sizes(const at::Tensor& t) { return std::to_string(t.size(0)) + "x" + std::to_string(t.size(1)); }

void check_mat1_mat2_shapes(const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", matrix_sizes(mat1), " and ",
              matrix_sizes(mat2), ")");
}

// addmm's meta function, and CPU's expand of self.
// addmm's dtype checks: self against mat2, then mat1 against mat2.
void check_addmm_dtypes(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", mat2.scalar_type());
  TORCH_CHECK(mat1.scalar_type() == mat2.scalar_type(), "mat1 and mat2 must have the same dtype, but got ",
              mat1.scalar_type(), " and ", mat2.scalar_type());
}

void check_addmm_arguments(const Args& args) {
  const at::Tensor &self = args[0].toTensor(), &mat1 = args[1].toTensor(), &mat2 = args[2].toTensor();
  check_addmm_dtypes(self, mat1, mat2);
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  check_mat1_mat2_shapes(mat1, mat2);
  // addmm's self expands to the product's shape (CPU's expand_size; PyTorch's
  // Python meta kernel leaves it to the kernel, and XLA's broadcast fails).
  const int64_t target[2] = {mat1.size(0), mat2.size(1)};
  TORCH_CHECK(self.dim() <= 2, "expand: the number of sizes provided (2) must be greater or equal to the number of ",
              "dimensions in the tensor (", self.dim(), ")");
  for (int64_t k = 0; k < self.dim(); ++k) {
    const int64_t d = 2 - self.dim() + k;
    TORCH_CHECK(self.size(k) == 1 || self.size(k) == target[d], "The expanded size of the tensor (", target[d],
                ") must match the existing size (", self.size(k), ") at non-singleton dimension ", d,
                ".  Target sizes: [", target[0], ", ", target[1], "].  Tensor sizes: ", self.sizes());
  }
}

void check_mm(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return;
  const at::Tensor &self = args[0].toTensor(), &mat2 = args[1].toTensor();
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(self.dim() == 2, "self must be a matrix");
    TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
    check_mat1_mat2_shapes(self, mat2);
  });
  TORCH_CHECK(self.dtype() == mat2.dtype(),
              "expected mat1 and mat2 to have the same dtype, but got: ", self.dtype().name(),
              " != ", mat2.dtype().name());
}

void check_addmm(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return;
  with_cpus_error(schema, args, [&] { check_addmm_arguments(args); });
}

// addbmm (native/LinearAlgebra.cpp's addbmm_impl_): CPU runs addmm_ on
// each batch, whose checks compare the dtypes (self against batch2, then
// batch1 against batch2) and whose kernel refuses bool; with no batch it
// only copies self, and none of that applies.
void check_addbmm(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return;
  const at::Tensor &self = args[0].toTensor(), &batch1 = args[1].toTensor(), &batch2 = args[2].toTensor();
  if (batch1.dim() != 3 || batch1.size(0) == 0) return;
  check_addmm_dtypes(self, batch1, batch2);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
}

// bmm and baddbmm (native/LinearAlgebra.cpp): after the meta function's
// shape checks, its dtype checks (baddbmm's input against batch1; an out=
// tensor's against batch2's), then CPU's kernel refuses bool (as CUDA's
// does) before it compares the operands' dtypes, which PyTorch's Python
// meta kernel does first. With shapes the meta kernel refuses, it raises as
// CPU does.
void check_batched_matmul_dtypes(const c10::FunctionSchema& schema, const Args& args) {
  const bool is_bmm = schema.name() == "aten::bmm";
  const size_t first = is_bmm ? 0 : 1;
  if (args.size() < first + 2 || !args[first].isTensor() || !args[first + 1].isTensor()) return;
  const at::Tensor &batch1 = args[first].toTensor(), &batch2 = args[first + 1].toTensor();
  if (batch1.dim() != 3 || batch2.dim() != 3 || batch1.size(0) != batch2.size(0) || batch1.size(2) != batch2.size(1)) {
    return;
  }
  const at::Tensor* self = is_bmm ? &batch1 : tensor_at(args, 0);
  if (!self) return;
  if (!is_bmm) {
    TORCH_CHECK(self->dtype() == batch1.dtype(), "Input dtypes must be the same, got: input ", self->dtype(),
                ", batch1: ", batch1.dtype(), ", batch2: ", batch2.dtype());
  }
  const at::Tensor* out = tensor_at(args, args.size() - 1);
  if (out && schema.arguments().back().is_out()) {
    TORCH_CHECK(out->dtype() == batch2.dtype(), "Expected out tensor to have dtype ", batch2.dtype(), ", but got ",
                out->dtype(), " instead");  // the meta function's result takes batch2's options
  }
  TORCH_CHECK_NOT_IMPLEMENTED(self->scalar_type() != at::kBool, "\"", is_bmm ? "bmm" : "baddbmm",
                              "\" not implemented for 'Bool'");
}

// addmv's meta function (native/Blas.cpp).
void check_addmv_shapes(const at::Tensor* self, const at::Tensor& mat, const at::Tensor& vec) {
  const int64_t self_dim = self ? self->dim() : 1;
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self_dim <= 1, "vector + matrix @ vector expected, got ", self_dim,
              ", ", mat.dim(), ", ", vec.dim());
  const int64_t input = self ? (self->dim() == 0 ? 1 : self->size(0)) : mat.size(0);
  TORCH_CHECK(mat.size(1) == vec.size(0) && (input == mat.size(0) || input == 1), "size mismatch, got input (", input,
              "), mat (", matrix_sizes(mat), "), vec (", vec.size(0), ")");
}

// Then CPU's and CUDA's kernels (addmv_out_cpu, addmv_out_cuda_impl), past
// the meta function's check that the three share a dtype: an empty result or an
// empty product only scales self, and neither kernel takes bool otherwise
// (mv runs as addmv: its message too).
void check_addmv(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return;
  const at::Tensor &self = args[0].toTensor(), &mat = args[1].toTensor(), &vec = args[2].toTensor();
  check_addmv_shapes(&self, mat, vec);
  const bool all_bool =
      self.scalar_type() == at::kBool && mat.scalar_type() == at::kBool && vec.scalar_type() == at::kBool;
  TORCH_CHECK_NOT_IMPLEMENTED(!all_bool || mat.numel() == 0, "\"addmv_impl_cpu\" not implemented for 'Bool'");
}

// dot and vdot (native/Blas.cpp's dot_check).
void check_dot(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return;
  const at::Tensor &self = args[0].toTensor(), &other = args[1].toTensor();
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(), "] and src [",
              other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ", other.numel(),
              " elements respectively");
}

// linalg_matrix_exp's own checks (the Python meta kernel asserts instead).
void check_matrix_exp(const c10::FunctionSchema&, const Args& args) {
  if (args.empty() || !args[0].isTensor()) return;
  at::native::squareCheckInputs(args[0].toTensor(), "linalg.matrix_exp");
  at::native::checkFloatingOrComplex(args[0].toTensor(), "matrix_exp");
}

// linalg_ldl_solve's C++ meta function (BatchLinearAlgebra.cpp), whose
// words for the pivots' dtype differ from the Python meta kernel's.
void check_ldl_solve(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return;
  const at::Tensor &ld = args[0].toTensor(), &pivots = args[1].toTensor(), &rhs = args[2].toTensor();
  at::native::squareCheckInputs(ld, "torch.linalg.ldl_solve");
  at::native::checkFloatingOrComplex(ld, "torch.linalg.ldl_solve");
  at::native::linearSolveCheckInputs(rhs, ld, "torch.linalg.ldl_solve");
  TORCH_CHECK(rhs.dim() >= 2, "torch.linalg.ldl_solve: Expected B to have at least 2 dimensions, but it has ",
              rhs.dim(), " dimensions instead");
  const auto expected_pivots_shape = ld.sizes().slice(0, ld.dim() - 1);
  TORCH_CHECK(expected_pivots_shape.equals(pivots.sizes()),
              "torch.linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with "
              "shape ",
              pivots.sizes(), " instead");
  TORCH_CHECK(at::isIntegralType(pivots.scalar_type(), /*includeBool=*/false),
              "torch.linalg.ldl_solve: Expected pivots to be integers. Got ", pivots.scalar_type());
  TORCH_CHECK(ld.scalar_type() == rhs.scalar_type(), "torch.linalg.ldl_solve: ", "LD dtype ", ld.scalar_type(),
              " does not match b dtype ", rhs.scalar_type());
}

// Convolution's input and parameters share one type
// (native/Convolution.cpp's check_input_same_type_as_parameters, on CUDA's paths).
void check_convolution_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *input = tensor_at(args, 0), *weight = tensor_at(args, 1), *bias = tensor_at(args, 2);
  if (!input || !weight) return;
  // check_shape_forward's first checks (native/Convolution.cpp).
  TORCH_CHECK(weight->dim() == input->dim(), "Expected ", weight->dim(), "-dimensional input for ", weight->dim(),
              "-dimensional weight ", weight->sizes(), ", but got ", input->dim(), "-dimensional input of size ",
              input->sizes(), " instead");
  const bool transposed = args.size() > 6 && args[6].isBool() && args[6].toBool();
  const int64_t groups = args.size() > 8 && args[8].isInt() ? args[8].toInt() : 1;
  // _convolution's parameter checks, before any shape: PyTorch's Python meta
  // kernel divides by the stride, and XLA refuses a non-positive dilation.
  auto any_below = [&](size_t i, int64_t bound) {
    if (i >= args.size() || !args[i].isIntList()) return false;
    for (int64_t v : args[i].toIntVector()) {
      if (v < bound) return true;
    }
    return false;
  };
  TORCH_CHECK(!any_below(3, 1), "non-positive stride is not supported");
  TORCH_CHECK(!any_below(5, 1), "dilation should be greater than zero");
  if (args.size() > 4 && args[4].isIntList()) {
    const std::vector<int64_t> padding = args[4].toIntVector();
    for (size_t d = 0; d < padding.size(); ++d) {
      TORCH_CHECK(padding[d] <= std::numeric_limits<int64_t>::max() / 2, "Given padding=", padding[d], " at dimension ",
                  d, " , expected padding to be at most ", std::numeric_limits<int64_t>::max() / 2);
    }
  }
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  if (weight->dim() >= 1) {
    TORCH_CHECK(weight->size(0) >= groups, "Given groups=", groups, ", expected weight to be at least ", groups,
                " at dimension 0, but got weight of size ", weight->sizes(), " instead");
    TORCH_CHECK(weight->size(0) % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ", groups,
                " at dimension 0, but got weight of size [", weight->sizes(), "] instead");
  }
  if (!transposed && bias && weight->dim() >= 1) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight->size(0), "Given weight of size ", weight->sizes(),
                ", expected bias to be 1-dimensional with ", weight->size(0), " elements, but got bias of size ",
                bias->sizes(), " instead");
  }
  if (input->dim() >= 2) {
    if (!transposed) {
      TORCH_CHECK(input->size(1) == weight->size(1) * groups, "Given groups=", groups, ", weight of size ",
                  weight->sizes(), ", expected input", input->sizes(), " to have ", weight->size(1) * groups,
                  " channels, but got ", input->size(1), " channels instead");
    } else {
      TORCH_CHECK(input->size(1) == weight->size(0), "Given transposed=", transposed, ", weight of size ",
                  weight->sizes(), ", expected input", input->sizes(), " to have ", weight->size(0),
                  " channels, but got ", input->size(1), " channels instead");
    }
  }
  TORCH_CHECK(input->options().type_equal(weight->options()), "Input type (", input->toString(), ") and weight type (",
              weight->toString(), ") should be the same");
  TORCH_CHECK(!bias || input->options().type_equal(bias->options()), "Input type (", input->toString(),
              ") and bias type (", bias->toString(), ") should be the same");
}

// The fused attention's backward (torch 2.11 has none).
// The fused attention's backward (csrc/lower/attention.cpp): gradients like
// q, k, v, and attn_bias's only when there is one (torch 2.13's own meta
// kernel; torch 2.11 has none).
void fused_attention_backward_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  for (size_t i = 1; i <= 3; ++i) stack->emplace_back(at::empty_like(args[i].toTensor()));
  const bool has_bias = args[4].isTensor() && args[4].toTensor().defined();
  stack->emplace_back(has_bias ? at::empty_like(args[4].toTensor()) : at::Tensor());
}

// In place of PyTorch's, which admits only CUDA's bfloat16; the device takes
// CPU's dtypes. The fake tensors torch.compile traces with get it too
// (torch_tpu/fake_kernels.py).
// _grouped_mm (csrc/lower/matmul.cpp): the argument checks and result
// shapes of CUDA's kernel (ATen/native/GroupedMMUtils.h), for every dtype it
// takes on CPU (float32, bfloat16, float16); PyTorch's Meta kernel admits
// only CUDA's bfloat16. The device has no stride alignment rules. Sizes are
// SymInts: the kernel serves torch.compile's fake tensors too, whose sizes
// may be symbolic.
void grouped_mm_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  const at::Tensor a = args[0].toTensor(), b = args[1].toTensor();
  const at::Tensor offs = args[2].isTensor() ? args[2].toTensor() : at::Tensor();
  for (const auto& [name, t] : {std::pair{"mat_a", a}, std::pair{"mat_b", b}}) {
    TORCH_CHECK(t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf,
                "Expected ", name, " to be Float32, BFloat16 or Float16 matrix, got ", t.scalar_type());
  }
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "mat_a has to be 2 or 3d");
  TORCH_CHECK(b.dim() == 2 || b.dim() == 3, "mat_b has to be 2 or 3d");
  const bool a_2d = a.dim() == 2, b_2d = b.dim() == 2;
  if (!a_2d || !b_2d)
    TORCH_CHECK(a.sym_size(-1) == b.sym_size(-2), "contraction dimension of mat_a and mat_b must match");
  TORCH_CHECK(offs.defined() == (a_2d || b_2d),
              "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  if (offs.defined()) {
    TORCH_CHECK(offs.dim() == 1, "offs has to be 1D");
    TORCH_CHECK(offs.scalar_type() == at::kInt, "Offsets have to be int32");
  }
  TORCH_CHECK(!args[3].isTensor(), "Bias not supported yet");
  const at::ScalarType out_dtype = args[4].isNone() ? a.scalar_type() : args[4].toScalarType();
  TORCH_CHECK(out_dtype == a.scalar_type(), "Grouped gemm output dtype must match `mat_a` dtype");
  std::vector<c10::SymInt> size;
  if (a_2d && b_2d) {
    size = {offs.sym_size(0), a.sym_size(0), b.sym_size(1)};
  } else if (a_2d) {
    TORCH_CHECK(offs.sym_size(0) == b.sym_size(0), "matrix batch sizes have to match");
    size = {a.sym_size(0), b.sym_size(-1)};
  } else if (b_2d) {
    TORCH_CHECK(offs.sym_size(0) == a.sym_size(0), "matrix batch sizes have to match");
    size = {a.sym_size(1), b.sym_size(1)};
  } else {
    TORCH_CHECK(a.sym_size(0) == b.sym_size(0), "batched dimension has to match");
    size = {a.sym_size(0), a.sym_size(1), b.sym_size(-1)};
  }
  stack->emplace_back(at::empty_symint(size, a.options().dtype(out_dtype)));
}

// geqrf has CPU and CUDA kernels but no Meta kernel.
// geqrf and geqrf.a: CPU's checks and results (LAPACK's layout: `a`
// batched column-major; tau (..., min(m, n))).
void geqrf_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  const at::Tensor self = args[0].toTensor();
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "torch.geqrf: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  const auto sizes = self.sizes();
  at::Tensor a =
      at::empty_strided(sizes, at::native::batched_matrix_contiguous_strides(sizes, /*f_contig=*/true), self.options());
  std::vector<int64_t> tau_sizes(sizes.begin(), sizes.end() - 2);
  tau_sizes.push_back(std::min(sizes[sizes.size() - 2], sizes[sizes.size() - 1]));
  at::Tensor tau = at::empty(tau_sizes, self.options());
  if (n == 3) {  // geqrf.a(self, *, a, tau)
    at::Tensor out_a = args[1].toTensor(), out_tau = args[2].toTensor();
    at::native::resize_output(out_a, a.sizes());
    at::native::resize_output(out_tau, tau.sizes());
    a = out_a;
    tau = out_tau;
  }
  stack->emplace_back(a);
  stack->emplace_back(tau);
}

// Meta correction (OpSpec::correct_meta): convolution's result (argument 0
// the input, 1 the weight) in convolution_memory_format's format.
void convolution_result_format(const std::vector<c10::IValue>& args, MetaResult& meta) {
  TensorMeta& out = meta.returns.at(0).at(0);
  switch (convolution_memory_format(args.at(0).toTensor(), args.at(1).toTensor())) {
    case at::MemoryFormat::ChannelsLast:
      out.strides = c10::get_channels_last_strides_2d(out.sizes);
      break;
    case at::MemoryFormat::ChannelsLast3d:
      out.strides = c10::get_channels_last_strides_3d(out.sizes);
      break;
    default:
      break;
  }
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    OpSpec(L::addbmm, "addbmm addbmm_ addbmm.out").check(check_addbmm),
    OpSpec(L::addmm, "addmm addmm_ addmm.out").gap_after_checks("addmm", not_bool).check(check_addmm),
    OpSpec(L::addmv, "addmv addmv_ addmv.out").check(check_addmv),
    OpSpec(L::baddbmm, "baddbmm baddbmm_ baddbmm.out").check(check_batched_matmul_dtypes),
    OpSpec(L::bmm, "bmm bmm.out").check(check_batched_matmul_dtypes),
    {L::channel_shuffle, "channel_shuffle channel_shuffle.out"},
    {L::cholesky_inverse, "cholesky_inverse cholesky_inverse.out"},
    {L::cholesky_solve_helper, "_cholesky_solve_helper _cholesky_solve_helper.out"},
    {L::col2im, "col2im col2im.out"},
    {L::conj_physical, "conj_physical.out conj_physical_ _conj_physical _conj_physical.out"},
    // The overrideable twins at::_convolution calls for PrivateUse1 have no meta kernel.
    OpSpec(L::convolution, "convolution convolution.out")
        .check(check_convolution_types)
        .correct(convolution_result_format),
    {L::convolution_backward, "convolution_backward"},
    OpSpec(L::dot, "dot dot.out").gap_after_checks("dot", not_bool).check(check_dot),
    {L::fft_c2c, "_fft_c2c _fft_c2c.out"},
    {L::fft_c2r, "_fft_c2r _fft_c2r.out"},
    {L::fft_r2c, "_fft_r2c _fft_r2c.out"},
    OpSpec(L::geqrf, "geqrf geqrf.a").meta_from(geqrf_meta),
    OpSpec(L::grouped_mm, "_grouped_mm").meta_instead(grouped_mm_meta).fake_from_meta(),
    {L::im2col, "im2col im2col.out"},
    {L::linalg_cholesky_ex, "linalg_cholesky_ex linalg_cholesky_ex.L"},
    {L::linalg_det, "_linalg_det _linalg_det.result"},
    {L::linalg_eigh, "_linalg_eigh _linalg_eigh.eigenvalues"},
    {L::linalg_householder_product, "linalg_householder_product linalg_householder_product.out"},
    {L::linalg_inv_ex, "linalg_inv_ex linalg_inv_ex.inverse"},
    {L::linalg_ldl_factor_ex, "linalg_ldl_factor_ex linalg_ldl_factor_ex.out"},
    OpSpec(L::linalg_ldl_solve, "linalg_ldl_solve linalg_ldl_solve.out").check(check_ldl_solve),
    {L::linalg_lu, "linalg_lu linalg_lu.out"},
    {L::linalg_lu_factor_ex, "linalg_lu_factor_ex linalg_lu_factor_ex.out"},
    {L::linalg_lu_solve, "linalg_lu_solve linalg_lu_solve.out"},
    OpSpec(L::linalg_matrix_exp, "linalg_matrix_exp linalg_matrix_exp.out").check(check_matrix_exp),
    {L::linalg_qr, "linalg_qr linalg_qr.out"},
    {L::linalg_slogdet, "_linalg_slogdet _linalg_slogdet.sign"},
    {L::linalg_solve_ex, "_linalg_solve_ex _linalg_solve_ex.result"},
    {L::linalg_solve_triangular, "linalg_solve_triangular linalg_solve_triangular.out"},
    {L::linalg_svd, "_linalg_svd _linalg_svd.U"},
    {L::lu_unpack, "lu_unpack lu_unpack.out"},
    // mm's meta function compares its operands' dtypes before the kernel
    // refuses bool (RuntimeError for bool beside float, as on CPU and CUDA).
    OpSpec(L::mm, "mm mm.out").gap_after_checks("mm", not_bool).check(check_mm),
    {L::roll, "roll roll.out"},
    {L::scaled_dot_product_fused_attention, "_scaled_dot_product_fused_attention_overrideable"},
    OpSpec(L::scaled_dot_product_fused_attention_backward, "_scaled_dot_product_fused_attention_overrideable_backward")
        .meta_from(fused_attention_backward_meta),
    {L::triangular_solve, "triangular_solve triangular_solve.X"},
    OpSpec(L::vdot, "vdot vdot.out").check(check_dot),
};

}  // namespace

std::span<const OpSpec> linear_algebra_rows() { return kRows; }

}  // namespace torch_tpu::device
