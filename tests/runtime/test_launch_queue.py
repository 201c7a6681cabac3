"""The launch queue (csrc/pjrt/launch_queue.h): an op's program is handed to
one thread of ours that makes the plugin's execute, so the op returns at
once, as a CUDA kernel launch does. Results are those of running each op at
its call; small uploads (a few host numbers) are queued too, from a copy,
and a value one launch reads (a changing float, an RNG state) travels in
that launch's job; reads and synchronizations wait for the queue; a program that
fails there raises at each use of its results and at the next synchronize;
the queue is bounded.

The worker is held (`_launch_queue_hold`) where a test must know that
nothing queued after a point has run yet.
"""

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

import torch_tpu
from torch_tpu import _C

pytestmark = [
    pytest.mark.skipif(
        not _C._launches_queued(), reason="TORCH_TPU_LAUNCH_QUEUE=0: launches run on the calling thread"
    ),
    # Debug mode waits for every op's results, which a held queue never gives.
    pytest.mark.skipif(
        torch_tpu.get_eager_mode() == "debug", reason="TORCH_TPU_LAUNCH_BLOCKING=1: every op waits for the queue"
    ),
]

CAPACITY = 1024  # LaunchQueue::kCapacity


@contextlib.contextmanager
def held_queue():
    """Nothing queued inside the block runs before the block ends."""
    torch_tpu.synchronize()
    _C._launch_queue_hold()
    try:
        yield
    finally:
        _C._launch_queue_release()


@contextlib.contextmanager
def failing_execute(op):
    _C._inject_fault(op, "execute")
    try:
        yield
    finally:
        _C._inject_fault("", "")


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_ops_return_before_their_programs_run_and_reads_see_every_one(mode):
    x_cpu = torch.randn(8, 8)
    w_cpu = torch.randn(8, 8)
    with torch_tpu.eager_mode(mode):
        x, w = x_cpu.to("tpu"), w_cpu.to("tpu")
        torch_tpu.synchronize()
        with held_queue():
            for _ in range(20):  # in place, new tensors and views, all queued behind the hold
                x.mul_(0.5).add_(x @ w * 0.1)
                y = x.t().tanh() + 1
            if mode == "defer_and_fuse":
                _C._flush("test")  # launched, not waited for
            assert _C._launch_queue_depth() > 1  # the hold and what came after it
        for _ in range(20):
            x_cpu.mul_(0.5).add_(x_cpu @ w_cpu * 0.1)
            y_cpu = x_cpu.t().tanh() + 1
        torch.testing.assert_close(x.cpu(), x_cpu)
        torch.testing.assert_close(y.cpu(), y_cpu)
        assert torch.equal(w.cpu(), w_cpu)  # read by every program, written by none


def test_a_tensor_released_before_its_program_ran_frees_its_buffer_after_it():
    a = torch.randn(64, 64, device="tpu")
    torch_tpu.synchronize()
    before = torch.tpu.memory_allocated()
    with held_queue():
        for _ in range(50):
            b = a @ a  # the previous b dies while its program waits
        del b
    torch_tpu.synchronize()
    assert torch.tpu.memory_allocated() == before
    assert torch.equal((a @ a).cpu(), a.cpu() @ a.cpu())


def test_a_changing_float_travels_with_its_launch_and_a_small_host_tensor_is_uploaded_on_the_queue_from_copies():
    x_cpu = torch.randn(8, 8)
    x = x_cpu.to("tpu")
    for s in (0.5, 0.25):  # the op cache captures `x * s` on its second call
        x * s
    small_cpu = torch.tensor([1.0, 2.0, 3.0])
    # Numbers no replay fed before: one fed again is uploaded once and kept
    # for every later replay in the process (upload_number).
    first = 0.7531
    scales = [0.1 * k + 0.0123 for k in range(40)]
    with held_queue():
        depth = _C._launch_queue_depth()
        y = x * first
        # A replay with a new float queues one job, the launch, which
        # uploads the float itself (no upload made on this thread, no
        # upload job, no release of its buffer).
        assert _C._launch_queue_depth() == depth + 1
        products = [x * s for s in scales]
        torch_tpu.reset_metrics()  # the float's uploads are made by the launches still held
        depth = _C._launch_queue_depth()
        small = small_cpu.to("tpu")
        assert _C._launch_queue_depth() == depth + 1
        small_cpu.fill_(-1.0)  # the upload took a copy at the call
    torch_tpu.synchronize()
    assert torch_tpu.metrics()["uploads"] == 1 + len(scales) + 1  # the floats, uploaded once each, and `small`
    torch.testing.assert_close(y.cpu(), x_cpu * first)
    for s, p in zip(scales, products):
        torch.testing.assert_close(p.cpu(), x_cpu * s)
    assert torch.equal(small.cpu(), torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_an_rng_state_travels_with_its_launch_and_draws_as_uploaded_apart(mode):
    with torch_tpu.eager_mode(mode):

        def draws(n):
            torch.manual_seed(7)
            out = [torch.rand(64, 64, device="tpu") for _ in range(n)]
            if mode == "defer_and_fuse":
                _C._flush("test")
            return out

        expected = [d.cpu() for d in draws(4)]  # uploaded apart: the queue's order does not matter here
        with held_queue():
            depth = _C._launch_queue_depth()
            queued = draws(4)
            # One job per program: each launch uploads its own RNG state.
            assert _C._launch_queue_depth() == depth + (1 if mode == "defer_and_fuse" else 4)
    for got, want in zip(queued, expected):
        assert torch.equal(got.cpu(), want)
    assert not torch.equal(expected[0], expected[1])  # each launch drew its own state


def test_a_number_kept_as_a_replayed_programs_constant_is_uploaded_once_at_capture():
    # dropout's keep probability and scale are numbers its lowering derives
    # from p: program inputs that no argument of the call feeds, so a replay
    # keeps the capture's buffers for them. Each replay uploads only its RNG
    # state, not those numbers again.
    x = torch.ones(64, 64, device="tpu")
    for _ in range(2):  # captured on the second call
        torch.nn.functional.dropout(x, 0.3)
    torch_tpu.synchronize()
    torch_tpu.reset_metrics()
    with held_queue():
        depth = _C._launch_queue_depth()
        dropped = [torch.nn.functional.dropout(x, 0.3) for _ in range(5)]
        assert _C._launch_queue_depth() == depth + 5 * 2  # the launch, and the release of its mask
    torch_tpu.synchronize()
    assert torch_tpu.metrics()["op_cache_replays"] == 5
    assert torch_tpu.metrics()["uploads"] == 5
    for y in dropped:
        values = y.cpu()
        kept = values != 0
        assert torch.equal(values[kept], torch.full_like(values[kept], 1 / 0.7))
        assert 0.5 < kept.float().mean() < 0.9


def test_a_host_ahead_of_the_device_waits_when_the_queue_is_full():
    x = torch.zeros(4, device="tpu")
    done = threading.Event()

    def launch_more_than_the_queue_holds():
        for _ in range(CAPACITY + 200):
            x.add_(1)
        done.set()

    with held_queue():
        t = threading.Thread(target=launch_more_than_the_queue_holds, daemon=True)
        t.start()
        # It cannot finish while the worker is held: it waits for room.
        deadline = time.monotonic() + 60
        while _C._launch_queue_depth() < CAPACITY + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _C._launch_queue_depth() == CAPACITY + 1  # the held job and a full queue
        assert not done.is_set()
    t.join(120)
    assert done.is_set()
    assert torch.equal(x.cpu(), torch.full((4,), float(CAPACITY + 200)))


def test_a_program_that_fails_on_the_queue_raises_at_each_use_and_at_the_next_synchronize():
    x_cpu = torch.arange(6.0)
    x = x_cpu.to("tpu")
    torch_tpu.synchronize()
    with failing_execute("aten::mul.Tensor"):
        y = x * torch.full((6,), 2.0, device="tpu")  # returns: the failure happens on the queue
        z = y + 1  # reads the failed result: fails with the same error
    for lost in (y, z):
        for _ in range(2):  # at every use, not once
            with pytest.raises(RuntimeError, match="launched earlier failed.*injected execute failure"):
                lost.cpu()
    with pytest.raises(RuntimeError, match="TORCH_TPU_LAUNCH_BLOCKING=1"):
        y.sum().item()
    # The next synchronization raises it once, as CUDA's does, read or not.
    with pytest.raises(RuntimeError, match="since the last synchronization failed.*injected execute failure"):
        torch_tpu.synchronize()
    torch_tpu.synchronize()
    # What did not depend on it is intact, and the device keeps working.
    assert torch.equal(x.cpu(), x_cpu)
    assert torch.equal((x * 3).cpu(), x_cpu * 3)
    # A tensor whose value was lost takes a new one from the host.
    y.copy_(torch.ones(6))
    assert torch.equal((y + 1).cpu(), torch.full((6,), 2.0))


def test_an_in_place_op_that_fails_on_the_queue_loses_its_target_until_written_from_the_host():
    w = torch.arange(4.0, device="tpu")
    torch_tpu.synchronize()
    with failing_execute("aten::mul_.Tensor"):
        w.mul_(torch.full((4,), 3.0, device="tpu"))
    with pytest.raises(RuntimeError, match="injected execute failure"):
        w.cpu()
    # An in-place op on it reads the lost value (its program takes the old
    # buffer, as every in-place op's does), so it fails too.
    w.add_(1)
    with pytest.raises(RuntimeError, match="injected execute failure"):
        w.cpu()
    with pytest.raises(RuntimeError, match="injected execute failure"):
        torch_tpu.synchronize()
    w.copy_(torch.full((4,), 2.0))
    assert torch.equal((w * 2).cpu(), torch.full((4,), 4.0))


def test_debug_mode_raises_a_failure_on_the_queue_at_the_op():
    x = torch.ones(3, device="tpu")
    with torch_tpu.eager_mode("debug"), failing_execute("aten::mul.Tensor"):
        with pytest.raises(RuntimeError, match="injected execute failure"):
            x * torch.full((3,), 2.0, device="tpu")
    assert torch.equal(x.cpu(), torch.ones(3))
    torch_tpu.synchronize()  # raised once, at the op


def test_synchronize_and_events_wait_for_what_the_queue_holds():
    x = torch.zeros(256, 256, device="tpu")
    with held_queue():
        for _ in range(10):
            x.add_(1)
        event = torch.tpu.Event()
    # Recorded after the release: the event follows every launch before it.
    event.record()
    event.synchronize()
    assert event.query()
    torch_tpu.synchronize()
    assert torch.equal(x.cpu(), torch.full((256, 256), 10.0))


def _python(code, env=None, timeout=180):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_process_exits_cleanly_with_launches_still_queued():
    r = _python("""
        import torch, torch_tpu
        x = torch.zeros(128, 128, device="tpu")
        for _ in range(3000):
            x = (x @ x).tanh() + 1
        print("launched", flush=True)
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "launched" in r.stdout


def test_the_queue_turned_off_runs_launches_on_the_calling_thread():
    r = _python(
        """
        import torch, torch_tpu
        from torch_tpu import _C
        assert not _C._launches_queued()
        x = torch.arange(6.0, device="tpu")
        for _ in range(50):
            x = x * 0.5 + 1
        ref = torch.arange(6.0)
        for _ in range(50):
            ref = ref * 0.5 + 1
        torch.testing.assert_close(x.cpu(), ref)
        _C._inject_fault("aten::mul.Tensor", "execute")
        try:
            x * torch.ones(6, device="tpu")
        except RuntimeError as e:
            print("raised at the call:", "injected execute failure" in str(e))
    """,
        env={"TORCH_TPU_LAUNCH_QUEUE": "0"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised at the call: True" in r.stdout
