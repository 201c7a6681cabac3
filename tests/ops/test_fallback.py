"""Ops without a lowering: NotImplementedError by default, CPU fallback on request."""

import warnings

import pytest
import torch

import torch_tpu

# Ops with a CPU kernel and no tpu one. (Every ATen op a simple model
# reaches is lowered by now, so the tests define their own.)
UNLOWERED = "torch_tpu_test::fallback_probe"


@torch.library.custom_op(UNLOWERED, mutates_args=(), device_types="cpu")
def fallback_probe(x: torch.Tensor) -> torch.Tensor:
    return torch.erfinv(x)


@fallback_probe.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("torch_tpu_test::fallback_probe_", mutates_args=("x",), device_types="cpu")
def fallback_probe_(x: torch.Tensor) -> None:
    x.erfinv_()


def test_op_is_really_unlowered():
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(UNLOWERED, "PrivateUse1")
    assert UNLOWERED not in torch_tpu.lowered_ops()


def test_unlowered_op_raises_not_implemented_naming_it():
    x = torch.rand(4).to("tpu")
    with pytest.raises(NotImplementedError, match=UNLOWERED):
        fallback_probe(x)


def test_cpu_fallback_runs_on_cpu_warns_once_and_counts():
    x = torch.rand(4) * 0.5
    previous = torch_tpu.cpu_fallback(True)
    try:
        torch_tpu.reset_metrics()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = fallback_probe(x.to("tpu"))
            z = fallback_probe(x.to("tpu"))
        assert y.device.type == "tpu"
        torch.testing.assert_close(y.cpu(), torch.erfinv(x))
        torch.testing.assert_close(z.cpu(), torch.erfinv(x))
        counts = torch_tpu.metrics()["cpu_fallbacks"]
        assert sum(n for op, n in counts.items() if op.startswith(UNLOWERED)) == 2
        fallback_warnings = [w for w in caught if UNLOWERED in str(w.message)]
        assert len(fallback_warnings) <= 1  # once per op per process
    finally:
        torch_tpu.cpu_fallback(previous)


def test_cpu_fallback_in_place_writes_back():
    previous = torch_tpu.cpu_fallback(True)
    try:
        x = torch.rand(5) * 0.5
        t = x.to("tpu")
        fallback_probe_(t)
        torch.testing.assert_close(t.cpu(), torch.erfinv(x))
    finally:
        torch_tpu.cpu_fallback(previous)
