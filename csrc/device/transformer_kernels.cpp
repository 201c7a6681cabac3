// The Transformer inference fast path on tpu. nn.TransformerEncoderLayer,
// nn.TransformerEncoder and nn.MultiheadAttention list PrivateUse1 among
// their fast-path devices and call ops ATen implements for CPU and CUDA only.
// As on CUDA where a fused kernel is unavailable, they run ATen's own
// composite implementations (aten/src/ATen/native/transformers/): those
// call device ops only, so the whole path stays on the device, defers and
// fuses, and records into compiled graphs. What is missing is given here,
// composed from lowered ops:
// - _transform_bias_rescale_qkv and _masked_softmax, the two CPU/CUDA
//   kernels inside native_multi_head_attention;
// - _addmm_activation, the fused bias + activation of the feed-forward block;
// - TransformerEncoder with a key padding mask turns its input into a nested
//   tensor (_nested_tensor_from_mask), runs the layers on it and pads the
//   result with zeros (to_padded_tensor). A nested tpu tensor here is a
//   NestedTensorImpl over one flat device buffer (the kept rows in order);
//   a layer on it runs on the padded batch under the equivalent key padding
//   mask, so kept positions see only kept keys, as on CPU.
// The lengths of a nested tensor are host data: making one waits for the
// mask, as on CUDA.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "device/hand_written_kernels.h"

namespace torch_tpu::device {

namespace {

// q = (q + q_bias) / sqrt(dim_per_head), k = k + k_bias, v = v + v_bias, each
// (B, num_head, T, dim_per_head): CPU's transform_bias_rescale_qkv, which
// multiplies by the reciprocal rounded to the element type.
std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv(const at::Tensor& qkv_in,
                                                                          const at::Tensor& qkv_bias,
                                                                          int64_t num_head) {
  at::Tensor qkv = qkv_in.is_nested() ? qkv_in.to_padded_tensor(0) : qkv_in;
  const int64_t batch = qkv.size(0), seq = qkv.size(1), three_d = qkv.size(2);
  const int64_t embed = three_d / 3;
  TORCH_CHECK(embed % num_head == 0);
  TORCH_CHECK(three_d % 3 == 0);
  const int64_t dim_per_head = embed / num_head;
  at::Tensor heads =
      (qkv + qkv_bias).view({batch, seq, 3, num_head, dim_per_head}).permute({2, 0, 3, 1, 4}).contiguous();
  const double inv_sqrt = qkv.scalar_type() == at::kDouble
                              ? 1.0 / std::sqrt(static_cast<double>(dim_per_head))
                              : static_cast<float>(1.0 / std::sqrt(static_cast<float>(dim_per_head)));
  return {heads.select(0, 0) * inv_sqrt, heads.select(0, 1), heads.select(0, 2)};
}

// CPU's masked softmax (aten/src/ATen/native/SoftMax.cpp): `mask` true drops
// a position; mask_type 0 is an (L, L) attention mask and 1 a (B, L) padding
// mask over a (B, H, L, L) input, 2 (and any other shapes) a mask of the
// input's shape. A row dropped entirely is NaN, as on CPU.
at::Tensor masked_softmax(const at::Tensor& input, const at::Tensor& mask_in, std::optional<int64_t> dim,
                          std::optional<int64_t> mask_type_in) {
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  std::optional<int64_t> mask_type = mask_type_in;
  if (mask_in.dim() != 2 || input.dim() != 4) mask_type = 2;
  at::Tensor mask = mask_in;
  if (mask_type == 1) {
    TORCH_CHECK(input.size(0) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    mask = mask.view({input.size(0), 1, 1, input.size(2)}).expand(input.sizes());
  } else if (mask_type == 0) {
    TORCH_CHECK(input.size(2) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    mask = mask.view({1, 1, input.size(2), input.size(2)}).expand(input.sizes());
  } else {
    TORCH_CHECK(input.sizes() == mask.sizes(), "For mask_type == 2 mask shape should match input shape");
  }
  const int64_t wrapped = c10::maybe_wrap_dim(dim.value_or(input.dim() - 1), input.dim());
  return at::_softmax(input.masked_fill(mask, -std::numeric_limits<double>::infinity()), wrapped, false);
}

// CPU's addmm_activation_out_cpu: addmm, then gelu (exact) or relu in place.
at::Tensor addmm_activation(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                            const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu) {
  at::Tensor out = at::addmm(self, mat1, mat2, beta, alpha);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

at::Tensor& addmm_activation_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                                 const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu, at::Tensor& out) {
  at::addmm_out(out, self, mat1, mat2, beta, alpha);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

void check_padding_mask(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of ScalarType Bool, but got ", mask.scalar_type(),
              " instead.");
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1), "Mask size should match input size");
}

// `mask` keeps (true) a prefix of each row: no kept position after a dropped one.
bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  check_padding_mask(t, mask);
  const int64_t length = mask.size(1);
  if (length < 2) return true;
  at::Tensor gap = at::logical_and(mask.narrow(1, 1, length - 1), mask.narrow(1, 0, length - 1).logical_not());
  return !gap.any().item<bool>();
}

// The kept lengths of a (N, L) mask whose rows are left-aligned, on the host.
std::vector<int64_t> kept_lengths(const at::Tensor& mask) {
  at::Tensor lengths = mask.sum(1).to(at::kCPU, at::kLong).contiguous();
  return {lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel()};
}

// A nested tensor of the first lengths[i] rows of each padded[i] (N, L, D).
at::Tensor nested_from_rows(const at::Tensor& padded, const std::vector<int64_t>& lengths) {
  const int64_t width = padded.size(2);
  std::vector<at::Tensor> rows;
  for (size_t i = 0; i < lengths.size(); ++i) rows.push_back(padded.select(0, i).narrow(0, 0, lengths[i]).reshape(-1));
  at::Tensor sizes = at::empty({static_cast<int64_t>(lengths.size()), 2}, at::kLong);
  for (size_t i = 0; i < lengths.size(); ++i) {
    sizes[i][0] = lengths[i];
    sizes[i][1] = width;
  }
  return at::native::wrap_buffer(at::cat(rows), sizes);
}

at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  check_padding_mask(t, mask);
  if (mask_check) {
    TORCH_CHECK(nested_tensor_from_mask_left_aligned(t, mask), "Mask must be left-aligned without gaps");
  }
  return nested_from_rows(t, kept_lengths(mask));
}

// The row counts of a nested tensor of (rows, width) components, and its width.
std::vector<int64_t> nested_rows(const at::Tensor& nested, int64_t& width) {
  const at::Tensor& sizes = at::native::get_nested_tensor_impl(nested)->get_nested_sizes();
  TORCH_CHECK_NOT_IMPLEMENTED(sizes.dim() == 2 && sizes.size(1) == 2,
                              "tpu: nested tensors are implemented for components of 2 dimensions");
  std::vector<int64_t> rows;
  width = 0;
  for (int64_t i = 0; i < sizes.size(0); ++i) {
    rows.push_back(sizes[i][0].item<int64_t>());
    width = sizes[i][1].item<int64_t>();
  }
  return rows;
}

at::Tensor padded_of_nested(const at::Tensor& nested, double padding, at::OptionalIntArrayRef output_size) {
  int64_t width = 0;
  std::vector<int64_t> rows = nested_rows(nested, width);
  const int64_t longest = rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
  std::vector<int64_t> shape{static_cast<int64_t>(rows.size()), longest, width};
  if (output_size.has_value()) {
    TORCH_CHECK(output_size->size() == 3,
                "Length of output_size does not match NestedTensor dims. Broadcasting is not supported.");
    for (size_t d = 0; d < 3; ++d) {
      TORCH_CHECK((*output_size)[d] >= shape[d],
                  "Value in output_size is less than NestedTensor padded size. Truncation is not supported.");
    }
    shape.assign(output_size->begin(), output_size->end());
  }
  const at::Tensor& buffer = at::native::get_nested_tensor_impl(nested)->get_buffer();
  at::Tensor out = at::full(shape, padding, buffer.options());
  int64_t offset = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == 0) continue;
    out.select(0, i)
        .narrow(0, 0, rows[i])
        .narrow(1, 0, width)
        .copy_(buffer.narrow(0, offset, rows[i] * width).view({rows[i], width}));
    offset += rows[i] * width;
  }
  return out;
}

// A layer over a nested batch: the padded batch under its key padding mask,
// back to the kept rows.
at::Tensor nested_transformer_encoder_layer_forward(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask.has_value(), "NestedTensor with mask is not supported yet");
  int64_t width = 0;
  std::vector<int64_t> rows = nested_rows(src, width);
  at::Tensor padded = padded_of_nested(src, 0.0, std::nullopt);
  if (padded.numel() == 0) return src;
  at::Tensor lengths = at::tensor(rows, at::kLong).to(padded.device());
  at::Tensor positions = at::arange(padded.size(1), padded.options().dtype(at::kLong));
  at::Tensor padding_mask = positions.unsqueeze(0).ge(lengths.unsqueeze(1));
  at::Tensor out = at::native::transformer_encoder_layer_forward(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
      padding_mask, /*mask_type=*/1);
  return nested_from_rows(out, rows);
}

}  // namespace

torch::CppFunction addmm_activation_kernel() { return torch::CppFunction(TORCH_FN(addmm_activation)); }
torch::CppFunction addmm_activation_out_kernel() { return torch::CppFunction(TORCH_FN(addmm_activation_out)); }
torch::CppFunction masked_softmax_kernel() { return torch::CppFunction(TORCH_FN(masked_softmax)); }
torch::CppFunction native_multi_head_attention_kernel() {
  return torch::CppFunction(TORCH_FN(at::native::native_multi_head_attention_cpu));
}
torch::CppFunction nested_tensor_from_mask_kernel() { return torch::CppFunction(TORCH_FN(nested_tensor_from_mask)); }
torch::CppFunction nested_tensor_from_mask_left_aligned_kernel() {
  return torch::CppFunction(TORCH_FN(nested_tensor_from_mask_left_aligned));
}
torch::CppFunction transform_bias_rescale_qkv_kernel() {
  return torch::CppFunction(TORCH_FN(transform_bias_rescale_qkv));
}
torch::CppFunction transformer_encoder_layer_fwd_kernel() {
  return torch::CppFunction(TORCH_FN(at::native::transformer_encoder_layer_forward));
}

torch::CppFunction nested_transformer_encoder_layer_fwd_kernel() {
  return torch::CppFunction(TORCH_FN(nested_transformer_encoder_layer_forward));
}
torch::CppFunction nested_to_padded_tensor_kernel() { return torch::CppFunction(TORCH_FN(padded_of_nested)); }

}  // namespace torch_tpu::device
