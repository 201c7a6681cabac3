// The rows of the registration table (csrc/device/rows/rows.h) for losses,
// pooling, normalization, resampling, recurrent cells and distances; their
// lowerings are in csrc/lower/ (loss, pointwise_loss, pool, batch_norm,
// group_norm, resample, rnn, distance and unfold_backward). Above the rows,
// the checks, argument rewrites and meta kernels only these rows name.
#include "device/rows/rows.h"

#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/UpSample.h>
#include <string>

#include "device/argument_checks.h"
#include "device/meta_inference.h"
#include "device/missing_meta_kernels.h"
#include "lower/batch_norm.h"
#include "lower/distance.h"
#include "lower/group_norm.h"
#include "lower/loss.h"
#include "lower/lowering.h"
#include "lower/pointwise_loss.h"
#include "lower/pool.h"
#include "lower/resample.h"
#include "lower/rnn.h"
#include "lower/unfold_backward.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// nll_loss's kernels take class indices as Long (or Byte) only.
void check_long_or_byte_target_at(const Args& args, size_t i) {
  const at::Tensor* target = tensor_at(args, i);
  if (!target) return;
  TORCH_CHECK(target->scalar_type() == at::kLong || target->scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target->scalar_type());
}
void check_nll_target_type(const c10::FunctionSchema&, const Args& args) { check_long_or_byte_target_at(args, 1); }

// nll_loss2d's kernels then read the target as Long (forward and backward),
// and so does nll_loss's backward for any but Byte: CPU's accessor check.
void check_long_target_at(const Args& args, size_t i, bool byte_too) {
  const at::Tensor* target = tensor_at(args, i);
  if (!target || (byte_too && target->scalar_type() == at::kByte)) return;
  TORCH_CHECK(target->scalar_type() == at::kLong, "expected scalar type Long but found ", target->scalar_type());
}
void check_nll_loss2d_long_target(const c10::FunctionSchema&, const Args& args) {
  check_long_target_at(args, 1, /*byte_too=*/false);
}
void check_nll_loss2d_backward_target(const c10::FunctionSchema&, const Args& args) {
  check_long_or_byte_target_at(args, 2);
  check_long_target_at(args, 2, /*byte_too=*/false);
}
void check_nll_loss_backward_target(const c10::FunctionSchema&, const Args& args) {
  check_long_target_at(args, 2, /*byte_too=*/true);
}

// nll_loss's (1-d) kernels read Byte class indices as they read Long ones;
// PyTorch's Python meta kernels (its decomposition, through gather) refuse
// Byte. The target becomes Long before the meta kernel (and the op cache's
// signature) sees it.
void long_target_at(std::vector<c10::IValue>& args, size_t i) {
  if (i >= args.size() || !args[i].isTensor()) return;
  const at::Tensor& target = args[i].toTensor();
  if (target.defined() && target.scalar_type() == at::kByte) args[i] = target.to(at::kLong);
}
void normalize_nll_loss_target(std::vector<c10::IValue>& args) { long_target_at(args, 1); }
void normalize_nll_loss_backward_target(std::vector<c10::IValue>& args) { long_target_at(args, 2); }

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

// batch_norm's and group_norm's parameters (weight, bias, running stats):
// the input's dtype, or float beside a reduced-precision input (CPU's
// mixed-dtype rule, native/mixed_data_type.h).

void check_parameter_dtypes(const Args& args, size_t parameters, bool floating_inputs_only = true) {
  const at::Tensor* input = tensor_at(args, 0);
  if (!input || (floating_inputs_only && !at::isFloatingType(input->scalar_type()))) return;
  const bool reduced = input->scalar_type() == at::kHalf || input->scalar_type() == at::kBFloat16;
  for (size_t i = 1; i <= parameters && i < args.size(); ++i) {
    const at::Tensor* p = tensor_at(args, i);
    if (!p || p->scalar_type() == input->scalar_type()) continue;
    if (reduced && p->scalar_type() == at::kFloat) continue;
    TORCH_CHECK(false, "expected scalar type ", input->scalar_type(), " but found ", p->scalar_type());
  }
}

// weight, bias, running mean, running var.
void check_batch_norm_parameter_dtypes(const c10::FunctionSchema&, const Args& args) {
  check_parameter_dtypes(args, 4);
}
// weight, bias; of any input (group_norm's mixed-type check runs before its
// dtype dispatch: a complex or integer input beside float parameters raises
// RuntimeError, as on CPU, not the dispatch's NotImplementedError).
void check_group_norm_parameter_dtypes(const c10::FunctionSchema&, const Args& args) {
  check_parameter_dtypes(args, 2, /*floating_inputs_only=*/false);
}

// Adaptive pools (native/AdaptiveAveragePooling.cpp, AdaptiveMaxPooling2d.cpp
// and 3d): an input of a rank they do not take, with an empty non-batch
// dimension, or of a dtype their kernels do not take raises CPU's own error
// ("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [4, 4]",
// "\"adaptive_max_pool2d\" not implemented for 'Long'"), in CPU's order.
// PyTorch's meta kernels and the lowering raise the same types in other
// words. Where CPU's kernel takes the input, so does the op.
void check_adaptive_pool_input(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isIntList()) return;
  const int64_t spatial = static_cast<int64_t>(args[1].toIntVector().size());
  bool taken = (self->dim() == spatial + 1 || self->dim() == spatial + 2) && at::isFloatingType(self->scalar_type());
  for (int64_t d = 1; d < self->dim(); ++d) taken = taken && self->size(d) > 0;
  if (!taken) raise_cpus_error(schema, args);
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
bool floating_or_int64(at::ScalarType t) { return at::isFloatingType(t) || t == at::kLong; }

// upsample_nearest{1,2,3}d and their _exact twins: the kernel each names.
void check_upsample_nearest_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || at::isFloatingType(self->scalar_type()) || self->scalar_type() == at::kByte) return;
  const std::string& name = schema.name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"upsample_nearest", name.substr(name.size() - 2), "\" not implemented for '",
                              self->scalar_type(), "'");
}

// (grad_output, self, ...): the gradient has its input's shape (margin
// losses, fractional max pooling).
// (grad_output, self, ...): the gradient has its input's shape (margin
// losses, fractional max pooling); an out= variant resizes its grad_input.
void like_self_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
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

// In place of PyTorch's Python meta kernel (torch 2.13), which reads
// `.device` of the biases, None for nn.LSTM(bias=False).
// (hy, cy, workspace: the four activated gates).
void lstm_cell_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> t = checked_cell_arguments(op, stack, 4);
  for (int k = 0; k < 2; ++k) stack->emplace_back(at::empty_like(t[2], at::MemoryFormat::Contiguous));
  stack->emplace_back(at::empty_like(t[0], at::MemoryFormat::Contiguous));
}

// (hy, workspace: r, z, n, the hidden n gate, hx).
void gru_cell_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> t = checked_cell_arguments(op, stack, 3);
  stack->emplace_back(at::empty_like(t[2], at::MemoryFormat::Contiguous));
  stack->emplace_back(t[0].new_empty({t[2].size(0), t[2].size(1) * 5}));
}

void gru_cell_backward_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
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

// In place of PyTorch's, which raises TypeError for an empty batch.
// upsample_nearest{1,2,3}d and _upsample_nearest_exact{1,2,3}d: PyTorch's
// Python meta kernels (torch 2.13) raise TypeError for an empty batch (they
// hand torch._check an int); CPU's checks are the row's (argument_checks.h:
// check_upsample_sizes). The result: (N, C, *output_size) in the input's
// suggested memory format, as CPU's kernels make it.
void upsample_nearest_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
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

// Meta correction (OpSpec::correct_meta): batch norm (native_batch_norm,
// _native_batch_norm_legit) in evaluation saves no statistics: CPU and CUDA
// return empty save_mean/save_invstd where the Python meta kernel gives (C,).
void empty_statistics_in_evaluation(const std::vector<c10::IValue>& args, MetaResult& meta) {
  const bool training = !(args.size() > 5 && args[5].isBool() && !args[5].toBool());
  if (training || meta.returns.size() != 3) return;
  for (size_t r = 1; r < 3; ++r) meta.returns[r][0].sizes = {0}, meta.returns[r][0].strides = {1};
}

// Meta correction: batch norm's backward (native_batch_norm_backward,
// batch_norm_backward) returns an undefined result for each result its
// output_mask does not ask for, as CPU and CUDA do (a batch norm over an
// input that needs no gradient); PyTorch's meta kernel defines all three.
void undefined_where_not_asked(const std::vector<c10::IValue>& args, MetaResult& meta) {
  constexpr size_t kOutputMask = 9;
  if (args.size() <= kOutputMask || !args[kOutputMask].isBoolList()) return;
  const c10::List<bool> mask = args[kOutputMask].toBoolList();
  for (size_t r = 0; r < mask.size() && r < meta.returns.size(); ++r)
    if (!mask.get(r) && meta.returns[r].size() == 1)
      meta.returns[r][0] = TensorMeta{{}, {}, at::ScalarType::Undefined, false};
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    OpSpec(L::adaptive_avg_pool,
           "_adaptive_avg_pool2d _adaptive_avg_pool2d.out _adaptive_avg_pool3d _adaptive_avg_pool3d.out")
        .check(check_adaptive_pool_input),
    {L::adaptive_avg_pool2d_backward, "_adaptive_avg_pool2d_backward _adaptive_avg_pool2d_backward.out"},
    {L::adaptive_avg_pool3d_backward, "_adaptive_avg_pool3d_backward _adaptive_avg_pool3d_backward.out"},
    OpSpec(L::adaptive_max_pool,
           "adaptive_max_pool2d adaptive_max_pool2d.out adaptive_max_pool3d adaptive_max_pool3d.out")
        .check(check_adaptive_pool_input),
    {L::adaptive_max_pool2d_backward, "adaptive_max_pool2d_backward adaptive_max_pool2d_backward.grad_input"},
    {L::adaptive_max_pool3d_backward, "adaptive_max_pool3d_backward adaptive_max_pool3d_backward.grad_input"},
    // Structured kernels: their meta function's shape checks come first.
    OpSpec(L::avg_pool, "avg_pool2d avg_pool2d.out").gap_after_meta("avg_pool2d", floating_or_int64),
    OpSpec(L::avg_pool, "avg_pool3d avg_pool3d.out").gap_after_meta("avg_pool3d_out_frame", floating_or_int64),
    {L::avg_pool_backward,
     "avg_pool2d_backward avg_pool2d_backward.grad_input avg_pool3d_backward avg_pool3d_backward.grad_input"},
    {L::batch_norm_with_update, "_batch_norm_with_update"},
    OpSpec(L::binary_cross_entropy, "binary_cross_entropy binary_cross_entropy.out")
        .gap_after_checks("binary_cross_entropy", floating)
        .check(check_bce_dtypes),
    {L::binary_cross_entropy_backward, "binary_cross_entropy_backward binary_cross_entropy_backward.grad_input"},
    {L::cdist_backward, "_cdist_backward _cdist_backward.out"},
    {L::cdist_forward, "_cdist_forward _cdist_forward.out"},
    {L::fractional_max_pool,
     "fractional_max_pool2d fractional_max_pool2d.output fractional_max_pool3d fractional_max_pool3d.output"},
    OpSpec(L::fractional_max_pool_backward,
           "fractional_max_pool2d_backward fractional_max_pool2d_backward.grad_input fractional_max_pool3d_backward "
           "fractional_max_pool3d_backward.grad_input")
        .meta_from(like_self_meta),  // PyTorch has 2d's
    {L::grid_sampler, "grid_sampler_2d grid_sampler_2d.out grid_sampler_3d grid_sampler_3d.out"},
    {L::grid_sampler_backward,
     "grid_sampler_2d_backward grid_sampler_2d_backward.out grid_sampler_3d_backward grid_sampler_3d_backward.out"},
    OpSpec(L::huber_loss, "huber_loss huber_loss.out").check(check_loss_common_dtype),
    {L::huber_loss_backward, "huber_loss_backward huber_loss_backward.out"},
    OpSpec(L::linalg_cross, "linalg_cross linalg_cross.out").gap("cross", not_bool),
    {L::max_pool_with_indices,
     "max_pool2d_with_indices max_pool2d_with_indices.out max_pool3d_with_indices max_pool3d_with_indices.out"},
    {L::max_pool_with_indices_backward,
     "max_pool2d_with_indices_backward max_pool2d_with_indices_backward.grad_input max_pool3d_with_indices_backward "
     "max_pool3d_with_indices_backward.grad_input"},
    {L::max_unpool, "max_unpool2d max_unpool2d.out max_unpool3d max_unpool3d.out"},
    OpSpec(L::mse_loss, "mse_loss mse_loss.out").check(check_loss_common_dtype),
    {L::mse_loss_backward, "mse_loss_backward mse_loss_backward.grad_input"},
    {L::multi_margin_loss, "multi_margin_loss multi_margin_loss.out"},
    OpSpec(L::multi_margin_loss_backward, "multi_margin_loss_backward multi_margin_loss_backward.grad_input")
        .meta_from(like_self_meta),
    OpSpec(L::multilabel_margin_loss_backward,
           "multilabel_margin_loss_backward multilabel_margin_loss_backward.grad_input")
        .meta_from(like_self_meta),
    {L::multilabel_margin_loss_forward, "multilabel_margin_loss_forward multilabel_margin_loss_forward.output"},
    OpSpec(L::native_batch_norm, "native_batch_norm _native_batch_norm_legit")
        .gap_unless_empty("batch_norm", floating)
        .check(check_batch_norm_parameter_dtypes)
        .writes({3, 4})
        .correct(empty_statistics_in_evaluation),
    OpSpec(L::native_batch_norm_backward, "native_batch_norm_backward batch_norm_backward")
        .correct(undefined_where_not_asked),
    OpSpec(L::native_batch_norm_no_stats, "_native_batch_norm_legit.no_stats").gap_unless_empty("batch_norm", floating),
    OpSpec(L::native_batch_norm_no_training, "_native_batch_norm_legit_no_training")
        .gap_unless_empty("batch_norm", floating)
        .check(check_batch_norm_parameter_dtypes),
    // Replaces the composite math_group_norm PyTorch would run on PrivateUse1.
    OpSpec(L::native_group_norm, "native_group_norm")
        .check(check_group_norm_parameter_dtypes)
        .gap_after_checks("GroupNormKernelImpl", floating),
    {L::native_group_norm_backward, "native_group_norm_backward"},
    OpSpec(L::nll_loss_backward, "nll_loss_backward nll_loss_backward.grad_input")
        .check(check_nll_loss_backward_target)
        .normalize(normalize_nll_loss_backward_target),
    OpSpec(L::nll_loss_backward, "nll_loss2d_backward nll_loss2d_backward.grad_input")
        .check(check_nll_loss2d_backward_target),
    OpSpec(L::nll_loss_forward, "nll_loss_forward nll_loss_forward.output")
        .gap("nll_loss_out_frame", floating)
        .check(check_nll_loss_shapes)
        .check(check_nll_target_type)
        .normalize(normalize_nll_loss_target),
    OpSpec(L::nll_loss_forward, "nll_loss2d_forward nll_loss2d_forward.output")
        .gap("nll_loss2d_forward_out_frame", floating)
        .check(check_nll_target_type)
        .check(check_nll_loss2d_long_target),
    {L::norm,
     "norm.Scalar norm.Scalar_out norm.ScalarOpt_dim norm.out norm.ScalarOpt_dim_dtype norm.dtype_out "
     "norm.ScalarOpt_dtype norm.ScalarOpt_dtype_out"},
    {L::pdist_backward, "_pdist_backward _pdist_backward.out"},
    {L::pdist_forward, "_pdist_forward _pdist_forward.out"},
    OpSpec(L::smooth_l1_loss, "smooth_l1_loss smooth_l1_loss.out").check(check_loss_common_dtype),
    {L::smooth_l1_loss_backward, "smooth_l1_loss_backward smooth_l1_loss_backward.grad_input"},
    OpSpec(L::thnn_fused_gru_cell, "_thnn_fused_gru_cell").meta_from(gru_cell_meta),
    OpSpec(L::thnn_fused_gru_cell_backward, "_thnn_fused_gru_cell_backward").meta_from(gru_cell_backward_meta),
    OpSpec(L::thnn_fused_lstm_cell, "_thnn_fused_lstm_cell").meta_instead(lstm_cell_meta),
    {L::thnn_fused_lstm_cell_backward_impl, "_thnn_fused_lstm_cell_backward_impl"},
    {L::unfold_backward, "unfold_backward unfold_backward.out"},
    OpSpec(L::upsample_bicubic, "upsample_bicubic2d upsample_bicubic2d.out").check(check_upsample_sizes),
    OpSpec(L::upsample_bicubic_aa, "_upsample_bicubic2d_aa _upsample_bicubic2d_aa.out").check(check_upsample_sizes),
    {L::upsample_bicubic_aa_backward, "_upsample_bicubic2d_aa_backward _upsample_bicubic2d_aa_backward.grad_input"},
    {L::upsample_bicubic_backward, "upsample_bicubic2d_backward upsample_bicubic2d_backward.grad_input"},
    OpSpec(L::upsample_bilinear_aa, "_upsample_bilinear2d_aa _upsample_bilinear2d_aa.out").check(check_upsample_sizes),
    {L::upsample_bilinear_aa_backward, "_upsample_bilinear2d_aa_backward _upsample_bilinear2d_aa_backward.grad_input"},
    OpSpec(L::upsample_linear,
           "upsample_linear1d upsample_linear1d.out upsample_bilinear2d upsample_bilinear2d.out upsample_trilinear3d "
           "upsample_trilinear3d.out")
        .check(check_upsample_sizes),
    {L::upsample_linear_backward,
     "upsample_linear1d_backward upsample_linear1d_backward.grad_input upsample_bilinear2d_backward "
     "upsample_bilinear2d_backward.grad_input upsample_trilinear3d_backward upsample_trilinear3d_backward.grad_input"},
    OpSpec(L::upsample_nearest,
           "upsample_nearest1d upsample_nearest1d.out upsample_nearest2d upsample_nearest2d.out upsample_nearest3d "
           "upsample_nearest3d.out")
        .check(check_upsample_sizes)
        .check(check_upsample_nearest_dtype)
        .meta_instead(upsample_nearest_meta),
    {L::upsample_nearest_backward,
     "upsample_nearest1d_backward upsample_nearest1d_backward.grad_input upsample_nearest2d_backward "
     "upsample_nearest2d_backward.grad_input upsample_nearest3d_backward upsample_nearest3d_backward.grad_input"},
    OpSpec(L::upsample_nearest_exact,
           "_upsample_nearest_exact1d _upsample_nearest_exact1d.out _upsample_nearest_exact2d "
           "_upsample_nearest_exact2d.out _upsample_nearest_exact3d _upsample_nearest_exact3d.out")
        .check(check_upsample_sizes)
        .check(check_upsample_nearest_dtype)
        .meta_instead(upsample_nearest_meta),
    {L::upsample_nearest_exact_backward,
     "_upsample_nearest_exact1d_backward _upsample_nearest_exact1d_backward.grad_input "
     "_upsample_nearest_exact2d_backward _upsample_nearest_exact2d_backward.grad_input "
     "_upsample_nearest_exact3d_backward _upsample_nearest_exact3d_backward.grad_input"},
};

}  // namespace

std::span<const OpSpec> nn_rows() { return kRows; }

}  // namespace torch_tpu::device
