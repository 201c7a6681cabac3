"""`torch.tpu.memory`: torch.cuda.memory's API for tpu storages.

Every number comes from the tpu allocator (csrc/device/device_allocator.h),
the same account `torch.accelerator`'s memory calls read and the
out-of-memory check uses. The allocator caches nothing: a storage's bytes
are taken when it is allocated and given back when it dies, so reserved
bytes always equal allocated bytes and `empty_cache` has nothing to free.
docs/memory.md says what each statistic means on tpu.
"""

import collections
import pickle
import sys

from . import _C
from .device_module import _index, device_count

__all__ = [
    "empty_cache",
    "get_per_process_memory_fraction",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]


def _checked_index(device):
    index = _index(device)
    if not 0 <= index < device_count():
        raise AssertionError("Invalid device id")
    return index


def memory_stats_as_nested_dict(device=None):
    """torch.cuda.memory_stats_as_nested_dict's dict for a tpu device."""
    return _C._memory_device_stats(_index(device))


def memory_stats(device=None):
    """torch.cuda.memory_stats for a tpu device: CUDA's keys
    ("allocated_bytes.all.current", "reserved_bytes.all.peak",
    "num_ooms", ...), flattened and sorted as CUDA's are.

    A storage is one allocation, one segment and one active block (nothing
    is cached or split), so allocated, active, requested and reserved bytes
    are equal; the "small_pool"/"large_pool" split is by size (up to 1 MiB is
    small), as CUDA's pools split."""
    flat = []

    def flatten(prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                flatten(f"{prefix}.{key}" if prefix else key, inner)
        else:
            flat.append((prefix, value))

    flatten("", memory_stats_as_nested_dict(device))
    flat.sort()
    return collections.OrderedDict(flat)


def memory_allocated(device=None):
    """Bytes held by live tpu storages on the device, counted from their
    allocation (torch.empty allocates), as CUDA counts them."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    """The most `memory_allocated` has been since the start or the last
    `reset_peak_memory_stats`."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """Bytes the allocator holds for the device: equal to `memory_allocated`,
    since it caches nothing."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    """Peaks ("*.peak") restart from the current values, as on CUDA."""
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    """Totals ("*.allocated", "*.freed", num_ooms, ...) restart from zero, as on CUDA."""
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache():
    """Hands memory freed by dead storages back to the system, as
    torch.cuda.empty_cache does its cached blocks. Storages release their
    buffers when they die; on the XLA:CPU plugin those are the host's
    malloc, and glibc's keeps freed pages (torch_tpu/_global_patches.py,
    glibc_malloc_keeps_freed_device_pages): malloc_trim returns them. Live
    tensors are untouched."""
    from .info import malloc_in_use

    if not _C._initialized() or dict(_C._plugin_info())["platform_name"] != "cpu" or malloc_in_use() != "glibc":
        return
    # Dead storages' buffers are released in launch order, after the
    # programs before them: wait, as CUDA's cudaFree does, so they are free
    # when malloc is trimmed (the same trim an allocation refused for want
    # of host memory makes: csrc/device/host_memory.cpp).
    _C._synchronize(-1)
    _C._return_free_malloc_pages()


def mem_get_info(device=None):
    """(free, total) bytes of a device, as torch.cuda.mem_get_info: total is
    the plugin's memory limit (host memory on the XLA:CPU plugin, whose
    devices share it: physical memory or the cgroup's limit), free what live
    tpu tensors leave of it (within `set_per_process_memory_fraction`'s
    share) and, on the XLA:CPU plugin, no more than the host has available
    now less what tensors not yet written will take; the same bound past
    which an allocation raises torch.OutOfMemoryError."""
    return tuple(_C._mem_get_info(_checked_index(device)))


def set_per_process_memory_fraction(fraction, device=None):
    """As torch.cuda.set_per_process_memory_fraction: this process may
    allocate fraction * total memory of the device, past which an
    allocation raises torch.OutOfMemoryError; `mem_get_info`'s free memory
    (and so accelerate's device_map="auto") counts within that limit."""
    index = _checked_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(index, fraction)


def get_per_process_memory_fraction(device=None):
    return _C._get_memory_fraction(_checked_index(device))


def _format_bytes(n):
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 10 * 1024 or unit == "TiB":
            return f"{n:6d} {unit}"
        n //= 1024
    return f"{n:6d} PiB"


def _format_count(n):
    for unit in (" ", "K", "M"):
        if abs(n) < 10 * 1000 or unit == "M":
            return f"{n:7d} {unit} "
        n //= 1000
    return f"{n:7d} M "


def memory_summary(device=None, abbreviated=False):
    """torch.cuda.memory_summary's table of this device's statistics."""
    index = _index(device)
    stats = memory_stats(index)
    rule = "=" * 75
    lines = [
        rule,
        f" {'':16} PyTorch tpu memory summary, device ID {index:<18d} ",
        "-" * 75,
        f"  {'':9} tpu OOMs: {stats['num_ooms']:<13d} | {'':6} alloc retries: {stats['num_alloc_retries']:<13d}",
        rule,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    rows = [
        ("allocated_bytes", "Allocated memory", _format_bytes),
        ("active_bytes", "Active memory", _format_bytes),
        ("requested_bytes", "Requested memory", _format_bytes),
        ("reserved_bytes", "tpu reserved memory", _format_bytes),
        ("inactive_split_bytes", "Non-releasable memory", _format_bytes),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "tpu reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    pools = (
        [("all", None)]
        if abbreviated
        else [("all", None), ("large_pool", "from large pool"), ("small_pool", "from small pool")]
    )
    for key, name, fmt in rows:
        lines.append("-" * 75)
        for pool, pool_name in pools:
            values = [stats[f"{key}.{pool}.{field}"] for field in ("current", "peak", "allocated", "freed")]
            label = name if pool_name is None else f"      {pool_name}"
            lines.append(f" {label:<21} | " + " | ".join(fmt(v) for v in values) + " ")
    lines.append(rule)
    return "\n".join(lines) + "\n"


# ---- memory history and snapshots -------------------------------------------
_ENABLED = (None, "state", "all")
_CONTEXTS = (None, "state", "alloc", "all")
_STACKS = ("python", "all")


def _record_memory_history(
    enabled="all",
    context="all",
    stacks="all",
    max_entries=sys.maxsize,
    device=None,
    clear_history=False,
    **unsupported,
):
    """torch.cuda.memory._record_memory_history for tpu storages.

    enabled: None stops recording; "state" keeps the allocating stack of
    each live storage; "all" also keeps the last `max_entries` events
    (alloc, free, oom). context: which of them keep a stack (None, "state":
    live storages only, "alloc": and allocation events, "all": and frees).
    stacks: "python", or "all" to add C++ frames. Stacks are recorded on
    threads that hold the GIL (a thread that released it, a DeferAndFuse
    flush, records none). `device` is accepted as CUDA's is: recording
    covers every tpu device. The legacy form (a bool first) is accepted.
    """
    if isinstance(enabled, bool):  # torch.cuda's legacy signature: (enabled, record_context, ...)
        record_context = unsupported.pop("record_context", context if isinstance(context, bool) else True)
        max_entries = unsupported.pop("trace_alloc_max_entries", 1)
        unsupported.pop("trace_alloc_record_context", None)
        stacks = "all" if unsupported.pop("record_context_cpp", False) else "python"
        context = "all" if enabled and record_context else None
        enabled = "all" if enabled else None
    for name in ("compile_context", "global_record_annotations", "skip_actions"):
        if unsupported.pop(name, None):
            raise NotImplementedError(f"tpu: _record_memory_history({name}=...) is not supported")
    if unsupported:
        raise TypeError(f"_record_memory_history() got an unexpected keyword argument '{next(iter(unsupported))}'")
    # torch.cuda's checks and messages.
    if enabled not in _ENABLED:
        raise RuntimeError("expected state to be 'state', 'all', or None")
    if context not in _CONTEXTS:
        raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None")
    if stacks not in _STACKS:
        raise RuntimeError("expected stacks to be 'python', or 'all'")
    if enabled == "state" and context is not None:
        context = "state"  # no events are kept, so none needs a stack
    if clear_history:
        _C._record_memory_history("", False, 0, stacks)
    _C._record_memory_history(
        (context or "") if enabled else "", enabled == "all", int(min(max_entries, sys.maxsize)), stacks
    )


def _snapshot(device=None):
    """torch.cuda.memory._snapshot()'s dict for tpu: "segments" (one per live
    storage, each holding one "active_allocated" block with the "frames" of
    the stack that allocated it, when recorded) and "device_traces" (the
    recorded events, per device). torch.cuda._memory_viz reads it
    (segment_plot, trace_plot, memory, segments, segsum, trace)."""
    return _C._memory_snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Saves `_snapshot()` as a pickle that pytorch.org/memory_viz opens."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot(device=None):
    """torch.cuda.memory_snapshot: the snapshot's segments."""
    return _snapshot(device)["segments"]


# `import torch.tpu.memory` and `from torch.tpu.memory import _snapshot`
# find this module (torch registers only `torch.tpu` itself).
sys.modules.setdefault("torch.tpu.memory", sys.modules[__name__])
