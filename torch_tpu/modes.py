"""Eager execution modes.

- "strict" (default): every op launches at once; the host waits only when it
  needs a value.
- "debug" (or TORCH_TPU_LAUNCH_BLOCKING=1): every op waits for its results,
  so device errors surface at the op that caused them; out-of-range indices
  raise IndexError (or CPU's error) at the op; with TORCH_TPU_CHECK_NANS=1 or
  `check_nans(True)` the first op producing NaN/Inf raises, naming the op.
- "defer_and_fuse" (or TORCH_TPU_DEFER_AND_FUSE=1): ops are recorded and a
  run of them is compiled and launched as one program when a value is needed
  on the host, at `sync()`, at a mode change, after each optimizer step, or
  when TORCH_TPU_DEFER_MAX_OPS ops (default 4000) are pending. Tensors that
  die inside a run are never materialized.

Threads: the mode is the calling thread's own, as grad mode and autocast
are. A thread that never sets one runs in the process default (the
environment variables above, else "strict"); setting it in one thread never
changes how another thread's ops run. Each thread has its own pending
DeferAndFuse programs and its own torch.compile capture, so threads never
fuse each other's ops; when a thread reads a tensor that another thread's
pending program writes, that program runs first, so every thread sees
every write that happened before its read.
"""

import contextlib

import torch

from . import _C

_MODES = ("strict", "debug", "defer_and_fuse")


def set_eager_mode(mode):
    """Sets the calling thread's eager mode."""
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, got {mode!r}")
    sync()  # work launched under the old mode completes under it
    _C._set_eager_mode(mode)
    # This thread's backward then runs on this thread, in this mode, rather
    # than on autograd's device thread in the process default mode.
    torch.autograd.set_multithreading_enabled(False)


def get_eager_mode():
    return _C._get_eager_mode()


@contextlib.contextmanager
def eager_mode(mode):
    """Runs the block in `mode`, then restores the previous mode."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def sync():
    """Runs this thread's pending DeferAndFuse programs, then waits for
    everything launched on every tpu device (by any thread)."""
    _C._synchronize(-1)


def check_nans(enabled=None):
    """In debug mode, raise at the first op whose floating result holds NaN or
    Inf. Returns the previous setting; with no argument, only reports it."""
    previous = _C._check_nans()
    if enabled is not None:
        _C._set_check_nans(bool(enabled))
    return previous


# The two below are registered by torch_tpu/_global_patches.py.
def _flush_after_optimizer_step(optimizer, args, kwargs):
    # A training step is the natural unit to fuse: cutting here keeps the
    # fused programs identical from step to step, so they compile once.
    # Inside a step that torch.compile traces there is nothing to flush (and
    # Dynamo cannot trace into _C).
    if torch.compiler.is_compiling():
        return
    if _C._get_eager_mode() == "defer_and_fuse":
        _C._flush("optimizer_step")


def _wait_at_exit():
    # Programs still running at exit would race the plugin's static
    # destructors; pending DeferAndFuse work nobody can read any more is
    # dropped, not run.
    if _C._initialized():
        _C._wait_in_flight()
