"""torch_tpu.metrics()'s per-mode op counts and the process matmul precision,
which every op reads on its hot path (counters and settings held as atomics,
not behind a lock): exact under threads, reset to absent, visible to every
thread."""

import threading

import torch

import torch_tpu


def lowered_ops_by_mode():
    return torch_tpu.metrics()["ops_by_mode"]


def test_each_lowered_op_counts_once_in_the_mode_it_ran_in():
    a, b = torch.randn(4, 4).to("tpu"), torch.randn(4, 4).to("tpu")
    torch_tpu.synchronize()
    torch_tpu.reset_metrics()
    assert lowered_ops_by_mode() == {}
    for _ in range(3):
        a + b  # replayed from the op cache after its first calls: still counted
    with torch_tpu.modes.eager_mode("defer_and_fuse"):
        (a * b).sum()
    with torch_tpu.modes.eager_mode("debug"):
        a - b
    torch_tpu.synchronize()
    assert lowered_ops_by_mode() == {"strict": 3, "defer_and_fuse": 2, "debug": 1}
    torch_tpu.reset_metrics()
    assert lowered_ops_by_mode() == {}  # a mode without ops since the reset is absent


def test_ops_counted_from_many_threads_add_up_exactly():
    a, b = torch.randn(4, 4).to("tpu"), torch.randn(4, 4).to("tpu")
    torch_tpu.synchronize()
    threads, ops_per_thread = 4, 200
    torch_tpu.reset_metrics()

    def body():
        for _ in range(ops_per_thread):
            a + b

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers)
    torch_tpu.synchronize()
    m = torch_tpu.metrics()
    assert m["ops_by_mode"] == {"strict": threads * ops_per_thread}
    assert m["ops_dispatched"] == threads * ops_per_thread


def test_matmul_precision_set_on_one_thread_is_read_by_every_thread():
    previous = torch_tpu.get_matmul_precision()
    try:
        seen = []
        for precision in ("highest", "high", "medium"):
            torch_tpu.set_matmul_precision(precision)
            reader = threading.Thread(target=lambda: seen.append(torch_tpu.get_matmul_precision()))
            reader.start()
            reader.join(timeout=60)
        assert seen == ["highest", "high", "medium"]
    finally:
        torch_tpu.set_matmul_precision(previous)


def test_a_matmul_replayed_under_another_precision_computes_at_that_precision():
    # The op cache keys a matmul by the precision in force: after "medium"
    # (one bfloat16 pass) replays, "highest" must not replay medium's program.
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    xt, yt = x.to("tpu"), y.to("tpu")
    previous = torch_tpu.get_matmul_precision()
    try:
        torch_tpu.set_matmul_precision("medium")
        for _ in range(3):
            medium = (xt @ yt).cpu()
        torch_tpu.set_matmul_precision("highest")
        highest = (xt @ yt).cpu()
    finally:
        torch_tpu.set_matmul_precision(previous)
    exact = (x.double() @ y.double()).float()
    torch.testing.assert_close(highest, exact, rtol=1e-5, atol=1e-4)
    assert (medium - exact).abs().max() > (highest - exact).abs().max()
