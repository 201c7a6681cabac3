"""torch_tpu: a native PyTorch device, `tpu`, backed by a PJRT plugin.

    import torch, torch_tpu
    x = torch.randn(4, 4, device="tpu")

Ops run eagerly and asynchronously (Strict mode): each ATen op is lowered to
StableHLO, compiled once per shape/dtype/layout and launched without waiting.
"""

import os

import torch

from . import _global_patches, _plugin

torch.utils.rename_privateuse1_backend("tpu")

from . import _C  # noqa: E402  (after the rename: kernels register for "tpu")

_platform, _plugin_path, _plugin_error = _plugin.find_plugin()
_global_patches.apply_process_environment(_platform)
_C._configure(_plugin_path, _plugin.num_devices(), _plugin_error)
# storage[a:b] of a tpu storage: set_ finds the bytes it points into by the
# deleter PyTorch gives every storage slice, learned here from a CPU one.
_C._learn_storage_slice_deleter(torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage(2)[0:1]))

from . import device_module as _device_module  # noqa: E402

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)
# torch.autocast("tpu") without a dtype means bfloat16, the TPU's native
# matmul type (PyTorch starts PrivateUse1 at float16). PyTorch keeps this per
# thread: threads started later begin at float16 unless they set it too.
torch.set_autocast_dtype("tpu", torch.bfloat16)

from ._global_patches import global_patches  # noqa: E402
from .metrics import cache_stats, metrics, reset_cache_stats, reset_metrics  # noqa: E402
from .modes import check_nans, eager_mode, get_eager_mode, set_eager_mode, sync  # noqa: E402
from .precision import get_matmul_precision, matmul_precision, set_matmul_precision  # noqa: E402
from .profiler import explain_compiles, set_compile_log  # noqa: E402
from .safetensors_io import load_safetensors  # noqa: E402

# Every change to torch outside the tpu device: torch_tpu/_global_patches.py.
_global_patches.apply_at_import()

from . import integrations, pallas  # noqa: E402,F401  (pallas imports JAX only when a kernel is defined)

__all__ = [
    "cpu_fallback",
    "metrics",
    "reset_metrics",
    "cache_stats",
    "reset_cache_stats",
    "plugin_info",
    "lowered_ops",
    "synchronize",
    "get_matmul_precision",
    "set_matmul_precision",
    "matmul_precision",
    "set_eager_mode",
    "get_eager_mode",
    "eager_mode",
    "sync",
    "check_nans",
    "load_safetensors",
    "global_patches",
    "set_compile_log",
    "explain_compiles",
]


def cpu_fallback(enabled=None):
    """Turns the CPU fallback for ops without a tpu lowering on or off.

    Off by default: such an op raises NotImplementedError naming it. On, it
    runs on CPU (with a warning once per op) and is counted in `metrics()`.
    Returns the previous setting; with no argument, only reports it.
    """
    previous = _C._cpu_fallback_enabled()
    if enabled is not None:
        _C._set_cpu_fallback(bool(enabled))
    return previous


if os.environ.get("TORCH_TPU_CPU_FALLBACK", "0") not in ("", "0"):
    cpu_fallback(True)


def plugin_info():
    """The loaded PJRT plugin: path, API versions, platform, attributes, devices."""
    info = dict(_C._plugin_info())
    info["platform_choice"] = _platform
    return info


def lowered_ops():
    """Every ATen overload with a native tpu lowering."""
    return sorted(_C._lowered_ops())


def synchronize(device=None):
    _device_module.synchronize(device)
