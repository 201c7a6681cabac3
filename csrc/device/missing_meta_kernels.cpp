#include "device/missing_meta_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorUtils.h>

#include <cmath>

namespace torch_tpu::device {

namespace {

// (grad_output, self, ...): the gradient has its input's shape (margin
// losses, fractional max pooling); an out= variant resizes its grad_input.
void like_self(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema_args = op.schema().arguments();
  std::vector<c10::IValue> args(stack->end() - schema_args.size(), stack->end());
  torch::jit::drop(*stack, schema_args.size());
  const at::Tensor& self = args[1].toTensor();
  for (size_t i = 0; i < schema_args.size(); ++i) {
    if (!schema_args[i].is_out()) continue;
    at::Tensor grad_input = args[i].toTensor();
    grad_input.resize_(self.sizes());
    stack->emplace_back(grad_input);
    return;
  }
  stack->emplace_back(at::empty_like(self, self.options(), at::MemoryFormat::Contiguous));
}

// Fused optimizer steps: in place on their arguments, returning nothing, so
// there are no result shapes to infer.
void updates_in_place(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
}

// The fused attention's backward (csrc/lower/attention.cpp): gradients like
// q, k, v, and attn_bias's only when there is one (torch 2.13's own meta
// kernel; torch 2.11 has none).
void fused_attention_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  for (size_t i = 1; i <= 3; ++i) stack->emplace_back(at::empty_like(args[i].toTensor()));
  const bool has_bias = args[4].isTensor() && args[4].toTensor().defined();
  stack->emplace_back(has_bias ? at::empty_like(args[4].toTensor()) : at::Tensor());
}

// The fused recurrent cells (csrc/lower/rnn.cpp), (input_gates,
// hidden_gates, prev_state, input_bias?, hidden_bias?) with `factor` gates,
// checked as CUDA's kernels check them (aten/src/ATen/native/cuda/RNN.cu's
// checkSizes); returns the five tensors, absent biases undefined.
std::vector<at::Tensor> checked_cell_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                               int64_t factor) {
  const size_t n = op.schema().arguments().size();
  std::vector<at::Tensor> t;
  for (auto it = stack->end() - n; it != stack->end(); ++it)
    t.push_back(it->isTensor() ? it->toTensor() : at::Tensor());
  torch::jit::drop(*stack, n);
  const at::TensorArg input_gates(t[0], "input_gates", 1), hidden_gates(t[1], "hidden_gates", 2),
      prev(t[2], "prev_hidden", 3), input_bias(t[3], "input_bias", 4), hidden_bias(t[4], "hidden_bias", 5);
  const at::CheckedFrom c = op.schema().name().c_str();
  at::checkDim(c, input_gates, 2);
  at::checkSameSize(c, input_gates, hidden_gates);
  const int64_t gates_size = input_gates->size(1);
  if (input_bias->defined()) {
    at::checkDim(c, input_bias, 1);
    at::checkNumel(c, input_bias, gates_size);
    at::checkSameSize(c, input_bias, hidden_bias);
  }
  at::checkDim(c, prev, 2);
  at::checkNumel(c, prev, input_gates->size(0) * gates_size / factor);
  at::checkAllSameType(c, {input_gates, hidden_gates, prev});
  return t;
}

// (hy, cy, workspace: the four activated gates).
void lstm_cell(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> t = checked_cell_arguments(op, stack, 4);
  for (int k = 0; k < 2; ++k) stack->emplace_back(at::empty_like(t[2], at::MemoryFormat::Contiguous));
  stack->emplace_back(at::empty_like(t[0], at::MemoryFormat::Contiguous));
}

// (hy, workspace: r, z, n, the hidden n gate, hx).
void gru_cell(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> t = checked_cell_arguments(op, stack, 3);
  stack->emplace_back(at::empty_like(t[2], at::MemoryFormat::Contiguous));
  stack->emplace_back(t[0].new_empty({t[2].size(0), t[2].size(1) * 5}));
}

void gru_cell_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  const at::Tensor grad_hy_tensor = args[0].toTensor(), workspace_tensor = args[1].toTensor();
  const at::TensorArg grad_hy(grad_hy_tensor, "grad_hy", 1), workspace(workspace_tensor, "workspace", 2);
  const at::CheckedFrom c = "_thnn_fused_gru_cell_backward";
  at::checkDim(c, grad_hy, 2);
  at::checkNumel(c, workspace, grad_hy->numel() * 5);
  const bool has_bias = args[2].toBool();
  const int64_t batch = grad_hy->size(0), gates = grad_hy->size(1) * 3;
  for (int k = 0; k < 2; ++k) stack->emplace_back(grad_hy->new_empty({batch, gates}));
  stack->emplace_back(at::empty_like(*grad_hy, at::MemoryFormat::Contiguous));
  for (int k = 0; k < 2; ++k) stack->emplace_back(has_bias ? grad_hy->new_empty({gates}) : at::Tensor());
}

// _grouped_mm (csrc/lower/matmul.cpp): the argument checks and result
// shapes of CUDA's kernel (ATen/native/GroupedMMUtils.h), for every dtype it
// takes on CPU (float32, bfloat16, float16); PyTorch's Meta kernel admits
// only CUDA's bfloat16. The device has no stride alignment rules.
void grouped_mm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
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
  if (!a_2d || !b_2d) TORCH_CHECK(a.size(-1) == b.size(-2), "contraction dimension of mat_a and mat_b must match");
  TORCH_CHECK(offs.defined() == (a_2d || b_2d),
              "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  if (offs.defined()) {
    TORCH_CHECK(offs.dim() == 1, "offs has to be 1D");
    TORCH_CHECK(offs.scalar_type() == at::kInt, "Offsets have to be int32");
  }
  TORCH_CHECK(!args[3].isTensor(), "Bias not supported yet");
  const at::ScalarType out_dtype = args[4].isNone() ? a.scalar_type() : args[4].toScalarType();
  TORCH_CHECK(out_dtype == a.scalar_type(), "Grouped gemm output dtype must match `mat_a` dtype");
  std::vector<int64_t> size;
  if (a_2d && b_2d) {
    size = {offs.size(0), a.size(0), b.size(1)};
  } else if (a_2d) {
    TORCH_CHECK(offs.size(0) == b.size(0), "matrix batch sizes have to match");
    size = {a.size(0), b.size(-1)};
  } else if (b_2d) {
    TORCH_CHECK(offs.size(0) == a.size(0), "matrix batch sizes have to match");
    size = {a.size(1), b.size(1)};
  } else {
    TORCH_CHECK(a.size(0) == b.size(0), "batched dimension has to match");
    size = {a.size(0), a.size(1), b.size(-1)};
  }
  stack->emplace_back(at::empty(size, a.options().dtype(out_dtype)));
}

// histogram (.bin_ct, .bins_tensor) and histogramdd's _histogramdd_bin_edges,
// _histogramdd_from_bin_cts and _histogramdd_from_bin_tensors: CPU's argument
// checks, in its order and words (aten/src/ATen/native/Histogram.cpp), and
// its result shapes. The schema tells them apart: histogram returns (hist,
// bin_edges) and reads every element as a point; the bins are a count (with
// `range`) or edge tensors.
void histogram(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
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

// upsample_nearest{1,2,3}d and _upsample_nearest_exact{1,2,3}d: PyTorch's
// Python meta kernels (torch 2.13) raise TypeError for an empty batch (they
// hand torch._check an int); CPU's checks are the row's (argument_checks.h:
// check_upsample_sizes). The result: (N, C, *output_size) in the input's
// suggested memory format, as CPU's kernels make it.
void upsample_nearest(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema_args = op.schema().arguments();
  std::vector<c10::IValue> args(stack->end() - schema_args.size(), stack->end());
  torch::jit::drop(*stack, schema_args.size());
  const at::Tensor& self = args[0].toTensor();
  std::vector<int64_t> sizes{self.size(0), self.size(1)};
  for (const c10::SymInt& s : args[1].toSymIntVector()) sizes.push_back(s.guard_int(__FILE__, __LINE__));
  const at::MemoryFormat format = self.suggest_memory_format();
  for (size_t i = 0; i < schema_args.size(); ++i) {
    if (!schema_args[i].is_out()) continue;
    at::Tensor out = args[i].toTensor();
    out.resize_(sizes, format);
    stack->emplace_back(out);
    return;
  }
  stack->emplace_back(at::empty(sizes, self.options().memory_format(format)));
}

}  // namespace

torch::CppFunction missing_meta_kernel(MetaSource source) {
  switch (source) {
    case MetaSource::LikeSelf:
      return torch::CppFunction::makeFromBoxedFunction<like_self>();
    case MetaSource::UpdatesInPlace:
      return torch::CppFunction::makeFromBoxedFunction<updates_in_place>();
    case MetaSource::FusedAttentionBackward:
      return torch::CppFunction::makeFromBoxedFunction<fused_attention_backward>();
    case MetaSource::GruCell:
      return torch::CppFunction::makeFromBoxedFunction<gru_cell>();
    case MetaSource::GruCellBackward:
      return torch::CppFunction::makeFromBoxedFunction<gru_cell_backward>();
    case MetaSource::LstmCell:
      return torch::CppFunction::makeFromBoxedFunction<lstm_cell>();
    case MetaSource::GroupedMm:
      return torch::CppFunction::makeFromBoxedFunction<grouped_mm>();
    case MetaSource::Histogram:
      return torch::CppFunction::makeFromBoxedFunction<histogram>();
    case MetaSource::UpsampleNearest:
      return torch::CppFunction::makeFromBoxedFunction<upsample_nearest>();
    case MetaSource::PyTorch:
      break;
  }
  TORCH_CHECK(false, "internal: PyTorch's own Meta kernels are not registered by the device");
}

BoxedMetaKernel replacement_meta_kernel(MetaSource source) {
  switch (source) {
    case MetaSource::LstmCell:
      return lstm_cell;
    case MetaSource::GroupedMm:
      return grouped_mm;
    case MetaSource::UpsampleNearest:
      return upsample_nearest;
    case MetaSource::Histogram:
      return histogram;
    default:
      return nullptr;
  }
}

}  // namespace torch_tpu::device
