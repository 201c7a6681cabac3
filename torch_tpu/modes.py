"""Eager execution modes.

- "strict" (default): every op launches at once; the host waits only when it
  needs a value.
- "debug" (or TORCH_TPU_LAUNCH_BLOCKING=1): every op waits for its results,
  so device errors surface at the op that caused them; out-of-range indices
  raise IndexError (or CPU's error) at the op; with TORCH_TPU_CHECK_NANS=1 or
  `check_nans(True)` the first op producing NaN/Inf raises, naming the op.
"""

import contextlib

from . import _C

_MODES = ("strict", "debug")


def set_eager_mode(mode):
    if mode == "defer_and_fuse":
        raise NotImplementedError("torch_tpu: the DeferAndFuse eager mode is not implemented yet; "
                                  "use 'strict' or 'debug'")
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, got {mode!r}")
    sync()  # work launched under the old mode completes under it
    _C._set_eager_mode(mode)


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
    """Waits for everything launched on every tpu device."""
    _C._synchronize(-1)


def check_nans(enabled=None):
    """In debug mode, raise at the first op whose floating result holds NaN or
    Inf. Returns the previous setting; with no argument, only reports it."""
    previous = _C._check_nans()
    if enabled is not None:
        _C._set_check_nans(bool(enabled))
    return previous
