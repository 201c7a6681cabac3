"""c10d backends for the tpu device: `tpu_dist`, also registered as `tpu`.

    dist.init_process_group("tpu_dist")                      # tpu and cpu tensors
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    dist.init_process_group(device_id=torch.device("tpu", local_rank))

The transport is c10d's own ProcessGroupGloo: each collective stages its
tpu tensors through host memory and writes results back into them in place
(csrc/distributed/process_group_tpu.h). See docs/distributed.md.
"""

import os

import torch.distributed as dist

BACKEND_NAMES = ("tpu_dist", "tpu")


def _check_calls_enabled():
    return os.environ.get("TORCH_TPU_DIST_CHECK_CALLS", "1") not in ("", "0")


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
    host = ProcessGroupGloo(dist.PrefixStore(f"tpu_dist/{incarnation}/", store), rank, size, timeout)
    # c10d numbers a gloo group's collectives for its debug tooling
    # (TORCH_DISTRIBUTED_DEBUG, flight recorder) only when it built the group.
    host._set_sequence_number_for_group()
    return ProcessGroupTpu(host, rank, size, _check_calls_enabled())


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
