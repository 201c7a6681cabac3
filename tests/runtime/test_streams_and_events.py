"""Streams and events say what CUDA's say (csrc/device/guard.cpp): a stream
is idle, and an event complete, once the programs launched before it have
finished; timed events measure when that happened. A launch returns while
its program runs, in-place ops included: the buffer an op donates is kept
until its program finishes (csrc/runtime/device_runtime.cpp), because
XLA:CPU's destroy of a donated buffer waits for the program that took it."""

import time

import pytest
import torch

import torch_tpu

MODES = ["strict", "defer_and_fuse"]


def chained_matmuls(w, a, steps=10):
    """In place, each step depending on the last: the work runs for a while
    (about 0.1-0.5 s on XLA:CPU) and its programs donate w's buffer."""
    for _ in range(steps):
        w.add_(w @ a)
    return w


def operands(device):
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 1024, generator=generator) / 64
    w = torch.randn(1024, 1024, generator=generator)
    return w.to(device), a.to(device)


@pytest.mark.parametrize("mode", MODES)
def test_a_stream_is_busy_until_its_in_place_work_finishes(mode):
    expected = chained_matmuls(*operands("cpu"))
    w, a = operands("tpu")
    stream = torch.tpu.current_stream()
    with torch_tpu.eager_mode(mode):
        torch.tpu.synchronize()
        assert stream.query()
        chained_matmuls(w, a)
        done = torch.tpu.Event()
        done.record()
        # The launches returned before the programs finished (before the
        # donation fix, each in-place op's launch waited for its program).
        assert not stream.query()
        assert not done.query()
        done.synchronize()
        assert done.query()
        assert stream.query()
    torch.testing.assert_close(w.cpu(), expected, rtol=1e-4, atol=1e-3)


def test_a_recorded_event_launches_deferred_work():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.arange(6.0, device="tpu")
        y = x * 2 + 1  # deferred: not launched yet
        before = torch_tpu.metrics()["programs_executed"]
        event = torch.Event(device="tpu")
        event.record()
        assert torch_tpu.metrics()["programs_executed"] > before
        event.synchronize()
        assert event.query()
        torch.testing.assert_close(y.cpu(), torch.arange(6.0) * 2 + 1)


@pytest.mark.parametrize("event_class", [torch.tpu.Event, lambda **kw: torch.Event(device="tpu", **kw)])
def test_timed_events_measure_the_work_between_them(event_class):
    w, a = operands("tpu")
    torch.tpu.synchronize()
    start, end = event_class(enable_timing=True), event_class(enable_timing=True)
    began = time.perf_counter()
    start.record()
    chained_matmuls(w, a)
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - began) * 1e3
    elapsed = start.elapsed_time(end)
    # The work between the events took time, and no more than the host saw.
    assert 0 < elapsed <= wall_ms
    assert end.elapsed_time(start) == -elapsed
    back_to_back = event_class(enable_timing=True)
    back_to_back.record()
    back_to_back.synchronize()
    assert end.elapsed_time(back_to_back) >= 0


def test_event_timing_mistakes_raise_as_on_cuda():
    untimed, timed = torch.tpu.Event(), torch.tpu.Event(enable_timing=True)
    with pytest.raises(ValueError, match="must be recorded before"):
        timed.elapsed_time(torch.tpu.Event(enable_timing=True))
    untimed.record()
    timed.record()
    torch.tpu.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.elapsed_time(timed)
    w, a = operands("tpu")
    torch.tpu.synchronize()
    chained_matmuls(w, a)
    running = torch.tpu.Event(enable_timing=True)
    running.record()
    with pytest.raises(RuntimeError, match="must be completed"):
        timed.elapsed_time(running)
    running.synchronize()
    assert timed.elapsed_time(running) > 0
