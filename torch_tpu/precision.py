"""float32 matmul precision on tpu: "medium" by default (one bf16 pass with
f32 accumulation, StableHLO precision DEFAULT), "high" (HIGH, 3 passes),
"highest" (HIGHEST, full f32). `torch.set_float32_matmul_precision` sets it
too, so code written for CUDA behaves the same. Under "medium" the programs
round float32 matmul and convolution operands to bf16 themselves, so the
XLA:CPU and XLA:GPU plugins (which ignore the precision attribute) compute
what a TPU computes."""

import contextlib
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
