"""`torch.tpu.amp`: the names `torch.cuda.amp` has, for code written
against them (`torch.cuda.amp.autocast()` becomes `torch.tpu.amp.autocast()`
when "cuda" becomes "tpu"). As in torch.cuda.amp they are deprecated
spellings of the device-generic API, and warn so: `torch.autocast("tpu")`,
`torch.amp.GradScaler("tpu")`, `torch.amp.custom_fwd(device_type="tpu")`.

One difference from torch.cuda.amp: `autocast()` without a dtype uses
tpu's autocast dtype (`torch.get_autocast_dtype("tpu")`, bfloat16, what a
TPU computes in), where torch.cuda.amp's defaults to float16."""

import functools
import sys

import torch
from typing_extensions import deprecated

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


@deprecated(
    "`torch.tpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('tpu', args...)` instead.",
    category=FutureWarning,
)
class autocast(torch.amp.autocast_mode.autocast):  # noqa: N801 (torch.cuda.amp's name)
    """`torch.autocast("tpu", ...)` under torch.cuda.amp's name."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


@deprecated(
    "`torch.tpu.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('tpu', args...)` instead.",
    category=FutureWarning,
)
class GradScaler(torch.amp.GradScaler):
    """`torch.amp.GradScaler("tpu", ...)` under torch.cuda.amp's name."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        super().__init__(
            "tpu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


@deprecated(
    "`torch.tpu.amp.custom_fwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_fwd(args..., device_type='tpu')` instead.",
    category=FutureWarning,
)
def custom_fwd(fwd=None, *, cast_inputs=None):
    """`torch.amp.custom_fwd(device_type="tpu")` under torch.cuda.amp's name."""
    if fwd is None:
        return functools.partial(torch.amp.custom_fwd, device_type="tpu", cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="tpu", cast_inputs=cast_inputs)


@deprecated(
    "`torch.tpu.amp.custom_bwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_bwd(args..., device_type='tpu')` instead.",
    category=FutureWarning,
)
def custom_bwd(bwd):
    """`torch.amp.custom_bwd(device_type="tpu")` under torch.cuda.amp's name."""
    return torch.amp.custom_bwd(bwd, device_type="tpu")


# `from torch.tpu.amp import autocast` and `import torch.tpu.amp`, as
# torch.tpu.memory is found (torch_tpu/memory.py).
sys.modules.setdefault("torch.tpu.amp", sys.modules[__name__])
