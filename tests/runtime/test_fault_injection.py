"""Fault injection: every way a user or the environment can make the device
fail, and what must happen instead of a wrong answer.

Failure atomicity: an op or program that fails (to compile, to run, or a
raised value check) leaves every tensor as it was before that op, or as it
is after every earlier op, never older; a tensor whose value was never
computed raises when read instead of reading zeros. Out-of-memory raises
torch.OutOfMemoryError at the call that allocates. Compile and run failures
are injected (`torch_tpu._C._inject_fault`): every program holding the named
op fails at that stage, as a compiler bug or a device out of memory would.

Threads (tests/runtime/test_threads.py) are the other half of "never a wrong answer".
"""

import contextlib
import gc
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


def _ones(*sizes, dtype=torch.float32, device):
    return torch.ones(*sizes, dtype=dtype, device=device)


def _set(t, index, value):
    t[index] = value
    return t


# ---- Python numbers that do not fit the tensor's dtype -------------------------------
# CPU converts a Scalar argument with c10::checked_convert and raises
# RuntimeError naming the C++ type. Each of these once failed inside the XLA
# compiler ("integer constant out of range"), became inf, NaN or a clamped
# value, or raised another error.
OVERFLOWING_SCALARS = {
    "full int32 2**40": lambda d: torch.full((3,), 2**40, dtype=torch.int32, device=d),
    "full int64 2**63": lambda d: torch.full((3,), 2**63, dtype=torch.int64, device=d),
    "full uint8 300": lambda d: torch.full((3,), 300, dtype=torch.uint8, device=d),
    "full uint8 -256": lambda d: torch.full((3,), -256, dtype=torch.uint8, device=d),
    "full float32 1e300": lambda d: torch.full((3,), 1e300, device=d),
    "full float16 1e10": lambda d: torch.full((3,), 1e10, dtype=torch.float16, device=d),
    "full bfloat16 1e39": lambda d: torch.full((3,), 1e39, dtype=torch.bfloat16, device=d),
    "fill_ int8 1000": lambda d: _ones(3, dtype=torch.int8, device=d).fill_(1000),
    "fill_ int8 1e3": lambda d: _ones(3, dtype=torch.int8, device=d).fill_(1e3),
    "fill_ int8 inf": lambda d: _ones(3, dtype=torch.int8, device=d).fill_(float("inf")),
    "clamp float32 max=1e300": lambda d: _ones(3, device=d).clamp(max=1e300),
    "clamp float16 max=1e10": lambda d: _ones(3, dtype=torch.float16, device=d).clamp(max=1e10),
    "add int8 alpha=1000": lambda d: torch.add(
        _ones(3, dtype=torch.int8, device=d), _ones(3, dtype=torch.int8, device=d), alpha=1000
    ),
    "add float16 alpha=1e10": lambda d: torch.add(
        _ones(3, dtype=torch.float16, device=d), _ones(3, dtype=torch.float16, device=d), alpha=1e10
    ),
    "masked_fill int8 1000": lambda d: _ones(3, dtype=torch.int8, device=d).masked_fill(
        _ones(3, dtype=torch.bool, device=d), 1000
    ),
    "index_fill float32 1e300": lambda d: _ones(3, device=d).index_fill(0, torch.tensor([0], device=d), 1e300),
    "threshold float16 value=1e10": lambda d: torch.nn.functional.threshold(
        _ones(3, dtype=torch.float16, device=d), 0.5, 1e10
    ),
    "linspace float32 1e300": lambda d: torch.linspace(0, 1e300, 3, device=d),
    "arange 10**19": lambda d: torch.arange(0, 10**19, device=d),
}

# Numbers CPU takes: a negative integer wraps into an unsigned dtype down to
# minus its maximum, bool takes anything, inf and NaN are floats' own values,
# a number in a tensor operand's place is cast like the 0-d tensor CPU wraps
# it into, and CPU's fill_ of one float16 element casts unchecked (which is
# how torch.where and indexing make their value tensors).
FITTING_SCALARS = {
    "full uint8 -1": lambda d: torch.full((3,), -1, dtype=torch.uint8, device=d),
    "full uint8 -255": lambda d: torch.full((3,), -255, dtype=torch.uint8, device=d),
    "full bool 2": lambda d: torch.full((3,), 2, dtype=torch.bool, device=d),
    "full float32 inf": lambda d: torch.full((3,), float("inf"), device=d),
    "full float32 nan": lambda d: torch.full((3,), float("nan"), device=d),
    "full float16 65504": lambda d: torch.full((3,), 65504.0, dtype=torch.float16, device=d),
    "int8 + 1000": lambda d: _ones(3, dtype=torch.int8, device=d) + 1000,
    "int64 + 2**63": lambda d: _ones(3, dtype=torch.int64, device=d) + 2**63,
    "float16 + 1e10": lambda d: _ones(3, dtype=torch.float16, device=d) + 1e10,
    "aten.mul.Scalar float32 1e300": lambda d: torch.ops.aten.mul.Scalar(_ones(3, device=d), 1e300),
    "eq float16 1e10": lambda d: _ones(3, dtype=torch.float16, device=d) == 1e10,
    "where float16 -1e10": lambda d: torch.where(
        torch.tensor([True, False, True], device=d), _ones(3, dtype=torch.float16, device=d), -1e10
    ),
    "setitem float16 1e10": lambda d: _set(_ones(3, dtype=torch.float16, device=d), 1, 1e10),
    "addcmul float16 value=1e10": lambda d: torch.addcmul(
        _ones(3, dtype=torch.float16, device=d),
        _ones(3, dtype=torch.float16, device=d),
        _ones(3, dtype=torch.float16, device=d) * 0,
        value=1e10,
    ),
    "full float32 2**63": lambda d: torch.full((3,), 2**63, dtype=torch.float32, device=d),
    "linspace float16 of one step 1e10": lambda d: torch.linspace(1e10, 0, 1, dtype=torch.float16, device=d),
}


# Numbers past a dtype that torch releases treat differently: torch 2.14
# takes a float below an integer dtype's max + 1 (127.5 fills int8 with 127,
# 2.13 refused it); torch 2.15 drops a clamp bound of integers that clamps
# nothing (int8's max=1000, uint8's min=-1, which 2.13 wrapped to 255) and
# refuses the other side in its own words. The tpu does what the installed
# torch does on CPU.
def _int8_range(d):
    return torch.tensor([-128, -5, 0, 5, 127], dtype=torch.int8, device=d)


SCALARS_RELEASES_DIFFER_ON = {
    "fill_ int8 127.5": lambda d: _ones(3, dtype=torch.int8, device=d).fill_(127.5),
    "fill_ int8 -128.5": lambda d: _ones(3, dtype=torch.int8, device=d).fill_(-128.5),
    "full int64 2.0**63": lambda d: torch.full((3,), 2.0**63, dtype=torch.int64, device=d),
    "clamp int8 max=1000": lambda d: _int8_range(d).clamp(max=1000),
    "clamp int8 max=-1000": lambda d: _int8_range(d).clamp(max=-1000),
    "clamp int8 min=1000": lambda d: _int8_range(d).clamp(min=1000),
    "clamp int8 -1000..3": lambda d: _int8_range(d).clamp(-1000, 3),
    "clamp_ int8 max=1000": lambda d: _int8_range(d).clamp_(max=1000),
    "clamp_min int8 -1000": lambda d: torch.clamp_min(_int8_range(d), -1000),
    "clamp_max int8 1000": lambda d: torch.clamp_max(_int8_range(d), 1000),
    "clamp uint8 min=-1": lambda d: torch.tensor([0, 5, 255], dtype=torch.uint8, device=d).clamp(min=-1),
    "clamp uint8 max=300": lambda d: torch.tensor([0, 5, 255], dtype=torch.uint8, device=d).clamp(max=300),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(SCALARS_RELEASES_DIFFER_ON))
def test_scalar_past_the_dtype_does_what_this_torchs_cpu_does(case, mode):
    fn = SCALARS_RELEASES_DIFFER_ON[case]
    try:
        want, cpu_err = fn("cpu"), None
    except RuntimeError as err:
        want, cpu_err = None, err
    with torch_tpu.eager_mode(mode):
        if cpu_err is None:
            torch.testing.assert_close(fn("tpu").cpu(), want)
            return
        with pytest.raises(RuntimeError) as tpu_err:
            fn("tpu").cpu()
        assert str(tpu_err.value) == str(cpu_err)
        torch.testing.assert_close((_ones(2, device="tpu") * 3).cpu(), torch.full((2,), 3.0))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(OVERFLOWING_SCALARS))
def test_scalar_overflowing_the_dtype_raises_cpus_error(case, mode):
    fn = OVERFLOWING_SCALARS[case]
    with pytest.raises(RuntimeError) as cpu_err:
        fn("cpu")
    assert "without overflow" in str(cpu_err.value)
    with torch_tpu.eager_mode(mode):
        with pytest.raises(RuntimeError) as tpu_err:
            fn("tpu").cpu()  # a host read: DeferAndFuse runs what it recorded
        assert str(tpu_err.value) == str(cpu_err.value)
        # Nothing of the refused op is left pending.
        torch.testing.assert_close((_ones(2, device="tpu") * 3).cpu(), torch.full((2,), 3.0))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(FITTING_SCALARS))
def test_scalar_that_cpu_takes_computes_cpus_value(case, mode):
    fn = FITTING_SCALARS[case]
    want = fn("cpu")
    with torch_tpu.eager_mode(mode):
        got = fn("tpu").cpu()
    torch.testing.assert_close(got, want, equal_nan=True)


def test_scalar_overflowing_the_dtype_raises_when_an_op_cache_replay_would_feed_it():
    # fill_'s and add's floats are inputs of their captured programs
    # (csrc/exec/op_cache.h): a replay feeds each call's own number.
    torch_tpu._C._clear_op_cache()
    x = torch.zeros(3, device="tpu")
    h = torch.zeros(3, dtype=torch.float16, device="tpu")
    with torch_tpu.eager_mode("strict"):
        before = torch_tpu.metrics()["op_cache_replays"]
        for v in (2.5, 3.5, 4.5):
            x.fill_(v)
            h.add_(h, alpha=v)
        torch_tpu.sync()
        assert torch_tpu.metrics()["op_cache_replays"] - before >= 2  # the next calls would replay
        with pytest.raises(RuntimeError, match="^value cannot be converted to type float without overflow$"):
            x.fill_(1e300)
        with pytest.raises(RuntimeError, match="^value cannot be converted to type c10::Half without overflow$"):
            h.add_(h, alpha=1e10)
        torch.testing.assert_close(x.cpu(), torch.full((3,), 4.5))  # untouched by the refused call
        x.fill_(5.5)
        torch.testing.assert_close(x.cpu(), torch.full((3,), 5.5))


def test_scalar_overflowing_the_dtype_raises_when_a_compiled_function_is_called_again():
    torch._dynamo.reset()
    try:
        f = torch.compile(lambda t, v: t.clamp(max=v) * 2, backend="tpu")
        x = torch.arange(4.0)
        for v in (2.5, 2.5, 1.5):
            torch.testing.assert_close(f(x.to("tpu"), v).cpu(), x.clamp(max=v) * 2)
        with pytest.raises(RuntimeError) as cpu_err:
            x.clamp(max=1e300)
        with pytest.raises(RuntimeError) as tpu_err:
            f(x.to("tpu"), 1e300).cpu()
        assert str(cpu_err.value) in str(tpu_err.value)
    finally:
        torch._dynamo.reset()


# ---- exception types CPU raises -----------------------------------------------------
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "debug"])
@pytest.mark.parametrize("op", ["index_add", "index_add_"])
def test_index_add_out_of_range_raises_index_error_as_cpu_does(op, mode):
    def fn(d):
        return getattr(torch.zeros(3, device=d), op)(0, torch.tensor([5], device=d), torch.ones(1, device=d))

    with pytest.raises(IndexError) as cpu_err:
        fn("cpu")
    with torch_tpu.eager_mode(mode):
        with pytest.raises(IndexError) as tpu_err:
            fn("tpu").cpu()  # Debug raises at the op, the other modes by this host read
    assert str(cpu_err.value) in str(tpu_err.value)


EXTREMES_OF_EMPTY = {
    "argmax": lambda d: torch.zeros(0, device=d).argmax(),
    "argmin": lambda d: torch.zeros(0, device=d).argmin(),
    "argmax keepdim": lambda d: torch.zeros(0, device=d).argmax(keepdim=True),
    "argmax dim": lambda d: torch.zeros(0, 3, device=d).argmax(0),
    "argmin dim": lambda d: torch.zeros(0, 3, device=d).argmin(-2),
    "amax": lambda d: torch.zeros(0, device=d).amax(),
    "amin": lambda d: torch.zeros(0, device=d).amin(),
    "aminmax": lambda d: torch.aminmax(torch.zeros(0, device=d)),
    "aminmax dim": lambda d: torch.aminmax(torch.zeros(0, 3, device=d), dim=0),
}


@pytest.mark.parametrize("case", sorted(EXTREMES_OF_EMPTY))
def test_extremes_of_an_empty_tensor_raise_cpus_error(case):
    # The Python meta kernels raise RuntimeError for argmax and argmin, call
    # argmin "argmax", and word amax, amin and aminmax otherwise.
    fn = EXTREMES_OF_EMPTY[case]
    with pytest.raises((IndexError, RuntimeError)) as cpu_err:
        fn("cpu")
    with pytest.raises(cpu_err.type) as tpu_err:
        fn("tpu")
    assert str(tpu_err.value) == str(cpu_err.value)


# ---- NaN and Inf in Debug mode --------------------------------------------------------
# TORCH_TPU_CHECK_NANS names the op whose result holds NaN or Inf; casts and
# the data-dependent ops (built from other ops, named as the op called) produce results too.
NAN_PRODUCERS = {
    "cast to float16": (lambda: torch.full((3,), 1e6, device="tpu").to(torch.float16), "Float to Half"),
    "cast to bfloat16": (
        lambda: torch.full((3,), 1e39, dtype=torch.float64, device="tpu").to(torch.bfloat16),
        "Double to BFloat16",
    ),
    "cast from the host": (lambda: torch.full((3,), 1e6).to("tpu", torch.float16), "Float to Half"),
    "unique": (lambda: torch.tensor([1.0, float("nan")]).to("tpu").unique(), "aten::_unique2"),
    "bincount": (
        lambda: torch.bincount(torch.tensor([0, 1]).to("tpu"), torch.tensor([1.0, float("inf")]).to("tpu")),
        "aten::bincount",
    ),
    "unique_consecutive": (
        lambda: torch.tensor([1.0, float("inf")]).to("tpu").unique_consecutive(),
        "aten::unique_consecutive",
    ),
}


@pytest.fixture
def checking_nans():
    previous = torch_tpu.check_nans(True)
    try:
        with torch_tpu.eager_mode("debug"):
            yield
    finally:
        torch_tpu.check_nans(previous)


@pytest.mark.parametrize("case", sorted(NAN_PRODUCERS))
def test_debug_nan_check_names_the_cast_or_host_computed_op_that_produced_it(checking_nans, case):
    fn, names = NAN_PRODUCERS[case]
    with pytest.raises(RuntimeError, match="TORCH_TPU_CHECK_NANS") as err:
        fn()
    assert names in str(err.value)


def test_debug_nan_check_passes_finite_casts_and_same_dtype_copies(checking_nans):
    x = torch.full((3,), 1e3, device="tpu")
    torch.testing.assert_close(x.to(torch.float16).cpu(), torch.full((3,), 1e3, dtype=torch.float16))
    # A copy makes no new values: uploading a NaN is not an op producing one.
    torch.tensor([float("nan")]).to("tpu").clone().cpu()


# ---- the compilation cache's directory ------------------------------------------------
def _run_with_cache_dir(cache_dir):
    code = textwrap.dedent("""
        import torch, torch_tpu
        print("VALUE", (torch.arange(4.0).to("tpu") * 2).sum().item())
    """)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "VALUE 12.0" in r.stdout  # the memory tier still serves
    return r.stderr


def test_a_regular_file_as_the_cache_directory_warns_and_turns_the_disk_tier_off(tmp_path):
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file")
    stderr = _run_with_cache_dir(not_a_dir)
    assert "compilation cache directory (it is not a directory); disk tier off" in stderr
    assert not_a_dir.read_text() == "a file"


def test_a_cache_directory_that_cannot_be_created_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    stderr = _run_with_cache_dir(blocker / "cache")
    assert "compilation cache directory (cannot create it); disk tier off" in stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_cache_directory_warns(tmp_path):
    read_only = tmp_path / "cache"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        stderr = _run_with_cache_dir(read_only)
    finally:
        read_only.chmod(0o755)
    assert "compilation cache directory (it is not writable); disk tier off" in stderr


# ---- failure atomicity ---------------------------------------------------------

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
        w.add_(1)  # before the failing op: takes effect
        kept = w + 10  # a new tensor before it: computed
        doomed = w.sin().mul(7)  # the failing op (aten::mul.Tensor)
        w.sub_(100)  # after it: not applied
        later = v + 5  # a new tensor after it: never computed
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


def test_strict_a_fault_fires_on_the_program_the_op_cache_replays():
    """A signature captured earlier replays its program with no lookup; a
    run failure there is the same failure as on its first launch, and
    leaves the in-place target as it was."""
    w = torch.arange(7.0, device="tpu")
    three = torch.full((7,), 3.0, device="tpu")
    w.mul_(three)  # captured
    w.mul_(three)  # replayed
    torch_tpu.sync()
    before = torch_tpu.metrics()
    assert before["op_cache_replays"] >= 1
    with failing("aten::mul_.Tensor", "run"):
        with pytest.raises(RuntimeError, match="injected run failure of a program holding aten::mul_.Tensor"):
            w.mul_(three)
    assert torch_tpu.metrics()["op_cache_captures"] == before["op_cache_captures"]  # a replay, not a new capture
    assert torch.equal(w.cpu(), torch.arange(7.0) * 9)
    w.mul_(three)  # the device keeps working, and the replay with it
    assert torch.equal(w.cpu(), torch.arange(7.0) * 27)
    assert torch_tpu.metrics()["op_cache_replays"] > before["op_cache_replays"]


def test_compiled_a_fault_fires_on_a_replayed_graph_and_leaves_its_inputs_as_they_were():
    torch._dynamo.reset()
    step = torch.compile(lambda w, t: w.mul_(t).add_(1), backend="tpu")
    w = torch.arange(4.0, device="tpu")
    two = torch.full((4,), 2.0, device="tpu")
    step(w, two)  # captured: 2w + 1
    step(w, two)  # replayed: 4w + 3
    assert torch_tpu.metrics()["graph_replays"] >= 1
    traces = torch_tpu.compile.stats()["graph_traces"]
    with failing("aten::add.Tensor", "run"):
        with pytest.raises(RuntimeError, match="injected run failure of a program holding aten::add.Tensor"):
            step(w, two)
    assert torch_tpu.compile.stats()["graph_traces"] == traces  # the replay failed, nothing was traced anew
    assert torch.equal(w.cpu(), torch.arange(4.0) * 4 + 3)
    step(w, two)
    assert torch.equal(w.cpu(), torch.arange(4.0) * 8 + 7)


def test_defer_and_fuse_a_fault_fires_in_a_replayed_step_and_the_ops_before_it_take_effect():
    """A step replayed as its remembered program (exec/step_replay.h) that
    fails to run is recovered as a recorded flush's failure is: the ops
    before the failing one take effect, the failing one and the ops after
    it do not, and the next step replays again."""
    with torch_tpu.eager_mode("defer_and_fuse"):
        w = torch.zeros(5, device="tpu")
        torch_tpu.sync()

        def step():
            w.add_(1)
            w.mul_(2)
            w.sub_(1)
            torch_tpu.sync()

        step()  # recorded: (0 + 1) * 2 - 1 = 1
        step()  # replayed: 3
        replays = torch_tpu.metrics()["step_replays"]
        assert replays >= 1
        replayed_ops = torch_tpu.metrics()["step_replay_ops"]
        with failing("aten::mul_.Tensor", "run"):
            with pytest.raises(RuntimeError, match=r"op 2, aten::mul_.Tensor") as info:
                step()
        assert torch_tpu.metrics()["step_replay_ops"] == replayed_ops + 3  # the failing step was a replay
        assert "the 1 ops before it took effect" in str(info.value)
        assert torch.equal(w.cpu(), torch.full((5,), 4.0))  # 3 + 1, then neither mul_ nor sub_
        step()
        assert torch.equal(w.cpu(), torch.full((5,), 9.0))
        assert torch_tpu.metrics()["step_replays"] > replays


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
    # Earlier tests' tensors in reference cycles must not be collected
    # between the readings (it happened once under pytest-xdist).
    gc.collect()
    gc.disable()
    try:
        before = torch.tpu.memory_allocated()
        x = torch.empty(1000, device="tpu")
        assert torch.tpu.memory_allocated() == before + 4000
        del x
        assert torch.tpu.memory_allocated() == before
    finally:
        gc.enable()


def _mem_available():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))


# The scenario holds `held` bytes of resident CPU memory, so what the host
# has available falls, then asks tpu for more than is available but less
# than the device's total (what the check compared against before, so that
# the kernel's OOM killer took the process). torch.empty takes no host
# memory until written, so even where the check were missing nothing past
# what is free would be touched.
HOST_MEMORY_SCENARIO = """
    import torch, torch_tpu

    def mem_available():
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))

    with torch_tpu.eager_mode({mode!r}):
        kept = torch.arange(1000.0, device="tpu") * 2
        assert kept.sum().item() == 999000.0
        held = torch.ones({held} // 4)  # written, so resident
        total = torch.tpu.mem_get_info()[1]
        available = mem_available()
        ask = (available + total) // 2
        assert available < ask < total - torch.tpu.memory_allocated(), (available, ask, total)
        try:
            torch.empty(ask // 4, device="tpu")
            print("one allocation: no error")
        except torch.OutOfMemoryError as e:
            print("one allocation:", str(e).split(".")[0])
        # Many smaller ones, never written, reach the same bound.
        small, pieces = 8 * 2**20, []
        try:
            while len(pieces) * small < ask:
                pieces.append(torch.empty(small, dtype=torch.uint8, device="tpu"))
            print("small allocations: no error")
        except torch.OutOfMemoryError:
            print("small allocations: raised", len(pieces) * small <= mem_available() + 2**30)
        del pieces
        free, total_now = torch.tpu.mem_get_info()
        print("mem_get_info", free <= mem_available() + 2**30, total_now == total)
        print("intact", (kept + 1).sum().item())
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_an_allocation_past_what_the_host_has_available_raises_out_of_memory(mode):
    held = 3 * 2**30
    if _mem_available() < 3 * held:
        pytest.skip(f"needs {3 * held} bytes available, the machine has {_mem_available()}")
    code = textwrap.dedent(HOST_MEMORY_SCENARIO.format(mode=mode, held=held))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        "one allocation: tpu out of memory",
        "small allocations: raised True",
        "mem_get_info True True",
        "intact 1000000.0",
    ], r.stdout + r.stderr[-3000:]


# ---- processes killed or interrupted ----------------------------------------


def _interruptible():
    # As started from a terminal: a runner that starts the suite in the
    # background (a shell's `&`) ignores SIGINT, the child would inherit
    # that, and Python installs its KeyboardInterrupt handler only where
    # SIGINT has its default action.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _python(code, env=None, **kwargs):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
        **kwargs,
    )


def test_sigint_mid_loop_raises_keyboard_interrupt_and_exits_cleanly():
    # The loop is warm before the signal: the first op imports much of
    # torch (Dynamo, sympy) and frees those imports' module locks later,
    # and CPython drops a KeyboardInterrupt raised in a weakref callback
    # ("Exception ignored in: <function _get_module_lock.<locals>.cb>").
    p = _python("""
        import gc, sys, torch, torch_tpu
        x = torch.ones(64, 64, device="tpu")
        x = (x @ x).tanh()
        x.sum().item()
        gc.collect()
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
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError(f"SIGINT did not stop the loop:\n{p.communicate()[1][-3000:]}") from None
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
    reader = _python(
        """
        import torch, torch_tpu
        for n in range(1, 40):
            assert torch.ones(n, device="tpu").mul(3).sum().item() == 3 * n
        print("ok")
    """,
        env={"TORCH_TPU_CACHE_DIR": cache},
    )
    out, err = reader.communicate(timeout=300)
    assert reader.returncode == 0, err
    assert out.strip() == "ok"
