// The rows of the registration table (csrc/device/rows/rows.h) for reductions,
// statistics, norms, scans and sorts; their lowerings are in csrc/lower/
// (reduce, statistics, norm, scan and sort). Above the rows, the checks,
// argument rewrites and meta kernels only these rows name.
#include "device/rows/rows.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <cmath>
#include <optional>
#include <string>

#include "device/argument_checks.h"
#include "device/missing_meta_kernels.h"
#include "lower/lowering.h"
#include "lower/norm.h"
#include "lower/reduce.h"
#include "lower/scan.h"
#include "lower/sort.h"
#include "lower/statistics.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// The reduced dims when self is empty (none given: every dim), or nullopt
// when self is not empty.
std::optional<std::vector<int64_t>> dims_of_empty_reduction(const Args& args) {
  if (args.size() < 2 || !args[0].isTensor() || args[0].toTensor().numel() != 0) return std::nullopt;
  std::vector<int64_t> dims;
  if (args[1].isInt()) dims = {args[1].toInt()};
  if (args[1].isIntList()) dims = args[1].toIntVector();
  return dims;
}

void check_reduced_dims_not_empty(const std::string& op, const char* separator, const at::Tensor& self,
                                  const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    const int64_t w = at::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK_INDEX(self.size(w) != 0, op, separator, "Expected reduction dim ", w, " to have non-zero size.");
  }
}

// Extremes of an empty tensor, with CPU's and CUDA's exception types and
// words (native/ReduceOps.cpp, TensorCompare.cpp): over a named empty dim,
// IndexError; over every dim, IndexError for argmax/argmin, RuntimeError for
// amax/amin/aminmax. The Python meta kernels raise RuntimeError for argmax
// and argmin, name argmin "argmax", and word amax/amin/aminmax otherwise.
// Each op's row names its check; the schema gives only the op's name to print.

void check_extreme_of_empty(const c10::FunctionSchema& schema, const Args& args) {
  const auto dims = dims_of_empty_reduction(args);
  if (!dims) return;
  const std::string op = schema.name().substr(6);
  TORCH_CHECK(!dims->empty(), op,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
              "dim with the 'dim' argument.");
  check_reduced_dims_not_empty(op, "(): ", args[0].toTensor(), *dims);
}

void check_arg_extreme_of_empty(const c10::FunctionSchema& schema, const Args& args) {
  const auto dims = dims_of_empty_reduction(args);
  if (!dims) return;
  const std::string op = schema.name().substr(6);
  TORCH_CHECK_INDEX(!dims->empty(), op, "(): Expected reduction dim to be specified for input.numel() == 0.");
  check_reduced_dims_not_empty(op, "(): ", args[0].toTensor(), *dims);
}

void check_aminmax_of_empty(const c10::FunctionSchema&, const Args& args) {
  const auto dims = dims_of_empty_reduction(args);
  if (!dims) return;
  TORCH_CHECK(!dims->empty(),
              "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
              "identity.");
  check_reduced_dims_not_empty("aminmax", ": ", args[0].toTensor(), *dims);
}

// at::native::_softmax and sort wrap `dim` (c10::maybe_wrap_dim: IndexError).
void check_dim_of_self(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self) return;
  for (size_t i = 0; i < schema.arguments().size() && i < args.size(); ++i) {
    if (schema.arguments()[i].name() == "dim" && args[i].isInt()) c10::maybe_wrap_dim(args[i].toInt(), self->dim());
  }
}

// sort and topk (native/Sorting.cpp): no order on complex numbers, no topk
// of bools (the installed torch's exceptions: TypeError and
// NotImplementedError from 2.15). Each op's row names its own.
void check_sortable(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  with_cpus_error(schema, args,
                  [&] { TORCH_CHECK(!self || !self->is_complex(), "Sort does not support complex dtypes on tpu"); });
}

void check_topk_sortable(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  with_cpus_error(schema, args, [&] {
    TORCH_CHECK(!self || !self->is_complex(), "topk does not support complex dtypes on tpu");
    TORCH_CHECK(!self || self->scalar_type() != at::kBool, "topk does not support bool dtypes on tpu");
  });
}

// kthvalue (native/Sorting.cpp): the reduced dim must hold a value before k
// is checked against it.
void check_kthvalue_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 3 || !args[2].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[2].toInt(), self->dim());
  TORCH_CHECK_INDEX(self->size(dim) > 0, "kthvalue(): Expected reduction dim ", dim, " to have non-zero size.");
}

void check_max_min_not_complex(const c10::FunctionSchema& schema, const Args& args) {
  if (complex_operand(args) < 0) return;
  raise_cpus_error(schema, args);
  TORCH_CHECK(false, schema.name().substr(6), "(): does not support complex input");
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
bool real_not_bool(at::ScalarType t) { return t != at::kBool && !at::isComplexType(t); }

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

// In place of torch 2.15's Python meta kernels for histogramdd, which check
// only the number of bins, where CPU checks ranges, edges and weights first.
// histogram (.bin_ct, .bins_tensor) and histogramdd's _histogramdd_bin_edges,
// _histogramdd_from_bin_cts and _histogramdd_from_bin_tensors: CPU's argument
// checks, in its order and words (aten/src/ATen/native/Histogram.cpp), and
// its result shapes. The schema tells them apart: histogram returns (hist,
// bin_edges) and reads every element as a point; the bins are a count (with
// `range`) or edge tensors.
void histogram_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  const bool one_dimensional = schema.returns().size() == 2;
  const bool returns_edges = schema.returns()[0].type()->kind() == c10::TypeKind::ListType;
  const bool bin_counts = args[1].isInt() || args[1].isIntList();
  const at::Tensor self = args[0].toTensor();
  const size_t weight_index = bin_counts ? 3 : 2;
  std::optional<at::Tensor> weight;
  if (args[weight_index].isTensor()) weight = args[weight_index].toTensor();
  std::optional<std::vector<double>> range;
  if (bin_counts && !args[2].isNone()) range = args[2].toDoubleVector();

  if (!one_dimensional)
    TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  // histogram reads every element as a 1-d point.
  const at::Tensor points = one_dimensional ? self.reshape({self.numel(), 1}) : self;
  if (one_dimensional && weight) weight = weight->reshape({weight->numel()});
  const int64_t dims = points.size(-1);

  auto check_bin_count = [](int64_t count, size_t dim) {
    TORCH_CHECK(count > 0, "torch.histogram(): bins must be > 0, but got ", count, " for dimension ", dim);
  };
  // select_outer_bin_edges: the range is read on the host where it is given;
  // the data's own range is checked by the program (csrc/lower/statistics.cpp).
  auto check_range = [&]() {
    if (range) {
      TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * dims, "torch.histogramdd: for a ", dims,
                  "-dimensional histogram", " range should have ", 2 * dims, " elements, but got ", range->size());
      for (int64_t dim = 0; dim < dims; ++dim) {
        const double left = (*range)[2 * dim], right = (*range)[2 * dim + 1];
        TORCH_CHECK(std::isfinite(left) && std::isfinite(right), "torch.histogramdd: dimension ", dim, "'s range [",
                    left, ", ", right, "] is not finite");
        TORCH_CHECK(left <= right, "torch.histogramdd: min should not exceed max, but got", " min ", left, " max ",
                    right, " for dimension ", dim);
      }
    } else if (points.numel() > 0) {
      AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "histogramdd", [] {});
    }
  };
  auto check_inputs = [&](const std::vector<at::Tensor>& bins) {
    TORCH_CHECK(points.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
                points.dim());
    TORCH_CHECK(static_cast<int64_t>(bins.size()) == dims, "torch.histogramdd: expected ", dims,
                " sequences of bin edges for a ", dims, "-dimensional histogram but got ", bins.size());
    for (int64_t dim = 0; dim < dims; ++dim) {
      const at::Tensor& edges = bins[dim];
      TORCH_CHECK(points.dtype() == edges.dtype(), "torch.histogramdd: input tensor and bins tensors should",
                  " have the same dtype, but got input with dtype ", points.dtype(), " and bins for dimension ", dim,
                  " with dtype ", edges.dtype());
      TORCH_CHECK(edges.dim() == 1, "torch.histogramdd: bins tensor should have one dimension,", " but got ",
                  edges.dim(), " dimensions in the bins tensor for dimension ", dim);
      TORCH_CHECK(edges.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element,", " but got ",
                  edges.numel(), " elements in the bins tensor for dimension ", dim);
    }
    if (weight) {
      TORCH_CHECK(points.dtype() == weight->dtype(), "torch.histogramdd: if weight tensor is provided,",
                  " input tensor and weight tensor should have the same dtype, but got input(", points.dtype(), ")",
                  ", and weight(", weight->dtype(), ")");
      std::vector<int64_t> point_sizes = points.sizes().vec();
      point_sizes.pop_back();
      std::vector<int64_t> weight_sizes = weight->sizes().vec();
      if (weight_sizes.empty()) weight_sizes = {1};
      TORCH_CHECK(point_sizes == weight_sizes, "torch.histogramdd: if weight tensor is provided it should have",
                  " the same shape as the input tensor excluding its innermost dimension, but got input with shape ",
                  points.sizes(), " and weight with shape ", weight->sizes());
    }
  };
  auto check_kernel_dtype = [&]() {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, points.scalar_type(), "histogram_cpu", [] {});
  };
  auto equal_width_edges = [&](const std::vector<int64_t>& counts) {
    std::vector<at::Tensor> edges;
    for (int64_t dim = 0; dim < dims; ++dim) {
      const int64_t count = dim < static_cast<int64_t>(counts.size()) ? counts[dim] : 0;
      TORCH_CHECK(count + 1 >= 0, "number of steps must be non-negative");  // linspace's check
      edges.push_back(at::empty({count + 1}, points.options()));
    }
    return edges;
  };

  std::vector<at::Tensor> edges;
  std::vector<int64_t> counts;
  if (one_dimensional && bin_counts) {
    counts = {args[1].toInt()};
    check_bin_count(counts[0], 0);
    check_range();
    edges = equal_width_edges(counts);
    check_inputs(edges);
  } else if (bin_counts) {
    counts = args[1].toIntVector();
    TORCH_CHECK(static_cast<int64_t>(counts.size()) == dims,
                "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
    check_range();
    edges = equal_width_edges(counts);
    if (returns_edges) {
      stack->emplace_back(edges);
      return;
    }
    check_inputs(edges);
    for (int64_t dim = 0; dim < dims; ++dim) check_bin_count(counts[dim], dim);
  } else {
    edges = one_dimensional ? std::vector<at::Tensor>{args[1].toTensor()} : args[1].toTensorVector();
    check_inputs(edges);
    for (int64_t dim = 0; dim < dims; ++dim) {
      counts.push_back(edges[dim].numel() - 1);
      check_bin_count(counts.back(), dim);
    }
  }
  check_kernel_dtype();
  stack->emplace_back(at::empty(counts, points.options()));
  if (one_dimensional) stack->emplace_back(at::empty({counts[0] + 1}, edges[0].options()));
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    {L::all, "all all.dim all.dims all.out all.all_out all.dims_out"},
    OpSpec(L::amax, "amax amax.out").check(check_extreme_of_empty).check(check_not_complex),
    OpSpec(L::amin, "amin amin.out").check(check_extreme_of_empty).check(check_not_complex),
    OpSpec(L::aminmax, "aminmax aminmax.out").check(check_aminmax_of_empty),
    {L::any, "any any.dim any.dims any.out any.all_out any.dims_out"},
    OpSpec(L::argmax, "argmax argmax.out").check(check_arg_extreme_dtype).check(check_arg_extreme_of_empty),
    OpSpec(L::argmin, "argmin argmin.out").check(check_arg_extreme_dtype).check(check_arg_extreme_of_empty),
    OpSpec(L::assert_async, "_assert_async _assert_async.msg").check(check_single_value),
    {L::bucketize, "bucketize.Tensor bucketize.Tensor_out bucketize.Scalar bucketize.Scalar_out"},
    {L::count_nonzero, "count_nonzero.dim_IntList count_nonzero.dim_IntList_out"},
    {L::cummax, "cummax cummax.out"},
    {L::cummin, "cummin cummin.out"},
    OpSpec(L::cumprod, "cumprod cumprod_ cumprod.out").check(check_scan_dtype),
    OpSpec(L::cumsum, "cumsum cumsum_ cumsum.out").check(check_scan_dtype),
    {L::hash_tensor, "hash_tensor hash_tensor.out"},
    {L::histc, "histc histc.out"},
    OpSpec(L::histogram_bin_ct, "histogram.bin_ct").meta_instead(histogram_meta),
    OpSpec(L::histogram_bins_tensor, "histogram.bins_tensor").meta_instead(histogram_meta),
    OpSpec(L::histogramdd_bin_edges, "_histogramdd_bin_edges").meta_instead(histogram_meta),
    OpSpec(L::histogramdd_from_bin_cts, "_histogramdd_from_bin_cts").meta_instead(histogram_meta),
    OpSpec(L::histogramdd_from_bin_tensors, "_histogramdd_from_bin_tensors").meta_instead(histogram_meta),
    {L::isin,
     "isin.Tensor_Tensor isin.Tensor_Tensor_out isin.Tensor_Scalar isin.Tensor_Scalar_out isin.Scalar_Tensor "
     "isin.Scalar_Tensor_out"},
    OpSpec(L::kthvalue, "kthvalue kthvalue.values")
        .gap_unless_empty("kthvalue_cpu", real_not_bool)
        .check(check_kthvalue_dim),
    {L::linalg_vector_norm, "linalg_vector_norm linalg_vector_norm.out"},
    OpSpec(L::log_softmax, "_log_softmax _log_softmax.out").gap_unless_empty("log_softmax", floating),
    {L::log_softmax_backward, "_log_softmax_backward_data _log_softmax_backward_data.out"},
    OpSpec(L::logcumsumexp, "logcumsumexp logcumsumexp.out").gap("logcumsumexp", floating_or_complex),
    {L::logsumexp, "logsumexp logsumexp.out"},
    {L::max_all, "max max.unary_out"},
    OpSpec(L::max_dim, "max.dim max.dim_max").check(check_max_min_not_complex),
    {L::mean, "mean mean.dim mean.out"},
    {L::median_all, "median"},
    {L::median_dim, "median.dim median.dim_values"},
    {L::min_all, "min min.unary_out"},
    OpSpec(L::min_dim, "min.dim min.dim_min").check(check_max_min_not_complex),
    {L::mode, "mode mode.values"},
    {L::nanmedian_all, "nanmedian"},
    {L::nanmedian_dim, "nanmedian.dim nanmedian.dim_values"},
    {L::nansum, "nansum nansum.out"},
    OpSpec(L::native_layer_norm, "native_layer_norm")
        .gap_after_checks("LayerNormKernelImpl", floating)
        .check(check_layer_norm_parameters),
    {L::native_layer_norm_backward, "native_layer_norm_backward"},
    {L::weight_norm_interface, "_weight_norm_interface"},
    {L::weight_norm_interface_backward, "_weight_norm_interface_backward"},
    {L::prod, "prod prod.dim_int prod.int_out"},
    {L::renorm, "renorm renorm_ renorm.out"},
    OpSpec(L::searchsorted, "searchsorted.Tensor searchsorted.Tensor_out searchsorted.Scalar searchsorted.Scalar_out")
        .check(check_not_complex),
    OpSpec(L::softmax, "_softmax _softmax.out").gap_unless_empty("softmax", floating).check(check_dim_of_self),
    {L::softmax_backward, "_softmax_backward_data _softmax_backward_data.out"},
    OpSpec(L::sort, "sort sort.values sort.stable sort.values_stable").check(check_dim_of_self).check(check_sortable),
    OpSpec(L::std, "std.correction std.correction_out").check(check_std_var_dtype),
    OpSpec(L::std_mean, "std_mean.correction std_mean.correction_out").check(check_std_var_dtype),
    {L::sum, "sum sum.dim_IntList sum.IntList_out"},
    OpSpec(L::topk, "topk topk.values").check(check_topk_sortable).check(check_topk_k),
    {L::trace, "trace trace.out"},
    OpSpec(L::var, "var.correction var.correction_out").check(check_std_var_dtype),
    OpSpec(L::var_mean, "var_mean.correction var_mean.correction_out").check(check_std_var_dtype),
};

}  // namespace

std::span<const OpSpec> reduction_rows() { return kRows; }

}  // namespace torch_tpu::device
