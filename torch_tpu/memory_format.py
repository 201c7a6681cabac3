"""The memory format of convolution results in the fake tensors torch.compile
traces with, by eager's rule (csrc/device/meta_inference.h,
convolution_memory_format; CUDA's and CPU's): channels_last when the input or
the weight is. PyTorch's fake convolution asks ATen which backend the device
uses and ATen answers "overrideable, contiguous" for every PrivateUse1
device, so without this a traced `y.permute(0, 2, 3, 1).view(n, -1)` fails
where eager succeeds. Other devices keep PyTorch's answer."""

import functools

import torch
from torch._subclasses import fake_impls

from . import _C

aten = torch.ops.aten

# The ops PyTorch's fake convolution serves; for the backward, the input and
# weight gradients take the format (the bias gradient is 1-d).
_CONVOLUTIONS = (aten.convolution.default, aten._convolution.default, aten._convolution.deprecated)
_BACKWARD = aten.convolution_backward.default


def install():
    # op_implementations_dict is where FakeTensorMode finds PyTorch's own
    # convolution rule; there is no public hook for a device's layouts. A
    # torch without that table keeps its contiguous fakes (eager is unaffected).
    if not hasattr(fake_impls, "op_implementations_dict") or not hasattr(fake_impls, "_normalize_function_or_error"):
        return
    for op in (*_CONVOLUTIONS, _BACKWARD):
        torch_rule = fake_impls.op_implementations_dict[op]
        fake_impls.op_implementations_dict[op] = functools.partial(_with_tpu_format, torch_rule)


def _with_tpu_format(torch_rule, fake_mode, func, *args, **kwargs):
    out = torch_rule(fake_mode, func, *args, **kwargs)
    _, named = fake_impls._normalize_function_or_error(
        func, args=args, kwargs=kwargs, normalize_to_only_use_kwargs=True
    )
    inp, weight = named["input"], named["weight"]
    if inp.fake_device.type != "tpu" or not all(isinstance(s, int) for s in (*inp.shape, *weight.shape)):
        return out  # symbolic sizes: PyTorch's rule too leaves the format alone
    fmt = getattr(torch, _C._convolution_memory_format(inp, weight))
    if fmt is torch.contiguous_format:
        return out
    with fake_mode:
        if func in _CONVOLUTIONS:
            return torch.empty_like(out, memory_format=fmt)
        grad_input, grad_weight = (None if t is None else torch.empty_like(t, memory_format=fmt) for t in out[:2])
        return grad_input, grad_weight, out[2]
