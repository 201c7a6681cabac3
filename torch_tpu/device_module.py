"""`torch.tpu`: the device module PyTorch finds for the `tpu` device."""

import os

import torch

from . import _C

_device_count_cache = None


def _index(device=None):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {device}")
    return current_device() if device.index is None else device.index


def is_available():
    try:
        return device_count() > 0
    except RuntimeError:
        return False


def device_count():
    global _device_count_cache
    if _device_count_cache is None:
        _device_count_cache = _C._device_count()
    return _device_count_cache


def _count_devices_before_fork():
    # A child forked after this process started the plugin cannot ask it
    # (_is_in_bad_fork); it reports this count, as torch.cuda.device_count
    # does in such a child.
    if _C._initialized():
        device_count()


os.register_at_fork(before=_count_devices_before_fork)


def is_initialized():
    """As torch.cuda.is_initialized: False in a child forked after the parent used tpu."""
    return _C._initialized()


def _lazy_init():
    # PyTorch calls this once, in the thread that first makes a tpu tensor.
    from . import _global_patches

    _global_patches.backward_on_the_calling_thread()
    device_count()
    _global_patches.glibc_malloc_keeps_freed_device_pages()


def init():
    device_count()


def current_device():
    return _C._current_device()


def set_device(device):
    index = _index(device)
    if index < 0:
        return
    if index >= device_count():
        raise RuntimeError(f"tpu error: invalid device ordinal {index} (device_count() is {device_count()})")
    _C._set_device(index)


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev_idx >= 0:
            set_device(self.prev_idx)
        return False


class device_of(device):  # noqa: N801 (torch.cuda's name)
    """Context manager that makes the device of `obj` (a tensor or storage)
    current; a no-op where `obj` is not on tpu."""

    def __init__(self, obj):
        on_tpu = getattr(obj, "device", None) is not None and obj.device.type == "tpu"
        super().__init__(obj.device.index if on_tpu else None)


def synchronize(device=None):
    """Waits until every program launched on the device has finished."""
    _C._synchronize(-1 if device is None else _index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """As torch.cuda.set_sync_debug_mode: "default" (0) lets an operation
    that makes the host wait to read device data (`.cpu()`, `.item()`,
    printing, nonzero's size) pass silently, "warn" (1) warns at each, and
    "error" (2) raises RuntimeError there instead of waiting. An explicit
    `torch.tpu.synchronize()` (or an event's or stream's) is never reported.
    Process-wide, as CUDA's."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    try:
        _C._set_sync_debug_mode(debug_mode)
    except ValueError as e:  # std::invalid_argument: an int outside 0..2
        raise RuntimeError(str(e)) from None


def get_sync_debug_mode():
    """The current setting of set_sync_debug_mode, as an int."""
    return _C._get_sync_debug_mode()


# ---- random -------------------------------------------------------------
def manual_seed(seed):
    _C._manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed):
    for i in range(device_count()):
        _C._manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed():
    import random

    manual_seed(random.getrandbits(63))


def seed_all():
    import random

    manual_seed_all(random.getrandbits(63))


def initial_seed():
    return _C._initial_seed(current_device())


def get_rng_state(device="tpu"):
    return torch.frombuffer(bytearray(_C._get_rng_state(_index(device))), dtype=torch.uint8)


def set_rng_state(new_state, device="tpu"):
    _C._set_rng_state(_index(device), bytes(new_state.cpu().contiguous().numpy().tobytes()))


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states):
    for i, s in enumerate(states):
        set_rng_state(s, i)


_default_generators = None


def __getattr__(name):
    # `default_generators`, as torch.cuda's: the devices' own generators, a
    # tuple made at first use (counting devices starts the plugin, which
    # importing torch_tpu does not).
    global _default_generators
    if name == "default_generators":
        if _default_generators is None:
            _default_generators = tuple(_C._default_generator(i) for i in range(device_count()))
        return _default_generators
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


# ---- properties -----------------------------------------------------------
class _DeviceProperties:
    def __init__(self, index):
        info = _C._plugin_info()
        self.name = info["device_kinds"][index]
        self.platform = info["platform_name"]
        # What mem_get_info reports as total: the plugin's limit, or the
        # host memory the XLA:CPU plugin's devices allocate from.
        self.total_memory = _C._mem_get_info(index)[1]
        self.index = index

    def __repr__(self):
        return f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', total_memory={self.total_memory})"


def get_device_properties(device=None):
    index = _index(device)
    if not 0 <= index < device_count():
        raise AssertionError("Invalid device id")
    return _DeviceProperties(index)


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    return (0, 0)


# ---- memory ---------------------------------------------------------------
# torch.cuda keeps these in torch.cuda.memory and re-exports them; so do we.
from . import memory  # noqa: E402, F401
from .memory import (  # noqa: E402, F401
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)

# What an allocation raises when the device is out of memory, under
# torch.cuda's name for it.
OutOfMemoryError = torch.OutOfMemoryError


def _get_cache_stats():
    """The compilation cache's counters (torch_tpu.cache_stats()), under
    TorchTPU's name for them."""
    from .metrics import cache_stats

    return cache_stats()


# ---- float32 matmul precision ------------------------------------------------
# torch.tpu.precision(torch.tpu.Precision.HIGHEST), TorchTPU's per-thread
# override of torch.set_float32_matmul_precision (torch_tpu/precision.py).
from .precision import Precision, precision  # noqa: E402, F401


# ---- streams and events ---------------------------------------------------
# Work on a device runs in the order its data dependencies dictate, so one
# stream per device is the model; these types exist for torch.accelerator,
# FSDP2 and code written for CUDA streams.
class Stream(torch.Stream):
    def __new__(cls, device=None, priority=0, **kwargs):
        return torch.Stream.__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def synchronize(self):
        synchronize(self.device_index)


class Event(torch.Event):
    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event.__new__(
            cls,
            device=torch.device("tpu", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def elapsed_time(self, end_event):
        """Milliseconds from this event's completion to `end_event`'s, as
        torch.cuda.Event.elapsed_time (both recorded with enable_timing=True,
        both complete): when the work each followed had finished."""
        return _C._event_elapsed_time(self, end_event)


def current_stream(device=None):
    return Stream(device)


def default_stream(device=None):
    return Stream(device)


def set_stream(stream):
    pass


class StreamContext:
    """`with torch.tpu.stream(s):`, as torch.cuda.StreamContext: work is
    ordered by its data dependencies on the device's one queue, so selecting
    a stream changes nothing and the context only hands `s` back."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(stream):
    return StreamContext(stream)


# ---- AMP --------------------------------------------------------------------
# torch.tpu.amp: torch.cuda.amp's deprecated names (torch_tpu/amp.py).
from . import amp  # noqa: E402, F401


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True


def _is_in_bad_fork():
    """Whether this process was forked after its parent used tpu: its first
    tpu call raises, as CUDA's does (torch.manual_seed and DataLoader
    workers ask this before touching the device)."""
    return _C._is_in_bad_fork()
