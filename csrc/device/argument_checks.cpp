#include "device/argument_checks.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/native/UpSample.h>
#include <ATen/ops/relu_native.h>
#include <c10/util/overflows.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "device/storage_buffer.h"
#include "lower/lowering.h"

namespace torch_tpu::device {

namespace {

using Args = std::vector<c10::IValue>;

// ---- every op: what a written tensor may overlap ----------------------------------
// TensorIterator's rules on CPU and CUDA (the Python meta kernels PyTorch
// registers for add_, fill_ ... do not check them).
void check_write_overlap(WriteOverlap rule, const c10::FunctionSchema& schema, const Args& args) {
  std::vector<at::Tensor> inputs;  // tensors the op reads
  for (size_t i = 0; i < args.size(); ++i) {
    if (!(writes_argument(schema.arguments()[i]) && schema.arguments()[i].is_out())) collect_tensors(args[i], inputs);
  }
  // Ops whose CPU kernels refuse an out= that aliases an input even exactly.
  const bool no_alias_at_all = rule == WriteOverlap::Disjoint;
  // fill_ with a number, zero_ and masked_fill_ write one value wherever they
  // write, so CPU and CUDA let them write an expanded tensor (masked_fill_
  // with a deprecation warning).
  const bool writes_one_value = rule == WriteOverlap::OneValue;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!writes_argument(schema.arguments()[i]) || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    TORCH_CHECK(writes_one_value || at::has_internal_overlap(t) != at::MemOverlap::Yes,
                "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location. Please clone() the tensor before performing the operation.");
    // TensorIterator's rule: a written tensor may be an input exactly
    // (x.add_(y), add(x, y, out=x)) but may not overlap one partially.
    if (rule == WriteOverlap::InputsCopiedFirst) continue;
    for (const at::Tensor& in : inputs) {
      if (!in.defined() || !is_tpu(in)) continue;
      if (no_alias_at_all && schema.arguments()[i].is_out()) {
        at::assert_no_overlap(t, in);
      } else if (!in.is_same(t)) {
        at::assert_no_partial_overlap(t, in);
      }
    }
  }
}

// The result type of an in-place elementwise op's operands.
at::ScalarType promoted_type(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  at::native::ResultTypeState state{};
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    // alpha (add, sub) and value (addcmul, addcdiv) are multipliers, not operands.
    if (schema.arguments()[i].name() == "alpha" || schema.arguments()[i].name() == "value") continue;
    if (v.isTensor() && v.toTensor().defined()) {
      state = at::native::update_result_type_state(v.toTensor(), state);
    } else if (v.isScalar()) {
      state = at::native::update_result_type_state(v.toScalar(), state);
    }
  }
  return at::native::result_type(state);
}

// Whether the overload writes its first argument in place (add_, not add.out).
bool writes_self(const c10::FunctionSchema& schema, const Args& args) {
  return !schema.arguments().empty() && writes_argument(schema.arguments()[0]) && !schema.arguments()[0].is_out() &&
         !args.empty() && args[0].isTensor();
}

void check_castable_to_self(at::ScalarType result, const Args& args) {
  at::ScalarType self_t = args[0].toTensor().scalar_type();
  TORCH_CHECK(at::canCast(result, self_t), "result type ", result, " can't be cast to the desired output type ",
              self_t);
}

// ---- mistakes whose exception the installed torch decides ---------------------------
// Some exception types and words changed between torch releases (2.15 raises
// TypeError for sort of complex numbers where 2.13 raised RuntimeError, and
// prefixes mm's shape errors with the op's name). For those the installed
// torch's CPU kernel of the same overload is asked: it runs on stand-ins of
// the arguments (their dtypes and shapes, no data: zeros expanded, a fresh
// tensor where the op writes) and raises that torch's own error. It returns
// where that kernel takes the arguments, and the caller raises its own.

at::Tensor cpu_stand_in(const at::Tensor& t, bool written, bool out) {
  if (!t.defined()) return t;
  const at::TensorOptions options(t.scalar_type());
  if (out) return at::empty({0}, options);  // resized by the kernel
  return written ? at::empty(t.sizes(), options) : at::zeros({}, options).expand(t.sizes());
}

void raise_cpus_error(const c10::FunctionSchema& schema, const Args& args) {
  torch::jit::Stack stack;
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    const c10::IValue& v = args[i];
    const bool written = writes_argument(schema.arguments()[i]), out = written && schema.arguments()[i].is_out();
    if (v.isTensor()) {
      stack.emplace_back(cpu_stand_in(v.toTensor(), written, out));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorVector()) list.push_back(cpu_stand_in(t, written, out));
      stack.emplace_back(list);
    } else if ((v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) || v.isGenerator()) {
      return;  // optional tensors (indices) and generators: no op here asks
    } else {
      stack.push_back(v);
    }
  }
  c10::Dispatcher::singleton()
      .findSchemaOrThrow(schema.name().c_str(), schema.overload_name().c_str())
      .callBoxed(stack);
}

// Runs `checks`; where they refuse the arguments, the installed torch's CPU
// kernel raises its own error first.
template <typename Checks>
void with_cpus_error(const c10::FunctionSchema& schema, const Args& args, Checks&& checks) {
  try {
    checks();
  } catch (const c10::Error&) {
    raise_cpus_error(schema, args);
    throw;
  }
}

}  // namespace

// ---- per-op checks ---------------------------------------------------------------------

// In-place elementwise ops: the result must be castable to self's dtype
// (TensorIterator's rule on CPU and CUDA; PyTorch's Python meta kernels do
// not check it when the other operand is a wrapped number).
void check_inplace_castable(const c10::FunctionSchema& schema, const Args& args) {
  if (writes_self(schema, args)) check_castable_to_self(promoted_type(schema, args), args);
}

// sub and rsub of bools: the installed torch's own sub_check (an inline of
// its headers), so the exception is that torch's (RuntimeError up to 2.13,
// NotImplementedError from 2.14), where its Python meta kernel raises ValueError.
void check_subtraction_operands(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor()) return;
  if (args[1].isTensor()) {
    at::native::sub_check(args[0].toTensor(), args[1].toTensor());
  } else if (args[1].isScalar()) {
    at::native::sub_check(args[0].toTensor(), args[1].toScalar());
  }
}

// div with a rounding mode of complex numbers: no kernel on CPU or CUDA
// (PyTorch's Python meta kernel raises RuntimeError instead).
void check_rounding_division_real(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[2].isString() || !args[0].isTensor()) return;
  const at::ScalarType common = args[1].isTensor() ? at::result_type(args[0].toTensor(), args[1].toTensor())
                                                   : at::result_type(args[0].toTensor(), args[1].toScalar());
  const bool floor = args[2].toStringRef() == "floor";
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(common), "\"", floor ? "div_floor_cpu" : "div_trunc_cpu",
                              "\" not implemented for '", common, "'");
}

// div_ as true division: integers divide into the default float type.
void check_inplace_division_castable(const c10::FunctionSchema& schema, const Args& args) {
  if (!writes_self(schema, args)) return;
  at::ScalarType t = promoted_type(schema, args);
  const bool true_div = schema.overload_name() == "Tensor";  // div_.Tensor_mode rounds
  if (true_div && at::isIntegralType(t, /*includeBool=*/true)) t = at::typeMetaToScalarType(at::get_default_dtype());
  check_castable_to_self(t, args);
}

// Advanced indexing: PyTorch raises IndexError for float indices (the Python
// meta kernel raises RuntimeError, CUDA and CPU IndexError).
void check_index_dtypes(const c10::FunctionSchema&, const Args& args) {
  std::vector<at::Tensor> indices;
  if (args.size() > 1) collect_tensors(args[1], indices);
  for (const at::Tensor& idx : indices) {
    if (!idx.defined()) continue;
    at::ScalarType t = idx.scalar_type();
    TORCH_CHECK_INDEX(t == at::kLong || t == at::kInt || t == at::kByte || t == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
  }
}

void check_index_select_dtype(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[2].isTensor()) return;
  at::ScalarType t = args[2].toTensor().scalar_type();
  TORCH_CHECK(t == at::kLong || t == at::kInt, "index_select(): Expected dtype int32 or int64 for index");
}

// Extremes of an empty tensor, with CPU's and CUDA's exception types and
// words (native/ReduceOps.cpp, TensorCompare.cpp): over a named empty dim,
// IndexError; over every dim, IndexError for argmax/argmin, RuntimeError for
// amax/amin/aminmax. The Python meta kernels raise RuntimeError for argmax
// and argmin, name argmin "argmax", and word amax/amin/aminmax otherwise.
void check_extreme_of_empty(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || args[0].toTensor().numel() != 0) return;
  const at::Tensor& self = args[0].toTensor();
  const std::string op = schema.name().substr(6);
  const bool arg = op == "argmax" || op == "argmin";
  std::vector<int64_t> dims;
  if (args[1].isInt()) dims = {args[1].toInt()};
  if (args[1].isIntList()) dims = args[1].toIntVector();
  if (dims.empty()) {
    TORCH_CHECK_INDEX(!arg, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
    TORCH_CHECK(op != "aminmax",
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                "identity.");
    TORCH_CHECK(false, op,
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                "dim with the 'dim' argument.");
  }
  for (int64_t d : dims) {
    const int64_t w = at::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK_INDEX(self.size(w) != 0, op, op == "aminmax" ? ": " : "(): ", "Expected reduction dim ", w,
                      " to have non-zero size.");
  }
}

// cat of 0-d tensors: CPU raises RuntimeError (the Python meta kernel IndexError).
void check_cat_inputs(const c10::FunctionSchema&, const Args& args) {
  if (args.empty()) return;
  std::vector<at::Tensor> inputs;
  collect_tensors(args[0], inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(!inputs[i].defined() || inputs[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
  }
}

// complex(real, imag): CPU's kernel checks the parts (the Python meta kernel
// asserts, or promotes float32 with float64 to complex128).
void check_complex_parts(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isTensor()) return;
  const at::Tensor &re = args[0].toTensor(), &im = args[1].toTensor();
  TORCH_CHECK(re.is_floating_point() && im.is_floating_point(),
              "Expected both inputs to be Half, Float or Double tensors but got ", re.scalar_type(), " and ",
              im.scalar_type());
  TORCH_CHECK(re.scalar_type() == im.scalar_type(), "Expected object of scalar type ", re.scalar_type(),
              " but got scalar type ", im.scalar_type(), " for second argument");
}

// clamp with neither bound: CPU's RuntimeError (the Python meta kernel raises ValueError).
void check_clamp_bounds(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 3) return;
  TORCH_CHECK(!(args[1].isNone() && args[2].isNone()), "torch.clamp: At least one of 'min' or 'max' must not be None");
  check_real_clamp(schema, args);
}

// ---- matrix products: ATen's own checks and messages -----------------------------
// mm and addmm share structured meta functions between CPU and CUDA
// (native/LinearAlgebra.cpp, native/Blas.cpp); PyTorch's Python meta kernels,
// which compute our result shapes, word theirs differently and check no
// dtypes. mm's dtype check is in each device's kernel: CUDA's wording here.
// The installed torch's CPU kernel words the others (torch 2.15 prefixes its
// messages with the op's name, "mm: ", which is also how addmm names mat1).
namespace {

std::string matrix_sizes(const at::Tensor& t) { return std::to_string(t.size(0)) + "x" + std::to_string(t.size(1)); }

void check_mat1_mat2_shapes(const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", matrix_sizes(mat1), " and ",
              matrix_sizes(mat2), ")");
}

// addmm's meta function, and CPU's expand of self.
void check_addmm_arguments(const Args& args) {
  const at::Tensor &self = args[0].toTensor(), &mat1 = args[1].toTensor(), &mat2 = args[2].toTensor();
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", mat2.scalar_type());
  TORCH_CHECK(mat1.scalar_type() == mat2.scalar_type(), "mat1 and mat2 must have the same dtype, but got ",
              mat1.scalar_type(), " and ", mat2.scalar_type());
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

}  // namespace

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

namespace {

// addmv's meta function (native/Blas.cpp).
void check_addmv_shapes(const at::Tensor* self, const at::Tensor& mat, const at::Tensor& vec) {
  const int64_t self_dim = self ? self->dim() : 1;
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self_dim <= 1, "vector + matrix @ vector expected, got ", self_dim,
              ", ", mat.dim(), ", ", vec.dim());
  const int64_t input = self ? (self->dim() == 0 ? 1 : self->size(0)) : mat.size(0);
  TORCH_CHECK(mat.size(1) == vec.size(0) && (input == mat.size(0) || input == 1), "size mismatch, got input (", input,
              "), mat (", matrix_sizes(mat), "), vec (", vec.size(0), ")");
}

}  // namespace

void check_addmv(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  check_addmv_shapes(&self, args[1].toTensor(), args[2].toTensor());
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

// ---- checks ATen makes on every device that PyTorch's meta kernels lack --------
namespace {

const at::Tensor* tensor_at(const Args& args, size_t i) {
  return i < args.size() && args[i].isTensor() && args[i].toTensor().defined() ? &args[i].toTensor() : nullptr;
}

}  // namespace

// at::native::_softmax and sort wrap `dim` (c10::maybe_wrap_dim: IndexError).
void check_dim_of_self(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self) return;
  for (size_t i = 0; i < schema.arguments().size() && i < args.size(); ++i) {
    if (schema.arguments()[i].name() == "dim" && args[i].isInt()) c10::maybe_wrap_dim(args[i].toInt(), self->dim());
  }
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

// arange's bounds, checked and converted as CPU's kernel does
// (native/RangeFactories.cpp): an infinite or NaN range first, then start
// and step to the accumulation type, end too for int64 results (other
// dtypes count their elements in double). A bound that overflows raises
// c10's error; PyTorch's Python meta kernel fails inside prims::iota instead.
void check_arange_bounds(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* out = tensor_at(args, 3);
  if (!out) return;
  const double start = args[0].toScalar().toDouble(), end = args[1].toScalar().toDouble();
  TORCH_CHECK(std::isfinite(start) && std::isfinite(end), "unsupported range: ", start, " -> ", end);
  auto convert = [&](auto accumulation) {
    using T = decltype(accumulation);
    args[0].toScalar().to<T>();
    args[2].toScalar().to<T>();
    if (out->scalar_type() == at::kLong) args[1].toScalar().to<T>();
  };
  const at::ScalarType t = out->scalar_type();
  if (t == at::kHalf || t == at::kBFloat16) {
    convert(float{});
  } else if (at::isFloatingType(t)) {
    convert(double{});
  } else if (at::isIntegralType(t, /*includeBool=*/false)) {
    convert(int64_t{});
  }
}

// index_add's meta function (index_func_meta_impl, native/TensorAdvancedIndexing.cpp):
// PyTorch's Python meta kernel checks none of it, and a zero-size self
// reaches no lowering that could.
void check_index_add_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2), *source = tensor_at(args, 3);
  if (!self || !index || !source || !args[1].isInt()) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK_INDEX(index->dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index->scalar_type() == at::kLong || index->scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index->scalar_type());
  TORCH_CHECK(self->scalar_type() == source->scalar_type(), "index_add_(): self (", self->scalar_type(),
              ") and source (", source->scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source->dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source->dim());
  TORCH_CHECK(index->numel() == (source->dim() == 0 ? 1 : source->size(dim)), "index_add_(): Number of indices (",
              index->numel(), ") should be equal to source.size(dim) (", source->dim() == 0 ? 1 : source->size(dim),
              ")");
  std::vector<int64_t> self_sizes = self->sizes().vec(), source_sizes = source->sizes().vec();
  if (source->dim() != 0 && self->dim() != 0) {
    self_sizes.erase(self_sizes.begin() + dim);
    source_sizes.erase(source_sizes.begin() + dim);
  }
  TORCH_CHECK(self_sizes == source_sizes,
              "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = ",
              self->sizes(), " source.shape = ", source->sizes());
}

namespace {

// Whether _index_put_impl_ runs as masked_fill_(mask, value.item()) on CPU
// and CUDA (canDispatchToMaskedFill): one boolean mask, one value, no
// accumulation. The value then converts to self's dtype like any number.
bool index_put_is_masked_fill(const Args& args) {
  const at::Tensor* values = tensor_at(args, 2);
  if (!values || values->numel() != 1 || args.size() < 4 || !args[3].isBool() || args[3].toBool()) return false;
  std::vector<at::Tensor> indices;
  collect_tensors(args[1], indices);
  int64_t defined = 0;
  bool mask = false;
  for (const at::Tensor& idx : indices) {
    if (!idx.defined()) continue;
    ++defined;
    mask = idx.scalar_type() == at::kBool;
  }
  return defined == 1 && mask;
}

// index_put's iterator (make_index_put_iterator).
void check_index_put_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *values = tensor_at(args, 2);
  if (!self || !values || index_put_is_masked_fill(args)) return;
  TORCH_CHECK(values->scalar_type() == self->scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self->scalar_type(),
              " for the destination and ", values->scalar_type(), " for the source.");
}

}  // namespace

void check_index_put(const c10::FunctionSchema& schema, const Args& args) {
  check_index_dtypes(schema, args);  // make_info, before the iterator
  check_index_put_types(schema, args);
}

// put_ (native/TensorAdvancedIndexing.cpp).
void check_put_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *source = tensor_at(args, 2);
  if (!self || !source) return;
  TORCH_CHECK(self->scalar_type() == source->scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ", self->scalar_type(),
              " and source.dtype = ", source->scalar_type());
}

// nll_loss's kernels take class indices as Long (or Byte) only.
void check_nll_target_type(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* target = tensor_at(args, 1);
  if (!target) return;
  TORCH_CHECK(target->scalar_type() == at::kLong || target->scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target->scalar_type());
}

// nll_loss_forward's meta function (native/LossNLL.cpp): RuntimeError where
// PyTorch's Python decomposition asserts (AssertionError).
void check_nll_loss_shapes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *target = tensor_at(args, 1), *weight = tensor_at(args, 2);
  if (!self || !target) return;
  TORCH_CHECK(self->dim() > 0 && self->dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target->dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool no_batch_dim = self->dim() == 1 && target->dim() == 0;
  TORCH_CHECK(no_batch_dim || self->size(0) == target->size(0), "size mismatch (got input: ", self->sizes(),
              ", target: ", target->sizes(), ")");
  const int64_t classes = self->size(-1);
  TORCH_CHECK(!weight || (weight->dim() == 1 && weight->numel() == classes),
              "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ", weight ? weight->sizes() : at::IntArrayRef{});
  TORCH_CHECK(!weight || weight->scalar_type() == self->scalar_type(), "expected scalar type ", self->scalar_type(),
              " but found ", weight->scalar_type());
}

// maximum, minimum, fmax, fmin (native/BinaryOps.cpp): no order on complex
// numbers (the installed torch's exception: TypeError from 2.15).
void check_real_operands(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *other = tensor_at(args, 1);
  if (!self || !other) return;
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(!self->is_complex() && !other->is_complex(), schema.name().substr(6),
                " not implemented for complex tensors.");
  });
}

// ---- clamp of integers with a bound past the dtype: the installed torch's rule -----
// Up to torch 2.14, c10 converts the bound and refuses it (a negative bound
// wraps into an unsigned dtype: uint8 takes -1 as 255); torch 2.15 drops a
// bound that clamps nothing (a min below the dtype's range, a max above it)
// and refuses the other side in its own words. The installed torch's CPU
// kernel, on one element, raises its error; a bound it takes is replaced by
// the value it clamps with (its clamp of the dtype's extreme), which the
// lowering converts without overflow.
namespace {

enum class ClampBounds { Both, Min, Max };

void normalize_integer_clamp(Args& args, ClampBounds which) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || !at::isIntegralType(self->scalar_type(), /*includeBool=*/false)) return;
  const size_t min_at = which == ClampBounds::Max ? 0 : 1, max_at = which == ClampBounds::Both ? 2 : 1;
  const bool has_min = which != ClampBounds::Max, has_max = which != ClampBounds::Min;
  auto integer_bound = [&](size_t i) { return i < args.size() && args[i].isInt(); };
  c10::Scalar lowest, highest;
  bool past = false;
  AT_DISPATCH_V2(
      self->scalar_type(), "clamp", AT_WRAP([&] {
        lowest = std::numeric_limits<scalar_t>::lowest();
        highest = std::numeric_limits<scalar_t>::max();
        for (size_t i : {min_at, max_at}) {
          if (integer_bound(i) && c10::overflows<scalar_t, int64_t>(args[i].toInt(), /*strict_unsigned=*/true)) {
            past = true;
          }
        }
      }),
      AT_EXPAND(AT_INTEGRAL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  if (!past) return;
  const at::TensorOptions options(self->scalar_type());
  auto bound = [&](size_t i, bool present) {
    return present && integer_bound(i) ? std::optional<c10::Scalar>(args[i].toInt()) : std::nullopt;
  };
  const std::optional<c10::Scalar> min = bound(min_at, has_min), max = bound(max_at, has_max);
  const at::Tensor one = at::zeros({1}, options);
  if (which == ClampBounds::Both) at::clamp(one, min, max);
  if (which == ClampBounds::Min) at::clamp_min(one, *min);
  if (which == ClampBounds::Max) at::clamp_max(one, *max);
  if (min) args[min_at] = at::clamp_min(at::full({1}, lowest, options), *min).item();
  if (max) args[max_at] = at::clamp_max(at::full({1}, highest, options), *max).item();
}

}  // namespace

void normalize_clamp_bounds(Args& args) { normalize_integer_clamp(args, ClampBounds::Both); }
void normalize_clamp_min_bound(Args& args) { normalize_integer_clamp(args, ClampBounds::Min); }
void normalize_clamp_max_bound(Args& args) { normalize_integer_clamp(args, ClampBounds::Max); }

// clamp and the activations made of it (relu, hardtanh): no order on
// complex numbers (native/TensorCompare.cpp); XLA's compiler aborts on one.
void check_real_clamp(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  TORCH_CHECK_NOT_IMPLEMENTED(!self || !self->is_complex(), "clamp is not supported for complex types");
}

// relu of bool: the installed torch's CPU relu refuses it before computing
// (RuntimeError up to 2.13, NotImplementedError from 2.14), so that kernel,
// on an empty CPU tensor, raises this torch's exception and message.
void check_relu_of_bool(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (self && self->scalar_type() == at::kBool) at::native::relu(at::empty({0}, at::TensorOptions(at::kBool)));
}

// sort and topk (native/Sorting.cpp): no order on complex numbers, no topk
// of bools (the installed torch's exceptions: TypeError and
// NotImplementedError from 2.15).
void check_sortable(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  const bool topk = schema.name() == "aten::topk";
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(!self || !self->is_complex(), topk ? "topk" : "Sort", " does not support complex dtypes on tpu");
    TORCH_CHECK(!topk || !self || self->scalar_type() != at::kBool, "topk does not support bool dtypes on tpu");
  });
}

// binary_cross_entropy's iterator takes input and target of one dtype
// (TensorIterator's check_all_same_dtype).
void check_bce_dtypes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *target = tensor_at(args, 1);
  if (!self || !target) return;
  TORCH_CHECK(self->scalar_type() == target->scalar_type(), "Found dtype ", target->scalar_type(), " but expected ",
              self->scalar_type());
}

// mse, smooth_l1 and huber losses dispatch on the iterator's common dtype,
// so an integer input beside a float target computes (native/Loss.cpp).
void check_loss_common_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *target = tensor_at(args, 1);
  if (!self || !target) return;
  const at::ScalarType common = at::result_type(*self, *target);
  std::string kernel = schema.name().substr(6);  // aten::mse_loss -> mse_cpu
  kernel = kernel.substr(0, kernel.rfind("_loss")) + "_cpu";
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(common), "\"", kernel, "\" not implemented for '", common, "'");
}

// kthvalue (native/Sorting.cpp): the reduced dim must hold a value before k
// is checked against it.
void check_kthvalue_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 3 || !args[2].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[2].toInt(), self->dim());
  TORCH_CHECK_INDEX(self->size(dim) > 0, "kthvalue(): Expected reduction dim ", dim, " to have non-zero size.");
}

// Advanced indexing (AdvancedIndex, native/TensorAdvancedIndexing.cpp): the
// index tensors broadcast together, and an empty indexed dim admits no
// index; both are known from shapes, so they raise at the call on CUDA too.
void check_advanced_index_shapes(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isList()) return;
  auto list = args[1].toList();
  std::vector<at::Tensor> indices;
  std::vector<int64_t> dims;  // the dim of self each index tensor indexes
  int64_t dim = 0;
  bool has_mask = false;
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined()) {
      ++dim;
      continue;
    }
    const at::Tensor& idx = e.toTensor();
    const bool mask = idx.scalar_type() == at::kBool || idx.scalar_type() == at::kByte;
    has_mask = has_mask || mask;
    if (!mask) {
      indices.push_back(idx);
      dims.push_back(dim);
    }
    dim += mask ? idx.dim() : 1;
  }
  if (has_mask || indices.empty()) return;  // a lone mask (index_put_) selects within its own shape
  std::vector<int64_t> shape;               // the broadcast shape so far, trailing dims aligned
  for (const at::Tensor& idx : indices) {
    const auto sizes = idx.sizes();
    if (sizes.size() > shape.size()) shape.insert(shape.begin(), sizes.size() - shape.size(), 1);
    for (size_t k = 0; k < sizes.size(); ++k) {
      int64_t& have = shape[shape.size() - sizes.size() + k];
      if (have == 1) {
        have = sizes[k];
      } else if (sizes[k] != 1 && sizes[k] != have) {
        std::string shapes;
        for (size_t j = 0; j < indices.size(); ++j) shapes += (j ? ", " : "") + c10::str(indices[j].sizes());
        TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                          shapes);
      }
    }
  }
  const int64_t selected = c10::multiply_integers(shape);
  for (int64_t d : dims) {
    TORCH_CHECK_INDEX(d >= self->dim() || self->size(d) != 0 || selected == 0,
                      "index is out of bounds for dimension with size 0");
  }
  // index_put's values broadcast to the indexing result: the indices' shape
  // where the indexed dims were (first, when they are not adjacent), with the
  // dims no index tensor takes.
  const at::Tensor* values =
      schema.arguments().size() > 2 && schema.arguments()[2].name() == "values" ? tensor_at(args, 2) : nullptr;
  if (!values || dim > self->dim()) return;
  bool adjacent = true;
  for (size_t i = 1; i < dims.size(); ++i) adjacent = adjacent && dims[i] == dims[i - 1] + 1;
  std::vector<int64_t> result;
  for (int64_t d = 0; d < self->dim(); ++d) {
    const bool indexed = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (indexed && d == dims[0] && adjacent) result.insert(result.end(), shape.begin(), shape.end());
    if (!indexed) result.push_back(self->size(d));
  }
  if (!adjacent) result.insert(result.begin(), shape.begin(), shape.end());
  bool fits = values->dim() <= static_cast<int64_t>(result.size());
  for (int64_t k = 0; fits && k < values->dim(); ++k) {
    const int64_t v = values->size(values->dim() - 1 - k), r = result[result.size() - 1 - k];
    fits = v == 1 || v == r;
  }
  TORCH_CHECK(fits, "shape mismatch: value tensor of shape ", values->sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(result));
}

// index_select and gather over an empty dim: no index can be in range, and
// CPU and CUDA say so from the shapes.
void check_index_select_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK_INDEX(index->dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index_select(): self indexing axis dim should be positive");
}

void check_gather_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index is out of bounds for dimension ", dim, " with size 0");
}

// Ops with no order on (or no sign of) complex numbers that PyTorch's meta
// kernels let through, with the installed torch's CPU exception type and
// words (max.dim's is TypeError from 2.15).
void check_not_complex(const c10::FunctionSchema& schema, const Args& args) {
  const std::string& name = schema.name();
  for (size_t i = 0; i < 2 && i < args.size(); ++i) {
    const bool complex = args[i].isTensor() ? args[i].toTensor().defined() && args[i].toTensor().is_complex()
                                            : args[i].isScalar() && args[i].toScalar().isComplex();
    if (!complex) continue;
    raise_cpus_error(schema, args);
    if (name == "aten::sign") {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "Unlike NumPy, torch.sign is not intended to support complex numbers. ",
                                  "Please use torch.sgn instead.");
    }
    if (name == "aten::max" || name == "aten::min")
      TORCH_CHECK(false, name.substr(6), "(): does not support complex input");
    const at::ScalarType t = args[i].isTensor() ? args[i].toTensor().scalar_type() : at::kComplexDouble;
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", name.substr(6), "_cpu\" not implemented for '", t, "'");
  }
}

// batch_norm's and group_norm's parameters (weight, bias, running stats):
// the input's dtype, or float beside a reduced-precision input (CPU's
// mixed-dtype rule, native/mixed_data_type.h).
void check_norm_parameter_dtypes(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* input = tensor_at(args, 0);
  if (!input || !at::isFloatingType(input->scalar_type())) return;
  const bool group = schema.name() == "aten::native_group_norm";
  const size_t last = group ? 2 : 4;  // group_norm: weight, bias; batch_norm: + running mean, var
  const bool reduced = input->scalar_type() == at::kHalf || input->scalar_type() == at::kBFloat16;
  for (size_t i = 1; i <= last && i < args.size(); ++i) {
    const at::Tensor* p = tensor_at(args, i);
    if (!p || p->scalar_type() == input->scalar_type()) continue;
    if (reduced && p->scalar_type() == at::kFloat) continue;
    TORCH_CHECK(false, "expected scalar type ", input->scalar_type(), " but found ", p->scalar_type());
  }
}

// scatter, scatter_add, scatter_reduce into an empty dim: no index can be in
// range, and CPU says so at the call.
void check_scatter_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index is out of bounds for dimension ", dim, " with size 0");
}

// adaptive_avg_pool{2,3}d (native/AdaptiveAveragePooling.cpp): every
// non-batch dim holds something.
void check_adaptive_pool_input(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isIntList()) return;
  const int64_t spatial = static_cast<int64_t>(args[1].toIntVector().size());
  for (int64_t d = self->dim() - spatial; d < self->dim(); ++d) {
    TORCH_CHECK(d < 0 || self->size(d) > 0, schema.name().substr(7), "(): Expected input to have non-zero size for ",
                "non-batch dimensions, but input has sizes ", self->sizes(), " with dimension ", d, " being empty");
  }
}

// _embedding_bag over a weight of no rows: no index is in its range, and
// CPU says so at the call (XLA refuses the gather of an empty table).
void check_embedding_bag_rows(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *weight = tensor_at(args, 0), *indices = tensor_at(args, 1);
  if (!weight || !indices || weight->dim() == 0) return;
  TORCH_CHECK(indices->numel() == 0 || weight->size(0) > 0,
              "Index 0 of input is not in the valid range [0, 0): the weight has no rows");
}

// argmax and argmin (native/ReduceOps.cpp): neither bools nor complex
// numbers (the installed torch's exceptions: NotImplementedError and
// TypeError from 2.15).
void check_arg_extreme_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self) return;
  const std::string op = schema.name().substr(6);
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(self->scalar_type() != at::kBool, op, "(): does not support bool input");
    TORCH_CHECK(!self->is_complex(), op, "(): does not support complex input");
  });
}

// reflection_pad and replication_pad of every rank: no kernel for bool.
void check_pad_not_bool(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  TORCH_CHECK_NOT_IMPLEMENTED(!self || self->scalar_type() != at::kBool, "\"", schema.name().substr(6),
                              "\" not implemented for 'Bool'");
}

// replication_pad{1,2,3}d (native/ReplicationPadding.cpp): every padded
// size at least 1, added in int64 as CPU adds it (wrapping); PyTorch's
// Python meta kernel overflows Python's int into new_empty (TypeError).
void check_replication_pad_sizes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isIntList()) return;
  const std::vector<int64_t> pad = args[1].toIntVector();
  static const char* const kNames[] = {"W", "H", "D"};
  for (size_t i = 0; i < pad.size() / 2 && i < 3 && static_cast<int64_t>(i) < self->dim(); ++i) {
    const int64_t in = self->size(self->dim() - 1 - static_cast<int64_t>(i));
    const int64_t out = static_cast<int64_t>(static_cast<uint64_t>(in) + static_cast<uint64_t>(pad[2 * i]) +
                                             static_cast<uint64_t>(pad[2 * i + 1]));
    TORCH_CHECK(out >= 1, "input (", kNames[i], ": ", in, ") is too small. Calculated output ", kNames[i], ": ", out);
  }
}

// upsample_*{1,2,3}d (native/UpSample.h): every input and output size
// positive. PyTorch's Python meta kernels skip it (bilinear, bicubic) or fail
// on it with TypeError (nearest); the lowerings have nothing to resample.
void check_upsample_sizes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isIntList()) return;
  const std::vector<int64_t> output_size = args[1].toIntVector();
  switch (output_size.size()) {
    case 1:
      at::native::upsample_1d_common_check(self->sizes(), output_size);
      break;
    case 2:
      at::native::upsample_2d_common_check(self->sizes(), output_size);
      break;
    case 3:
      at::native::upsample_3d_common_check(self->sizes(), output_size);
      break;
    default:
      return;
  }
  // An empty batch passes; an empty channel dim does not.
  const auto sizes = self->sizes();
  TORCH_CHECK(self->numel() != 0 || c10::multiply_integers(sizes.begin() + 1, sizes.end()) != 0, "Non-empty ",
              sizes.size(), "D data tensor expected but got a tensor with sizes ", sizes);
}

// index_copy's and index_fill's meta functions.
void check_index_copy_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2), *source = tensor_at(args, 3);
  if (!self || !source) return;
  // index_copy's meta function's order (native/TensorAdvancedIndexing.cpp).
  TORCH_CHECK_INDEX(!index || index->dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ",
                    index ? index->dim() : 0, ")");
  TORCH_CHECK_INDEX(source->dim() == self->dim() || source->dim() == 0 || self->dim() == 0,
                    "index_copy_(): When source and destination are not scalars, their dimensionality must match. ",
                    "Source dimensionality (", source->dim(), "), destination dimensionality (", self->dim(), ")");
  TORCH_CHECK(!index || index->scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index->scalar_type());
  if (index && source->dim() > 0 && args[1].isInt()) {
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), source->dim());
    TORCH_CHECK_INDEX(index->numel() == source->size(dim), "index_copy_(): Number of indices (", index->numel(),
                      ") should be equal to source.size(dim) (", source->size(dim), ")");
  }
  TORCH_CHECK(self->scalar_type() == source->scalar_type(),
              "index_copy_(): self and source expected to have the same dtype, but got (self) ", self->scalar_type(),
              " and (source) ", source->scalar_type());
}

void check_index_fill_index(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!index) return;
  TORCH_CHECK_INDEX(index->scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  // No index is in range of an empty dim (CPU fails restriding self for it).
  if (self && self->dim() > 0 && args[1].isInt()) {
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
    TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index_fill_(): index out of range for dimension ", dim,
                " with size 0");
  }
}

// topk's meta function.
void check_topk_k(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 3 || !args[1].isInt() || !args[2].isInt()) return;
  const int64_t dim = c10::maybe_wrap_dim(args[2].toInt(), self->dim());
  const int64_t k = args[1].toInt();
  TORCH_CHECK(k >= 0 && k <= (self->dim() > 0 ? self->size(dim) : 1), "selected index k out of range");
}

// cumsum/cumprod into bool: no kernel on CPU or CUDA.
void check_scan_dtype(const c10::FunctionSchema& schema, const Args& args) {
  if (args.size() < 3 || !args[2].isInt()) return;
  const auto dtype = static_cast<at::ScalarType>(args[2].toInt());
  TORCH_CHECK_NOT_IMPLEMENTED(dtype != at::kBool, "\"", schema.name().substr(6), "\" not implemented for '", dtype,
                              "'");
}

// Dtype gaps (OpSpec::dtype_gap): which first-argument dtypes have a kernel.
bool floating(at::ScalarType t) { return at::isFloatingType(t); }
bool floating_or_complex(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }
bool not_bool(at::ScalarType t) { return t != at::kBool; }
bool real_not_bool(at::ScalarType t) { return t != at::kBool && !at::isComplexType(t); }
bool floating_or_int64(at::ScalarType t) { return at::isFloatingType(t) || t == at::kLong; }
bool not_floating(at::ScalarType t) { return !at::isFloatingType(t); }

// upsample_nearest{1,2,3}d and their _exact twins: the kernel each names.
void check_upsample_nearest_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || at::isFloatingType(self->scalar_type()) || self->scalar_type() == at::kByte) return;
  const std::string& name = schema.name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"upsample_nearest", name.substr(name.size() - 2), "\" not implemented for '",
                              self->scalar_type(), "'");
}

// bernoulli(self) reads self as probabilities.
void check_bernoulli_probability_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (schema.overload_name().empty() && self && !at::isFloatingType(self->scalar_type())) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"bernoulli_tensor_p_\" not implemented for '", self->scalar_type(), "'");
  }
}

// addcdiv's meta function (native/PointwiseOps.cpp): integer quotients are
// refused, bool included (PyTorch's Python meta prints this as a tuple, and
// lets bool through to a program that does not compile).
void check_addcdiv_integer_division(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *tensor1 = tensor_at(args, 1), *tensor2 = tensor_at(args, 2);
  if (!tensor1 || !tensor2) return;
  TORCH_CHECK(!(at::isIntegralType(tensor1->scalar_type(), /*includeBool=*/true) &&
                at::isIntegralType(tensor2->scalar_type(), /*includeBool=*/true)),
              "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ", "for integer inputs and as ",
              "(input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
}

// std_var_out (native/ReduceOps.cpp), on every device; its exception type
// is the installed torch's (NotImplementedError from 2.15).
void check_std_var_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self) return;
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(at::isFloatingType(self->scalar_type()) || at::isComplexType(self->scalar_type()),
                "std and var only support floating point and complex dtypes");
  });
}

// layer_norm's parameters share the input's dtype, or are float for a
// bfloat16/half input (CPU's check_mixed_data_type, worded with our device).
void check_layer_norm_parameters(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* input = tensor_at(args, 0);
  if (!input) return;
  bool mixed = false;
  for (size_t i : {2, 3}) {
    const at::Tensor* p = tensor_at(args, i);
    if (!p || p->scalar_type() == input->scalar_type()) continue;
    TORCH_CHECK(p->scalar_type() == at::kFloat, "mixed dtype (tpu): expect parameter to have scalar type of Float");
    mixed = true;
  }
  TORCH_CHECK(!mixed || at::isReducedFloatingType(input->scalar_type()),
              "mixed dtype (tpu): all inputs must share same datatype.");
}

// A tensor read as one truth value (_assert_async; CUDA's kernel and
// is_nonzero word it so).
void check_single_value(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self) return;
  TORCH_CHECK(self->numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self->numel() < 2, "Boolean value of Tensor with more than one value is ambiguous");
}

// masked_fill's kernels (CPU and CUDA alike).
void check_masked_fill_mask(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* mask = tensor_at(args, 1);
  if (!mask) return;
  TORCH_CHECK(mask->scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask->dtype().name());
}

// where's (native/TensorCompare.cpp).
// where's uint8 condition: CPU and CUDA read it as bool, with a deprecation
// warning (native/TensorCompare.cpp); PyTorch's meta kernel refuses it.
void normalize_where_condition(Args& args) {
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& condition = args[0].toTensor();
  if (!condition.defined() || condition.scalar_type() != at::kByte) return;
  TORCH_WARN_ONCE(
      "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future version "
      "of PyTorch. Use a boolean condition instead.");
  args[0] = condition.to(at::kBool);
}

void check_where_condition(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* condition = tensor_at(args, 0);
  if (!condition) return;
  TORCH_CHECK(condition->scalar_type() == at::kByte || condition->scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition->scalar_type());
}

// lerp's meta functions (native/Lerp.cpp).
void check_lerp_dtypes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *end = tensor_at(args, 1), *weight = tensor_at(args, 2);
  if (!self || !end) return;
  TORCH_CHECK(self->dtype() == end->dtype(), "expected dtype ", self->dtype().name(), " for `end` but got dtype ",
              end->dtype().name());
  if (weight && !weight->unsafeGetTensorImpl()->is_wrapped_number()) {
    TORCH_CHECK(self->dtype() == weight->dtype(), "expected dtype ", self->dtype().name(),
                " for `weight` but got dtype ", weight->dtype().name());
  }
}

// multinomial's distribution checks, as PyTorch makes them on every device
// (native/Distributions.cpp): they read reductions of the probabilities back
// to the host, so a call waits for its input like CUDA's does. CUDA checks
// only the no-replacement / single-sample path on the host (the other path
// asserts inside its kernel, which would abort); we check every path and
// raise CPU's RuntimeError.
void check_multinomial_distribution(const c10::FunctionSchema&, const Args& args) {
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& probs = args[0].toTensor();
  if (probs.numel() == 0 || !at::isFloatingType(probs.scalar_type())) return;
  const at::Tensor valid = (probs.max() < INFINITY).logical_and(probs.min() >= 0);
  TORCH_CHECK(valid.item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  const at::Tensor row_sums = probs.dim() == 1 ? probs.sum() : probs.sum(1);
  TORCH_CHECK(!(row_sums == 0).any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
}

// GradScaler's kernels take one-element float32 scale and found_inf tensors
// and an int32 growth tracker (AmpGradScalerKernels.cpp's messages).
void check_amp_update_scale(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *scale = tensor_at(args, 0), *tracker = tensor_at(args, 1), *found_inf = tensor_at(args, 2);
  if (!scale || !tracker || !found_inf) return;
  TORCH_CHECK(scale->numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(tracker->numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(found_inf->numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(tracker->scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(scale->scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf->scalar_type() == at::kFloat, "found_inf must be a float tensor.");
}

// ---- what lower/ computes as this torch does (lowering.h) ---------------------------
namespace {

bool c10_float_into_integer_overflows(double v, lower::ElementType t) {
  switch (t) {
    case lower::ElementType::S8:
      return c10::overflows<int8_t, double>(v);
    case lower::ElementType::S16:
      return c10::overflows<int16_t, double>(v);
    case lower::ElementType::S32:
      return c10::overflows<int32_t, double>(v);
    case lower::ElementType::S64:
      return c10::overflows<int64_t, double>(v);
    case lower::ElementType::U8:
      return c10::overflows<uint8_t, double>(v);
    case lower::ElementType::U16:
      return c10::overflows<uint16_t, double>(v);
    case lower::ElementType::U32:
      return c10::overflows<uint32_t, double>(v);
    case lower::ElementType::U64:
      return c10::overflows<uint64_t, double>(v);
    default:
      return false;
  }
}

// Asked once, on the first such linspace: whether this torch's CPU kernel
// gives a bfloat16 linspace rounded once from float32.
bool cpu_half_linspace_rounds_once() {
  static const bool once = at::linspace(0, 1, 100, at::TensorOptions(at::kBFloat16))
                               .equal(at::linspace(0, 1, 100, at::TensorOptions(at::kFloat)).to(at::kBFloat16));
  return once;
}

[[maybe_unused]] const bool torch_rules_installed = [] {
  lower::set_float_into_integer_overflows(c10_float_into_integer_overflows);
  lower::set_half_linspace_rounds_once(cpu_half_linspace_rounds_once);
  return true;
}();

}  // namespace

void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  } else if (v.isList()) {
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      if (list.get(i).isTensor()) out.push_back(list.get(i).toTensor());
    }
  }
}

bool writes_argument(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

namespace {

void check_dtype_gap(const DtypeGap& gap, const Args& args) {
  if (!gap.kernel) return;
  const at::Tensor* self = tensor_at(args, 0);
  const bool passes = gap.empty_passes && self && self->numel() == 0;
  if (self && !passes && !gap.supported(self->scalar_type())) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", gap.kernel, "\" not implemented for '", self->scalar_type(), "'");
  }
}

}  // namespace

void check_arguments(const OpSpec& spec, const c10::FunctionSchema& schema, const Args& args) {
  check_write_overlap(spec.write_overlap, schema, args);
  if (!spec.dtype_gap.after_checks) check_dtype_gap(spec.dtype_gap, args);
  for (ArgCheck check : spec.checks) {
    if (check) check(schema, args);
  }
  if (spec.dtype_gap.after_checks) check_dtype_gap(spec.dtype_gap, args);
}

}  // namespace torch_tpu::device
