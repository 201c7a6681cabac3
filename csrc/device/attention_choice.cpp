// Which kernel F.scaled_dot_product_attention runs on tpu. PyTorch asks the
// device (aten::_fused_sdp_choice) and then calls that backend's op; for a
// backend with its own kernel that is "overrideable", the op
// _scaled_dot_product_fused_attention_overrideable (and its backward), which
// csrc/lower/attention.cpp lowers. Calls it does not cover go to the math
// path (matmuls and _safe_softmax), as CUDA sends calls its fused kernels do
// not cover. sdpa_kernel(...) contexts are honoured: a disabled backend is
// never chosen, and with neither enabled the choice is an error, which SDPA
// raises as "No viable backend". The same choice serves fake tensors
// (Dynamo and AOTAutograd trace with them): their Meta kernel asks the
// PrivateUse1 entry of _fused_sdp_choice_stub, so torch.compile graphs call
// the same op eager does. Fake tensors may have symbolic sizes (Dynamo makes
// a dimension dynamic when it sees it change), so sizes are read as SymInts:
// comparing two guards on the result, as PyTorch's own choice functions do.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include "device/hand_written_kernels.h"

namespace torch_tpu::device {

namespace {

// What the fused lowering covers: no dropout (the math path draws the
// dropout mask), 4-d q/k/v (PyTorch's meta kernel for the op lays out 4-d
// results only) with the same (batch, head) dims and no empty dims
// (grouped-query attention broadcasts heads in the math path), float dtypes,
// and an optional bool or float mask that broadcasts to the scores and is
// not combined with is_causal (the math path raises PyTorch's own errors for
// the others).
bool fused_kernel_covers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal) {
  if (dropout_p != 0.0) return false;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  const int64_t rank = q.dim();
  if (rank != 4 || k.dim() != rank || v.dim() != rank) return false;
  for (int64_t i = 0; i + 2 < rank; ++i) {
    if (k.sym_size(i) != q.sym_size(i) || v.sym_size(i) != q.sym_size(i)) return false;
  }
  if (q.sym_size(-1) != k.sym_size(-1) || k.sym_size(-2) != v.sym_size(-2)) return false;
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (t->sym_numel() == 0 || !at::isFloatingType(t->scalar_type()) || t->scalar_type() != q.scalar_type()) {
      return false;
    }
  }
  if (attn_mask.has_value() && attn_mask->defined()) {
    if (is_causal) return false;
    const at::ScalarType mask_type = attn_mask->scalar_type();
    if (mask_type != at::kBool && mask_type != q.scalar_type()) return false;
    const std::vector<c10::SymInt> scores = {q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    const int64_t mask_rank = attn_mask->dim();
    if (mask_rank > rank) return false;
    for (int64_t i = 1; i <= mask_rank; ++i) {
      const c10::SymInt& m = attn_mask->sym_size(mask_rank - i);
      if (m != 1 && m != scores[rank - i]) return false;
    }
  }
  return true;
}

}  // namespace

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const auto& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() && fused_kernel_covers(query, key, value, attn_mask, dropout_p, is_causal)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  if (context.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);
}

torch::CppFunction fused_sdp_choice_kernel() { return torch::CppFunction(TORCH_FN(fused_sdp_choice)); }

}  // namespace torch_tpu::device

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::device::fused_sdp_choice)
}  // namespace at::native
