"""Ops without a lowering: NotImplementedError by default, CPU fallback on request."""

import warnings

import pytest
import torch

import torch_tpu

# An op we do not lower (checked below, so the test stays meaningful).
UNLOWERED = "aten::erfinv"


def test_op_is_really_unlowered():
    assert UNLOWERED not in torch_tpu.lowered_ops()


def test_unlowered_op_raises_not_implemented_naming_it():
    x = torch.rand(4).to("tpu")
    with pytest.raises(NotImplementedError, match="aten::erfinv"):
        torch.erfinv(x)


def test_cpu_fallback_runs_on_cpu_warns_once_and_counts():
    x = torch.rand(4) * 0.5
    previous = torch_tpu.cpu_fallback(True)
    try:
        torch_tpu.reset_metrics()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = torch.erfinv(x.to("tpu"))
            z = torch.erfinv(x.to("tpu"))
        assert y.device.type == "tpu"
        torch.testing.assert_close(y.cpu(), torch.erfinv(x))
        torch.testing.assert_close(z.cpu(), torch.erfinv(x))
        # Counted under the overload that reached the device (erfinv.out).
        counts = torch_tpu.metrics()["cpu_fallbacks"]
        assert sum(n for op, n in counts.items() if op.startswith("aten::erfinv")) == 2
        fallback_warnings = [w for w in caught if "erfinv" in str(w.message)]
        assert len(fallback_warnings) <= 1  # once per op per process
    finally:
        torch_tpu.cpu_fallback(previous)


def test_cpu_fallback_in_place_writes_back():
    previous = torch_tpu.cpu_fallback(True)
    try:
        x = torch.rand(5) * 0.5
        t = x.to("tpu")
        t.erfinv_()
        torch.testing.assert_close(t.cpu(), torch.erfinv(x))
    finally:
        torch_tpu.cpu_fallback(previous)
