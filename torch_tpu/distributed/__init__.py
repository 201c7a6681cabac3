"""c10d backends for the tpu device: `tpu_dist`, also registered as `tpu`.

    dist.init_process_group("tpu_dist")                      # tpu and cpu tensors
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    dist.init_process_group(device_id=torch.device("tpu", local_rank))

The transport is c10d's own ProcessGroupGloo: each collective stages its
tpu tensors through host memory and writes results back into them in place
(csrc/distributed/process_group_tpu.h). Where every rank of a group is a
thread of this process on a device of its own, the main collectives run
in-program instead (StableHLO collectives in replicated programs, as on a
TPU slice; TORCH_TPU_DIST_TRANSPORT=host turns that off). See
docs/distributed.md.
"""

import os
import uuid
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

BACKEND_NAMES = ("tpu_dist", "tpu")

# Tells the ranks of a group that share this process from those that do not.
_PROCESS_TOKEN = f"{os.getpid()}:{uuid.uuid4().hex}"


def _warn_if_call_check_turned_off():
    # TORCH_TPU_DIST_CHECK_CALLS=0 used to skip the comparison of the ranks'
    # calls. Nothing cheaper can stand in for it: gloo ends a rank whose
    # peer sends more bytes than it expects (an abort in its I/O thread) and
    # reduces a same-size dtype mismatch into wrong values, so the check
    # stays on and the setting is refused loudly rather than silently.
    if os.environ.get("TORCH_TPU_DIST_CHECK_CALLS", "1") in ("", "0"):
        warnings.warn(
            "TORCH_TPU_DIST_CHECK_CALLS=0 is ignored: tpu_dist always compares the ranks' collectives (op, dtype, "
            "shape) before any data moves, since without that a mismatched call aborts a rank or returns wrong "
            "values; it costs one small allgather per eager collective",
            stacklevel=3,
        )


def _transport():
    value = os.environ.get("TORCH_TPU_DIST_TRANSPORT", "auto")
    if value not in ("auto", "host"):
        raise ValueError(f"TORCH_TPU_DIST_TRANSPORT must be 'auto' or 'host', not {value!r}")
    return value


def _program_devices(store, rank, size):
    """The group's device per rank when every rank is a thread of this
    process on a device of its own (the in-program transport), else []."""
    device = torch.tpu.current_device() if torch.tpu.is_available() else -1
    store.set(f"rank/{rank}", f"{_PROCESS_TOKEN}|{device}")
    ranks = [store.get(f"rank/{r}").decode().split("|") for r in range(size)]
    devices = [int(d) for _, d in ranks]
    one_process = all(token == _PROCESS_TOKEN for token, _ in ranks)
    if _transport() == "host" or size == 1 or not one_process or -1 in devices or len(set(devices)) < size:
        return []
    return devices


def _create_backend(store, rank, size, timeout):
    """c10d's creator function: a tpu_dist backend over a new gloo group."""
    from torch.distributed import ProcessGroupGloo

    from ._C import ProcessGroupTpu

    # Its own key space. Under "cpu:gloo,tpu:tpu_dist" c10d's gloo backend
    # rendezvouses in the same store; and a group destroyed and created
    # again gets the same name (so the same store prefix), where the old
    # group's addresses are still stored. Each rank of one incarnation adds
    # 1 before gloo connects, and no rank can start the next incarnation
    # before all have connected, so (count - 1) // size numbers it.
    incarnation = (store.add("tpu_dist/incarnations", 1) - 1) // size
    own_store = dist.PrefixStore(f"tpu_dist/{incarnation}/", store)
    host = ProcessGroupGloo(own_store, rank, size, timeout)
    # c10d numbers a gloo group's collectives for its debug tooling
    # (TORCH_DISTRIBUTED_DEBUG, flight recorder) only when it built the group.
    host._set_sequence_number_for_group()
    devices = _program_devices(own_store, rank, size)
    _warn_if_call_check_turned_off()
    backend = ProcessGroupTpu(host, rank, size, devices)
    # dist.split_group's new groups are made the same way, from the store
    # c10d prefixed for each.
    backend._set_split_factory(_create_split_backend, int(timeout.total_seconds() * 1000))
    return backend


def _create_split_backend(store, rank, size, timeout_ms):
    return _create_backend(store, rank, size, timedelta(milliseconds=timeout_ms))


def install():
    """Registers the backends with c10d (at `import torch_tpu`)."""
    if not dist.is_available():
        return
    for name in BACKEND_NAMES:
        if name.upper() in dist.Backend._plugins:
            continue
        # cpu too: under init_process_group("tpu_dist") a CPU tensor (an
        # object collective, a barrier, a CPU buffer) goes straight to gloo.
        dist.Backend.register_backend(name, _create_backend, devices=["cpu", "tpu"])
