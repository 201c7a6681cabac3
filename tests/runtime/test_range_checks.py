"""Index range checks read by the host (csrc/exec/program_launch.cpp): an op
that indexes (index_select, gather, embedding) runs with its indices clamped
and returns a flag of whether they were in range, which the host reads where
it waits anyway: at a host read or a synchronize, as CUDA's device-side
asserts surface. Every pending flag is read there, in the same wait as the
read's own bytes, and the read's bytes are handed out only if every flag
passed. A loop that never waits reads the older half of its flags once more
than 4096 are pending, not waiting for the programs it just launched.
"""

import pytest
import torch

import torch_tpu
from torch_tpu import _C

MAX_PENDING = 4096  # kMaxPendingChecks


def _index_selects(x, idx, n):
    return [torch.index_select(x, 0, idx) for _ in range(n)]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_host_read_reads_its_bytes_and_every_pending_check_in_one_wait(mode):
    x_cpu, idx_cpu = torch.randn(6, 3), torch.tensor([5, 0, 2, 2])
    with torch_tpu.eager_mode(mode):
        x, idx = x_cpu.to("tpu"), idx_cpu.to("tpu")
        torch_tpu.synchronize()
        torch_tpu.reset_metrics()
        ys = _index_selects(x, idx, 7)
        out = (ys[0] + ys[-1]).cpu()
        m = torch_tpu.metrics()
    torch.testing.assert_close(out, 2 * x_cpu.index_select(0, idx_cpu))
    # Seven flags (one byte each) and the 48 bytes read, in one wait: the
    # flags used to be read one wait each, before the read's own.
    assert m["host_waits"] == 1
    assert m["bytes_to_host"] == out.nbytes + 7


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_a_bad_index_among_many_pending_checks_raises_cpus_error_and_the_next_read_works(mode):
    x_cpu = torch.randn(6, 3)
    with pytest.raises(IndexError) as cpu_err:
        torch.index_select(x_cpu, 0, torch.tensor([1, 6]))
    select = torch.compile(torch.index_select, backend="tpu") if mode == "compiled" else torch.index_select
    try:
        with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
            x = x_cpu.to("tpu")
            good, bad = torch.tensor([1, 2]).to("tpu"), torch.tensor([1, 6]).to("tpu")
            before = [select(x, 0, good) for _ in range(5)]
            select(x, 0, bad)
            after = [select(x, 0, good) for _ in range(5)]
            with pytest.raises(IndexError) as tpu_err:
                after[-1].cpu()  # its own bytes are fine; a pending check is not
            assert str(cpu_err.value) in str(tpu_err.value)
            # Read once: the flags are gone, and reads work again.
            torch.testing.assert_close(before[0].cpu(), x_cpu[[1, 2]])
            torch.testing.assert_close(after[-1].cpu(), x_cpu[[1, 2]])
    finally:
        torch._dynamo.reset()


def test_a_loop_that_never_waits_reads_the_older_half_of_its_checks_at_the_bound():
    # Reading every flag at the bound would wait for the program just
    # launched, draining the device's queue in a loop that never waits.
    x_cpu, idx_cpu = torch.randn(6, 3), torch.tensor([4, 1])
    with torch_tpu.eager_mode("strict"):
        x, idx = x_cpu.to("tpu"), idx_cpu.to("tpu")
        torch_tpu.synchronize()
        torch_tpu.reset_metrics()
        ys = _index_selects(x, idx, MAX_PENDING)
        assert torch_tpu.metrics()["host_waits"] == 0
        ys += _index_selects(x, idx, 1)  # the 4097th flag passes the bound
        m = torch_tpu.metrics()
        assert m["host_waits"] == 1
        assert m["bytes_to_host"] == (MAX_PENDING + 1) // 2  # the older half, the newer kept
        out = ys[-1].cpu()
        m = torch_tpu.metrics()
    torch.testing.assert_close(out, x_cpu[[4, 1]])
    assert m["host_waits"] == 2
    assert m["bytes_to_host"] == MAX_PENDING + 1 + out.nbytes  # the rest, with the read


@pytest.mark.skipif(not _C._launches_queued(), reason="TORCH_TPU_LAUNCH_QUEUE=0: a failed launch raises at its op")
@pytest.mark.skipif(torch_tpu.get_eager_mode() == "debug", reason="TORCH_TPU_LAUNCH_BLOCKING=1: raises at each op")
def test_an_index_out_of_range_raises_before_the_failure_of_a_later_program_the_read_waits_for():
    x_cpu = torch.arange(6.0)
    with pytest.raises(IndexError) as cpu_err:
        torch.index_select(x_cpu, 0, torch.tensor([7]))
    with torch_tpu.eager_mode("strict"):
        x, bad = x_cpu.to("tpu"), torch.tensor([7]).to("tpu")
        torch_tpu.synchronize()
        torch.index_select(x, 0, bad)
        # An op no other test injects a failure into: a replay from the op
        # cache launches without the op's name, so the fault would not fire
        # on a signature another test captured first (nor theirs after this).
        _C._inject_fault("aten::hypot", "execute")
        try:
            y = torch.hypot(x, torch.full((6,), 2.0, device="tpu"))  # fails on the queue
        finally:
            _C._inject_fault("", "")
        # The read waits for both; the index comes first, as it did when the
        # flags were read before the read's own bytes.
        with pytest.raises(IndexError) as tpu_err:
            y.cpu()
        assert str(cpu_err.value) in str(tpu_err.value)
        with pytest.raises(RuntimeError, match="injected execute failure"):
            y.cpu()
        with pytest.raises(RuntimeError, match="injected execute failure"):
            torch_tpu.synchronize()
        torch.testing.assert_close(torch.hypot(x, x).cpu(), torch.hypot(x_cpu, x_cpu))
