"""Dynamo's and Inductor's interface to the tpu device
(`torch._dynamo.device_interface.get_interface_for_device("tpu")`).

PyTorch registers a `TpuInterface` of its own under the name "tpu", written
for TorchTPU: it says tpu has no float64, complex or float16 and that the
current device is always 0. Ours answers from `torch.tpu`.

Importing `torch._dynamo` takes seconds, so this module does not: ours is
registered when Dynamo registers its built-in interfaces (its
`init_device_reg`, which would otherwise put PyTorch's back), after that
module is first imported, whoever imports it.
"""

import functools
import importlib.abc
import importlib.util
import sys
import types

import torch

_DYNAMO_MODULE = "torch._dynamo.device_interface"


@functools.lru_cache(None)
def is_dtype_supported(dtype):
    """Whether tpu tensors of `dtype` exist: asked of the device itself."""
    try:
        torch.empty(0, dtype=dtype, device="tpu")
    except (TypeError, NotImplementedError, RuntimeError):
        return False
    return True


def _properties(device=None):
    """torch.tpu's device properties, with the `multi_processor_count` that
    Inductor reads from every device's (torch/_inductor/runtime/hints.py).
    A TPU chip's TensorCores are not exposed through PJRT; 1, as PyTorch's
    TpuInterface says."""
    props = torch.tpu.get_device_properties(device)
    fields = {k: getattr(props, k) for k in dir(props) if not k.startswith("_")}
    fields.setdefault("multi_processor_count", 1)
    return types.SimpleNamespace(**fields)


def _exchange_device(device):
    previous = torch.tpu.current_device()
    if device >= 0 and device != previous:
        torch.tpu.set_device(device)
    return previous


def _interface_class(base):
    """Our DeviceInterface, a subclass of Dynamo's `base`."""

    class TpuDeviceInterface(base):
        device = torch.tpu.device
        Event = torch.tpu.Event
        Stream = torch.tpu.Stream

        class Worker:
            # Inductor's compile workers ask these; torch.tpu answers in any
            # process (it needs no driver state a fork would break).
            set_device = staticmethod(torch.tpu.set_device)
            current_device = staticmethod(torch.tpu.current_device)
            get_device_properties = staticmethod(_properties)

        current_device = staticmethod(torch.tpu.current_device)
        set_device = staticmethod(torch.tpu.set_device)
        exchange_device = staticmethod(_exchange_device)
        maybe_exchange_device = staticmethod(_exchange_device)
        device_count = staticmethod(torch.tpu.device_count)
        is_available = staticmethod(torch.tpu.is_available)
        stream = staticmethod(torch.tpu.stream)
        current_stream = staticmethod(torch.tpu.current_stream)
        set_stream = staticmethod(torch.tpu.set_stream)
        synchronize = staticmethod(torch.tpu.synchronize)
        get_device_properties = staticmethod(_properties)
        memory_allocated = staticmethod(torch.tpu.memory_allocated)

        @staticmethod
        def get_compute_capability(device=None):
            return ""  # no CUDA compute capability; as PyTorch's TpuInterface

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation=False):
            return is_dtype_supported(dtype)

    return TpuDeviceInterface


def _register(module):
    module.register_interface_for_device("tpu", _interface_class(module.DeviceInterface))


def _hook(module):
    """Registers ours now if Dynamo's table is filled, else right after it is."""
    if module._device_initialized:
        _register(module)
        return
    fill = module.init_device_reg

    def init_device_reg():
        fill()
        _register(module)

    module.init_device_reg = init_device_reg


class _AfterDynamoImport(importlib.abc.MetaPathFinder):
    """Finds Dynamo's module as Python would and hooks it once it has run."""

    def find_spec(self, name, path, target=None):
        if name != _DYNAMO_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _hook(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Called at `import torch_tpu`."""
    module = sys.modules.get(_DYNAMO_MODULE)
    if module is not None:
        _hook(module)
    elif not any(isinstance(f, _AfterDynamoImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoImport())
