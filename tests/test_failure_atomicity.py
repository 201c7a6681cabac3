"""Failure atomicity: an op or program that fails (to compile, to run, or a
raised value check) leaves every tensor as it was before that op, or as it
is after every earlier op, never older; a tensor whose value was never
computed raises when read instead of reading zeros. Out-of-memory raises
torch.OutOfMemoryError at the call that allocates.

Compile and run failures are injected (`torch_tpu._C._inject_fault`): every
program holding the named op fails at that stage, as a compiler bug or a
device out of memory would."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torch_tpu
from torch_tpu import _C

STAGES = ("compile", "run")


@contextlib.contextmanager
def failing(op, stage):
    _C._inject_fault(op, stage)
    try:
        yield
    finally:
        _C._inject_fault("", "")


@pytest.fixture
def fresh_programs():
    """Programs compile anew: a failure injected at compile time must not be
    skipped by a program the op cache already holds."""
    _C._clear_op_cache()


@pytest.mark.parametrize("stage", STAGES)
def test_strict_an_op_that_fails_leaves_its_in_place_target_as_it_was(stage, fresh_programs):
    w = torch.arange(6.0, device="tpu")
    with failing("aten::mul_.Tensor", stage):
        with pytest.raises(RuntimeError, match=f"injected {stage} failure"):
            w.mul_(torch.full((6,), 3.0, device="tpu"))
    assert torch.equal(w.cpu(), torch.arange(6.0))
    w.mul_(torch.full((6,), 3.0, device="tpu"))  # the device keeps working
    assert torch.equal(w.cpu(), torch.arange(6.0) * 3)


@pytest.mark.parametrize("stage", STAGES)
def test_defer_and_fuse_earlier_ops_take_effect_when_a_later_op_fails(stage):
    x_cpu = torch.arange(6.0)
    with torch_tpu.eager_mode("defer_and_fuse"):
        w = x_cpu.to("tpu")
        v = x_cpu.to("tpu")
        torch_tpu.sync()
        w.add_(1)                       # before the failing op: takes effect
        kept = w + 10                   # a new tensor before it: computed
        doomed = w.sin().mul(7)         # the failing op (aten::mul.Tensor)
        w.sub_(100)                     # after it: not applied
        later = v + 5                   # a new tensor after it: never computed
        with failing("aten::mul.Tensor", stage):
            with pytest.raises(RuntimeError, match=r"aten::mul.Tensor") as info:
                torch_tpu.sync()
        assert "the 3 ops before it took effect" in str(info.value)
        assert torch.equal(w.cpu(), x_cpu + 1)
        assert torch.equal(kept.cpu(), x_cpu + 11)
        assert torch.equal(v.cpu(), x_cpu)
        for lost in (doomed, later):
            with pytest.raises(RuntimeError, match="has no value"):
                lost.cpu()
        # The device keeps working, and a tensor that lost its value takes a new one.
        later.copy_(torch.ones(6))
        assert torch.equal((w + later).cpu(), x_cpu + 2)


def test_defer_and_fuse_failure_of_the_first_op_loses_nothing_older():
    with torch_tpu.eager_mode("defer_and_fuse"):
        w = torch.ones(3, device="tpu")
        two = torch.full((3,), 2.0, device="tpu")
        torch_tpu.sync()
        w.mul_(two)
        w.add_(1)
        with failing("aten::mul_.Tensor", "compile"):
            with pytest.raises(RuntimeError, match=r"op 1, aten::mul_.Tensor"):
                w.cpu()
        assert torch.equal(w.cpu(), torch.ones(3))


def test_a_failing_program_is_not_retried_on_the_next_read():
    """The failure is raised once; what ran is kept, and later reads see it."""
    with torch_tpu.eager_mode("defer_and_fuse"):
        w = torch.zeros(2, device="tpu")
        torch_tpu.sync()
        w.add_(1)
        w.exp_()
        with failing("aten::exp_", "run"):
            with pytest.raises(RuntimeError):
                torch_tpu.sync()
        assert torch.equal(w.cpu(), torch.ones(2))
        assert torch.equal(w.cpu(), torch.ones(2))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_an_index_out_of_range_leaves_the_tensor_it_updates_in_place_unchanged(mode):
    with torch_tpu.eager_mode(mode):
        w = torch.zeros(4, device="tpu")
        w.add_(1)  # an earlier op: takes effect
        bad = torch.tensor([0, 9], device="tpu")
        w.index_add_(0, bad, torch.full((2,), 5.0, device="tpu"))
        with pytest.raises(IndexError):
            torch_tpu.sync()
        assert torch.equal(w.cpu(), torch.ones(4))


def test_an_op_that_raises_while_recording_leaves_the_pending_program_intact():
    with torch_tpu.eager_mode("defer_and_fuse"):
        w = torch.ones(3, device="tpu")
        w.add_(2)
        with pytest.raises(RuntimeError):
            w.add_(torch.ones(4, device="tpu"))  # shape mismatch: raises at the call
        w.mul_(2)
        assert torch.equal(w.cpu(), torch.full((3,), 6.0))


# ---- allocation -------------------------------------------------------------

@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_tensor_the_device_cannot_hold_raises_out_of_memory_at_the_call(mode):
    with torch_tpu.eager_mode(mode):
        before = torch.tpu.memory_allocated()
        with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory. Tried to allocate 3.64 TiB"):
            torch.empty(10**12, device="tpu")
        with pytest.raises(torch.OutOfMemoryError):
            torch.zeros(10**6, 10**6, device="tpu")
        assert torch.tpu.memory_allocated() == before
        x = torch.ones(1000, device="tpu")  # the process keeps working
        assert x.sum().item() == 1000


def test_memory_allocated_counts_storages_from_their_allocation_as_cuda_does():
    before = torch.tpu.memory_allocated()
    x = torch.empty(1000, device="tpu")
    assert torch.tpu.memory_allocated() == before + 4000
    del x
    assert torch.tpu.memory_allocated() == before


# ---- processes killed or interrupted ----------------------------------------

def _python(code, env=None, **kwargs):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_sigint_mid_loop_raises_keyboard_interrupt_and_exits_cleanly():
    p = _python("""
        import sys, torch, torch_tpu
        x = torch.ones(64, 64, device="tpu")
        print("ready", flush=True)
        try:
            while True:
                x = (x @ x).tanh()
        except KeyboardInterrupt:
            print("interrupted", x.sum().item() == x.sum().item(), flush=True)
            sys.exit(3)
    """)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3, err
    assert "interrupted True" in out


def test_sigkill_during_cache_writes_leaves_a_cache_the_next_process_can_use(tmp_path):
    cache = str(tmp_path / "cache")
    writer = """
        import torch, torch_tpu
        print("ready", flush=True)
        n = 1
        while True:  # a new program (and disk entry) every step
            torch.ones(n, device="tpu").mul(3).sum().item()
            n += 1
    """
    p = _python(writer, env={"TORCH_TPU_CACHE_DIR": cache})
    assert p.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(os.listdir(cache)) < 5:
        time.sleep(0.2)
    p.kill()
    p.wait(timeout=60)
    reader = _python("""
        import torch, torch_tpu
        for n in range(1, 40):
            assert torch.ones(n, device="tpu").mul(3).sum().item() == 3 * n
        print("ok")
    """, env={"TORCH_TPU_CACHE_DIR": cache})
    out, err = reader.communicate(timeout=300)
    assert reader.returncode == 0, err
    assert out.strip() == "ok"


def test_a_cache_directory_that_cannot_be_created_warns_and_the_device_works(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    cache = tmp_path / "file" / "cache"  # cannot be created, even by root
    p = _python("""
        import torch, torch_tpu
        print(torch.ones(3, device="tpu").add(1).sum().item())
    """, env={"TORCH_TPU_CACHE_DIR": str(cache)})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.strip() == "6.0"
    assert "cannot create the compilation cache directory" in err
