"""float32 matmul precision on tpu: "medium" by default (one bf16 pass with
f32 accumulation, StableHLO precision DEFAULT), "high" (HIGH, 3 passes),
"highest" (HIGHEST, full f32). `torch.set_float32_matmul_precision` sets it
too, so code written for CUDA behaves the same. Under "medium" the programs
round float32 matmul and convolution operands to bf16 themselves, so the
XLA:CPU and XLA:GPU plugins (which ignore the precision attribute) compute
what a TPU computes.

Two scopes, as TorchTPU has them: the process setting above, and the
calling thread's own, `torch.tpu.precision(torch.tpu.Precision.HIGHEST)`,
a context manager that overrides the process setting for that thread's
matmuls only (nested ones restore the outer one; other threads, new ones
included, keep the process setting). An op takes the precision in force
when it is called, in every mode, and a compiled graph runs at the one in
force when it is called: it is traced again where that differs."""

import contextlib
import enum
import functools

import torch

from . import _C

_VALID = ("highest", "high", "medium")
_original_setter = torch.set_float32_matmul_precision


def set_matmul_precision(precision):
    if precision not in _VALID:
        raise ValueError(f"precision must be one of {_VALID}, got {precision!r}")
    _C._set_matmul_precision(precision)


def get_matmul_precision():
    return _C._get_matmul_precision()


@contextlib.contextmanager
def matmul_precision(precision):
    previous = get_matmul_precision()
    set_matmul_precision(precision)
    try:
        yield
    finally:
        set_matmul_precision(previous)


@functools.wraps(_original_setter)
def set_float32_matmul_precision_for_tpu_too(precision):
    # torch.set_float32_matmul_precision (torch_tpu/_global_patches.py):
    # PyTorch's setter first, so its errors and its setting are unchanged; a
    # value it ignores (with a warning) leaves tpu's setting alone too.
    _original_setter(precision)
    if precision in _VALID:
        set_matmul_precision(precision)


class Precision(enum.Enum):
    """StableHLO's dot precisions, by the name `torch.tpu.Precision` gives
    them; each value is the `torch.set_float32_matmul_precision` name that
    selects it."""

    DEFAULT = "medium"  # one bf16 pass, f32 accumulation
    HIGH = "high"  # three bf16 passes
    HIGHEST = "highest"  # full float32


def current_precision():
    """The `Precision` the calling thread's float32 matmuls use now."""
    return Precision[_C._matmul_precision()]


def precision(level):
    """`with torch.tpu.precision(torch.tpu.Precision.HIGHEST): ...`: float32
    matmuls, convolutions and their gradients called by this thread inside
    the block use `level`; the process setting and other threads are
    untouched, and leaving the block (also by an exception) restores what
    the thread used before. Also a decorator."""
    if not isinstance(level, Precision):
        raise TypeError(f"torch.tpu.precision expects a torch.tpu.Precision (DEFAULT, HIGH or HIGHEST), got {level!r}")
    return _thread_precision(level)


@contextlib.contextmanager
def _thread_precision(level):
    outer = _C._set_thread_matmul_precision(level.value)  # "" where the thread had no override
    try:
        yield
    finally:
        _C._set_thread_matmul_precision(outer)
