"""`torch_tpu._loader.load()`: the name libraries call to bring the tpu
device up before they use it. Ray Train calls it before
`init_process_group("tpu_dist")` (ray/air/_internal/device_manager/tpu.py),
as it calls torch_npu's and Habana's loaders for "hccl".

Importing torch_tpu already does what load() promises: the extension and
its kernels, `torch.tpu`, the torch.compile backend and the `tpu_dist` c10d
backend. TorchTPU's own load() brings the device up only where it finds TPU
hardware; ours has a device wherever a PJRT plugin loads (the XLA:CPU one
by default), so load() always loads.
"""

import torch

from . import distributed

_LOADED = False


def load():
    """Makes sure the tpu device, `torch.tpu` and the `tpu_dist` backend are
    registered; idempotent."""
    global _LOADED
    distributed.install()  # registers only backends c10d does not know yet
    _LOADED = True


def _init_device(device):
    """TorchTPU's per-device loader, called by code written for it with "tpu"."""
    if device != "tpu":
        raise ValueError(f"torch_tpu provides the device 'tpu', not {device!r}")
    load()
    return torch.device("tpu")
