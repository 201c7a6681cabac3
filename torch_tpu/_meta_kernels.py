"""Meta kernels PyTorch lacks for ops the tpu device lowers.

Every lowered op first runs PyTorch's Meta kernel for its argument checks and
result shapes (csrc/device/meta_inference.cpp). A few backward ops have none;
they get the obvious one here, registered only where PyTorch has none (a
later PyTorch that adds its own keeps it).
"""

import torch

_library = None


def _like_self(grad_output, self, *args, **kwargs):
    return torch.empty_like(self, memory_format=torch.contiguous_format)


def _like_self_out(grad_output, self, *args, grad_input, **kwargs):
    grad_input.resize_(self.shape)
    return grad_input


def _sdpa_overrideable_backward(grad_out, query, key, value, attn_bias, *args, **kwargs):
    # Gradients like their inputs; attn_bias's only when there is one (torch
    # 2.13's own meta kernel; torch 2.11 has none).
    grad_bias = torch.empty_like(attn_bias) if attn_bias is not None else None
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), grad_bias


def _updates_in_place(*args, **kwargs):
    return None  # in-place on its arguments, returns nothing: no result shapes to infer


# The gradient of a margin loss or of fractional max pooling has its input's
# shape; the fused attention's backward (csrc/lower/attention.cpp) gives
# gradients shaped like q, k, v and the bias. The fused optimizer
# steps PyTorch lacks Meta kernels for update their arguments in place.
_MISSING = {
    "_fused_sgd_": _updates_in_place,
    "_fused_sgd_.tensor_lr": _updates_in_place,
    "_fused_adam_.tensor_lr": _updates_in_place,
    "_fused_adamw_.tensor_lr": _updates_in_place,
    "fractional_max_pool3d_backward": _like_self,
    "fractional_max_pool3d_backward.grad_input": _like_self_out,
    "multi_margin_loss_backward": _like_self,
    "multi_margin_loss_backward.grad_input": _like_self_out,
    "multilabel_margin_loss_backward": _like_self,
    "multilabel_margin_loss_backward.grad_input": _like_self_out,
    "_scaled_dot_product_fused_attention_overrideable_backward": _sdpa_overrideable_backward,
}


def install():
    global _library
    _library = torch.library.Library("aten", "IMPL")
    for name, kernel in _MISSING.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, "Meta"):
            _library.impl(name, kernel, "Meta")
