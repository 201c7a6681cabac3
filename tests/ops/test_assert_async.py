"""torch._assert_async on tpu: the one value must be nonzero. As on CUDA the
check does not wait for the device: a failed assertion raises CPU's
RuntimeError at the next synchronization (Debug mode: at the call), in
every eager mode and inside a compiled graph (Dynamo emits it for
torch._assert_async in user code; Hugging Face MoE routers call it)."""

import pytest
import torch

import torch_tpu
import torch_tpu.compile as tpu_compile

MODES = ["strict", "defer_and_fuse", "debug"]


def cpu_error(fn):
    with pytest.raises(RuntimeError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("mode", MODES)
def test_a_true_assertion_passes(mode):
    with torch_tpu.eager_mode(mode):
        for value in (torch.tensor(True), torch.tensor(2.5), torch.tensor([-1]), torch.tensor(3 + 0j)):
            torch._assert_async(value.to("tpu"))
            torch._assert_async(value.to("tpu"), "never shown")
        torch.tpu.synchronize()


@pytest.mark.parametrize("message", [None, "router weights must be finite", ""])
@pytest.mark.parametrize("mode", MODES)
def test_a_false_assertion_raises_cpus_error_by_the_next_synchronization(mode, message):
    args = () if message is None else (message,)
    expected = cpu_error(lambda: torch._assert_async(torch.tensor(0.0), *args))
    with torch_tpu.eager_mode(mode):
        x = torch.tensor([1.0, 2.0], device="tpu")
        with pytest.raises(RuntimeError) as info:
            torch._assert_async(x.sum() < 0, *args)
            torch.tpu.synchronize()
    assert str(info.value).startswith(expected), (str(info.value), expected)
    if mode == "debug":  # raised at the call, with CPU's message alone
        assert str(info.value) == expected
    torch.tpu.synchronize()  # reported once


@pytest.mark.parametrize("shape", [(2,), (0,), (1, 3)])
def test_more_or_fewer_than_one_value_raises_at_the_call_as_on_cpu(shape):
    expected = cpu_error(lambda: torch._assert_async(torch.ones(shape)))
    with pytest.raises(RuntimeError, match=expected):
        torch._assert_async(torch.ones(shape, device="tpu"))


def test_compiled_graph_with_an_assertion_replays_and_raises_when_it_fails():
    def scaled(v):
        torch._assert_async((v > 0).all(), "v must be positive")
        return v * 2

    g = torch.compile(scaled, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        v = torch.rand(4) + 0.5
        torch.testing.assert_close(g(v.to("tpu")).cpu(), v * 2)
    after = tpu_compile.stats()
    assert after["graph_replays"] - before["graph_replays"] == 2, after["trace_reasons"]
    with pytest.raises(RuntimeError, match="v must be positive"):
        g(-torch.ones(4, device="tpu"))
        torch.tpu.synchronize()


def test_compiled_graph_of_only_an_assertion_still_checks():
    g = torch.compile(lambda v: torch._assert_async(v.max() < 10, "too large"), backend="tpu")
    for _ in range(2):
        g(torch.ones(3, device="tpu"))
    torch.tpu.synchronize()
    with pytest.raises(RuntimeError, match="too large"):
        g(torch.full((3,), 20.0, device="tpu"))
        torch.tpu.synchronize()
