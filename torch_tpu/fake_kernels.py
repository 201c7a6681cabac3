"""Fake-tensor rules for ops whose PyTorch meta kernel rejects what the
device runs, so torch.compile traces them as eager runs them.

`aten._grouped_mm`: PyTorch's meta kernel admits only CUDA's bfloat16; the
device lowers it for CPU's dtypes too (csrc/lower/matmul.cpp, whose Meta
kernel in csrc/device/missing_meta_kernels.cpp checks the arguments when the
graph first runs). transformers routes mixture-of-experts layers on tpu to
`grouped_mm` for every dtype, compiled or not. Other devices keep PyTorch's
rule."""

import torch

aten = torch.ops.aten


def is_grouped_mm(func):
    """The predicate FakeTensorMode consults before meta kernels: the rule
    is registered with register_op_impl (torch_tpu/_global_patches.py); a
    rule returning NotImplemented defers to the meta kernel."""
    return func is aten._grouped_mm.default


def grouped_mm(fake_mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if mat_a.fake_device.type != "tpu":
        return NotImplemented
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        size = (offs.shape[0], mat_a.shape[0], mat_b.shape[1])
    elif mat_a.dim() == 2:
        size = (mat_a.shape[0], mat_b.shape[-1])
    elif mat_b.dim() == 2:
        size = (mat_a.shape[1], mat_b.shape[1])
    else:
        size = (mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1])
    with fake_mode:
        return torch.empty(size, dtype=out_dtype or mat_a.dtype, device=mat_a.fake_device)
