"""Ranks as threads of this process, each driving a device of its own.

This is where tpu_dist's in-program transport runs on one host
(TORCH_TPU_NUM_DEVICES=N): every collective is a StableHLO collective in a
program replicated over the ranks' devices, as on a TPU slice
(docs/distributed.md). c10d's process-global world holds one group per
process, so each rank's backend is made by tpu_dist's own creator, and, when
a `group_name` is given, wrapped in a c10d ProcessGroup registered under that
name in the thread's own group registry (c10d's thread isolation mode, as its
threaded tests use): functional collectives and torch.compile resolve their
group by that name.

    def body(rank, backend):
        x = torch.ones(4, device="tpu")
        return funcol.all_reduce(x, "sum", "tp").cpu()

    results = run_ranks(4, body, group_name="tp")
"""

import threading
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d

from . import _create_backend

_isolation_lock = threading.Lock()
_isolated_runs = [0]  # runs that need c10d's per-thread group registry


def run_ranks(size, body, *, devices=None, group_name=None, store=None, prefix="", timeout=timedelta(seconds=120)):
    """Runs body(rank, backend) on `size` threads, rank r on tpu device
    devices[r] (default r); returns each rank's result, or raises the first
    rank's exception after every thread ended."""
    devices = list(range(size)) if devices is None else list(devices)
    if len(devices) != size:
        raise ValueError(f"run_ranks: {size} ranks but {len(devices)} devices")
    store = store or dist.HashStore()
    results, errors = [None] * size, [None] * size

    def rank(r):
        try:
            torch.tpu.set_device(devices[r])
            backend = _create_backend(dist.PrefixStore(prefix, store), r, size, timeout)
            if group_name is None:
                results[r] = body(r, backend)
                return
            group = dist.ProcessGroup(store, r, size)
            group._register_backend(torch.device("tpu"), dist.ProcessGroup.BackendType.CUSTOM, backend)
            group._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
            group._set_group_name(group_name)
            c10d._register_process_group(group_name, group)
            try:
                results[r] = body(r, backend)
            finally:
                c10d._unregister_process_group(group_name)
        except BaseException as e:  # re-raised by the caller's thread
            errors[r] = e

    if group_name is not None:
        _isolate_groups(True)
    try:
        threads = [threading.Thread(target=rank, args=(r,), name=f"tpu_rank{r}") for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if group_name is not None:
            _isolate_groups(False)
    for e in errors:
        if e is not None:
            raise e
    return results


def _isolate_groups(enter):
    # The mode is process-wide: on while any run registers groups by name.
    with _isolation_lock:
        _isolated_runs[0] += 1 if enter else -1
        c10d._set_thread_isolation_mode(_isolated_runs[0] > 0)
