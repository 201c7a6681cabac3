"""Printing a tpu tensor formats a host copy (one transfer, one host wait),
as PyTorch does for XLA and lazy tensors. Installed as torch's formatter by
torch_tpu/_global_patches.py; every other tensor goes to PyTorch's own."""

import torch._tensor_str as _tensor_str

_original_tensor_str = _tensor_str._tensor_str


def _tensor_str_on_host(self, indent):
    if self.device.type == "tpu":
        self = self.to("cpu")
    return _original_tensor_str(self, indent)
