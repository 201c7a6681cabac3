"""The thread model: any number of threads may compute on tpu, synchronize,
switch eager modes and run compiled graphs at once, and every result equals
what one thread alone computes.

The eager mode, pending DeferAndFuse programs and graph captures are per
thread; storages are shared, and a thread reading a storage that another
thread's pending program writes runs that program first.
"""

import os
import queue
import random
import threading
import time

import pytest
import torch

import torch_tpu

MODES = ("strict", "defer_and_fuse", "debug")


def run_threads(targets, timeout=120, stop_on_error=None):
    """Runs each callable on its own thread; re-raises the first failure.
    `stop_on_error`: an Event the threads loop on, cleared on a failure."""
    errors = []

    def wrap(fn):
        def body():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported to the test thread
                errors.append(e)
                if stop_on_error is not None:
                    stop_on_error.clear()  # the other threads stop waiting for this one

        return body

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish (deadlock?)"
    if errors:
        raise errors[0]


def matmul_tanh_step(w, x):
    """One step of the issue's loop: a matmul, tanh, and an in-place update."""
    y = torch.tanh(x @ w)
    w.mul_(0.5).add_(y.t() @ x * 0.01)
    return y.sum()


def test_the_eager_mode_is_the_calling_threads_own():
    seen = {}

    def other():
        seen["start"] = torch_tpu.get_eager_mode()
        torch_tpu.set_eager_mode("defer_and_fuse")
        seen["after_set"] = torch_tpu.get_eager_mode()

    main_mode = torch_tpu.get_eager_mode()
    run_threads([other])
    assert seen == {"start": "strict", "after_set": "defer_and_fuse"}
    assert torch_tpu.get_eager_mode() == main_mode == "strict"


def test_switching_modes_on_one_thread_never_changes_another_threads_values():
    deadline = time.monotonic() + 3.0
    wrong = []
    computing = threading.Event()
    computing.set()

    def compute():
        torch.manual_seed(1)
        w_cpu = torch.randn(16, 16) * 0.1
        x_cpu = torch.randn(8, 16)
        w, x = w_cpu.to("tpu"), x_cpu.to("tpu")
        steps = 0
        while time.monotonic() < deadline or steps < 20:
            steps += 1
            expected = matmul_tanh_step(w_cpu, x_cpu)
            got = matmul_tanh_step(w, x)
            if not torch.allclose(got.cpu(), expected, rtol=1e-4, atol=1e-4):
                wrong.append((got.item(), expected.item()))
            assert torch.allclose(w.cpu(), w_cpu, rtol=1e-4, atol=1e-5)
        computing.clear()

    def switch():
        modes = list(MODES)
        while computing.is_set():
            for mode in modes:
                torch_tpu.set_eager_mode(mode)
                torch.ones(4, device="tpu").add_(1).sum().item()

    run_threads([compute, switch], stop_on_error=computing)
    assert wrong == []


def test_threads_in_defer_and_fuse_never_fuse_each_others_ops():
    """Two threads running the same loop in DeferAndFuse each compile their
    own program once; neither's ops land in the other's program."""
    start = threading.Barrier(2)
    results = {}

    def loop(name, seed):
        torch_tpu.set_eager_mode("defer_and_fuse")
        torch.manual_seed(seed)
        w_cpu = torch.randn(16, 16) * 0.1
        x_cpu = torch.randn(8, 16)
        w, x = w_cpu.to("tpu"), x_cpu.to("tpu")
        losses, expected = [], []
        for step in range(40):
            if step == 5:
                start.wait()  # both warmed up: measure from here
                if name == "a":
                    results["compiles_before"] = torch_tpu.metrics()["compiles"]
            expected.append(matmul_tanh_step(w_cpu, x_cpu).item())
            losses.append(matmul_tanh_step(w, x).item())
        results[name] = (losses, expected)

    run_threads([lambda: loop("a", 1), lambda: loop("b", 2)])
    for name in ("a", "b"):
        losses, expected = results[name]
        assert losses == pytest.approx(expected, rel=1e-4, abs=1e-4)
    # After the warm-up each thread's fused step is the same program every
    # time: interleaved threads sharing one pending program compiled a new
    # mixture almost every step.
    assert torch_tpu.metrics()["compiles"] - results["compiles_before"] <= 2


def test_synchronize_from_another_thread_while_one_computes_in_place():
    deadline = time.monotonic() + 2.0
    computing = threading.Event()
    computing.set()

    def compute():
        w = torch.zeros(64, 64, device="tpu")
        n = 0
        while time.monotonic() < deadline or n < 200:
            w.add_(1)  # each step donates the previous buffer
            n += 1
        computing.clear()
        assert w[0, 0].item() == n

    def synchronize():
        while computing.is_set():
            torch.tpu.synchronize()
            torch_tpu.sync()

    run_threads([compute, synchronize, synchronize], stop_on_error=computing)


@pytest.mark.parametrize("producer_mode", ["defer_and_fuse", "strict"])
@pytest.mark.parametrize("consumer_mode", ["defer_and_fuse", "strict"])
def test_a_tensor_handed_to_another_thread_carries_its_pending_writes(producer_mode, consumer_mode):
    handoff, done = queue.Queue(), queue.Queue()
    x_cpu = torch.arange(12.0).reshape(3, 4)
    w_cpu = torch.ones(3, 4)

    def producer():
        torch_tpu.set_eager_mode(producer_mode)
        x, w = x_cpu.to("tpu"), w_cpu.to("tpu")
        y = x * 2 + 1  # pending in DeferAndFuse: no buffer yet
        w.add_(x)  # an in-place write, pending too
        handoff.put((y, w))
        done.get(timeout=60)  # keep the thread (and its pending program) alive until read

    def consumer():
        torch_tpu.set_eager_mode(consumer_mode)
        y, w = handoff.get(timeout=60)
        z = y + w
        w.mul_(3)
        assert torch.equal(z.cpu(), (x_cpu * 2 + 1) + (w_cpu + x_cpu))
        assert torch.equal(w.cpu(), (w_cpu + x_cpu) * 3)
        done.put(True)

    run_threads([producer, consumer])


def test_a_pending_program_reads_a_storage_another_thread_rewrote_anew():
    """Ops recorded before another thread's write see the old value, ops
    recorded after it the new one, as in program order across threads."""
    torch_tpu.set_eager_mode("defer_and_fuse")
    try:
        w = torch.ones(4, device="tpu")
        torch_tpu.sync()
        before = w * 1  # pending: reads w's current buffer

        def writer():
            w.add_(10)  # Strict on its own thread

        run_threads([writer])
        after = w * 1
        assert torch.equal(before.cpu(), torch.ones(4))
        assert torch.equal(after.cpu(), torch.full((4,), 11.0))
    finally:
        torch_tpu.set_eager_mode("strict")


def test_a_compiled_graph_tracing_on_one_thread_leaves_other_threads_mode_alone():
    deadline = time.monotonic() + 2.0
    modes_seen = set()

    @torch.compile(backend="tpu", dynamic=False)
    def f(a):
        return (a * 2).sin().sum()

    def compile_many_shapes():
        n = 1
        while time.monotonic() < deadline or n < 4:
            a_cpu = torch.randn(n)
            assert torch.allclose(f(a_cpu.to("tpu")).cpu(), (a_cpu * 2).sin().sum(), atol=1e-4)
            n += 1

    def watch():
        x = torch.ones(8, device="tpu")
        n = 0
        while time.monotonic() < deadline or n < 20:
            modes_seen.add(torch_tpu.get_eager_mode())
            x.add_(1)
            n += 1
        assert x[0].item() == 1 + n

    run_threads([compile_many_shapes, watch])
    assert modes_seen == {"strict"}


def test_many_threads_mixing_modes_compiled_graphs_syncs_and_shared_tensors():
    """The stress test: 4 threads, each with its own small model, choose at
    random between Strict, DeferAndFuse and Debug steps, compiled steps, mode
    switches and synchronizations, for a bounded time, comparing every result
    with CPU; meanwhile they increment one shared tensor under a lock, each
    in its own mode, and it must end at the count of increments.
    TORCH_TPU_STRESS_SECONDS runs it longer (scripts/stress_threads.sh runs
    it 20 times in a row)."""
    deadline = time.monotonic() + float(os.environ.get("TORCH_TPU_STRESS_SECONDS", "4"))
    lock = threading.Lock()
    shared = torch.zeros(4, device="tpu")
    increments = [0]

    @torch.compile(backend="tpu", dynamic=False)
    def compiled_step(w, x):
        return torch.tanh(x @ w).sum(0)

    def worker(seed):
        rng = random.Random(seed)
        torch.manual_seed(seed)
        w_cpu = torch.randn(8, 8) * 0.2
        x_cpu = torch.randn(4, 8)
        w, x = w_cpu.to("tpu"), x_cpu.to("tpu")
        steps = 0
        while time.monotonic() < deadline or steps < 30:
            steps += 1
            action = rng.choice(("strict", "defer_and_fuse", "debug", "compiled", "sync", "increment"))
            if action in MODES:
                torch_tpu.set_eager_mode(action)
                expected = matmul_tanh_step(w_cpu, x_cpu)
                got = matmul_tanh_step(w, x)
                assert torch.allclose(got.cpu(), expected, rtol=1e-4, atol=1e-4), action
            elif action == "compiled":
                got = compiled_step(w, x)
                assert torch.allclose(got.cpu(), torch.tanh(x_cpu @ w_cpu).sum(0), rtol=1e-4, atol=1e-4)
            elif action == "sync":
                rng.choice((torch.tpu.synchronize, torch_tpu.sync))()
            else:
                with lock:
                    shared.add_(1)  # pending in this thread's program if it defers
                    increments[0] += 1
        assert torch.allclose(w.cpu(), w_cpu, rtol=1e-4, atol=1e-5)

    run_threads([lambda s=s: worker(s) for s in range(4)])
    assert torch.equal(shared.cpu(), torch.full((4,), float(increments[0])))
