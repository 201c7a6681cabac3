"""Debug mode: synchronous, errors raised at the op that made them."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu

# Each reads or writes a (3, 4) tensor at two row indices.
INDEXING_OPS = {
    "index": lambda t, i: t[i],
    "gather": lambda t, i: torch.gather(t, 0, i.view(2, 1).expand(2, 4)),
    "index_select": lambda t, i: torch.index_select(t, 0, i),
    "embedding": lambda t, i: torch.nn.functional.embedding(i, t),
    "scatter": lambda t, i: t.scatter(0, i.view(2, 1).expand(2, 4), 1.0),
    "index_put": lambda t, i: t.index_put((i,), torch.tensor(1.0, device=t.device)),
}


@pytest.fixture
def debug_mode():
    with torch_tpu.eager_mode("debug"):
        yield


def test_mode_api_switches_and_restores():
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("debug"):
        assert torch_tpu.get_eager_mode() == "debug"
    assert torch_tpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError):
        torch_tpu.set_eager_mode("fast")


def test_launch_blocking_env_selects_debug():
    r = subprocess.run(
        [sys.executable, "-c", "import torch_tpu; print(torch_tpu.get_eager_mode())"],
        capture_output=True,
        text=True,
        env=dict(os.environ, TORCH_TPU_LAUNCH_BLOCKING="1"),
    )
    assert r.stdout.strip() == "debug", r.stderr


def test_debug_results_match_strict(debug_mode):
    x = torch.randn(4, 5)
    torch.testing.assert_close((x.tpu() * 2 + 1).softmax(-1).cpu(), (x * 2 + 1).softmax(-1))


@pytest.mark.parametrize("case", sorted(INDEXING_OPS))
def test_out_of_range_index_raises_at_the_op(debug_mode, case):
    x = torch.randn(3, 4)
    bad = torch.tensor([0, 7])
    fn = INDEXING_OPS[case]
    with pytest.raises(Exception) as cpu_err:
        fn(x, bad)
    with pytest.raises(cpu_err.type):
        fn(x.tpu(), bad.tpu())


def test_nan_check_names_the_op(debug_mode):
    previous = torch_tpu.check_nans(True)
    try:
        x = torch.rand(4).tpu() + 0.5
        with pytest.raises(RuntimeError, match="aten::log"):
            torch.log(-x)
        torch.log(x)  # finite: no error
    finally:
        torch_tpu.check_nans(previous)


def test_nan_check_traceback_points_at_the_calling_line(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text(
        textwrap.dedent("""
        import torch, torch_tpu
        x = torch.ones(3).tpu()
        y = torch.log(-x)  # the bad line
    """)
    )
    env = dict(os.environ, TORCH_TPU_LAUNCH_BLOCKING="1", TORCH_TPU_CHECK_NANS="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert r.returncode != 0
    assert "the bad line" in r.stderr and "NaN or Inf" in r.stderr


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(INDEXING_OPS))
def test_out_of_range_index_raises_by_the_next_sync_never_a_clamped_value(mode, case):
    x = torch.randn(3, 4).tpu()
    bad = torch.tensor([0, 7]).tpu()
    with pytest.raises((IndexError, RuntimeError)) as on_cpu:
        INDEXING_OPS[case](x.cpu(), bad.cpu())
    with torch_tpu.eager_mode(mode):
        y = INDEXING_OPS[case](x, bad)  # launched: no error yet (the host has not waited)
        with pytest.raises(on_cpu.type, match="out of"):  # CPU's exception type
            y.cpu()  # the first host read raises instead of returning clamped values
        # The error is reported once; later work is unaffected.
        torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_in_range_indices_raise_nothing_in_strict():
    x = torch.randn(3, 4)
    idx = torch.tensor([2, -3])
    torch.testing.assert_close(x.tpu()[idx.tpu()].cpu(), x[idx])
    torch.tpu.synchronize()


def test_compiled_graph_in_debug_mode_raises_an_out_of_range_index_at_its_call(debug_mode):
    torch._dynamo.reset()
    f = torch.compile(lambda t, i: t[i] * 2, backend="tpu")
    t = torch.randn(3, 4).tpu()
    f(t, torch.tensor([0, 2]).tpu())  # compiled and captured; the next call replays
    reached = False
    with pytest.raises(IndexError, match="compiled graph"):
        f(t, torch.tensor([0, 5]).tpu())
        reached = True
    assert not reached


def test_compiled_graph_in_debug_mode_checks_its_outputs_for_nans(debug_mode):
    torch._dynamo.reset()
    previous = torch_tpu.check_nans(True)
    try:
        f = torch.compile(lambda x: (x.log() * 2).sum(), backend="tpu")
        assert f(torch.ones(4).tpu()).item() == 0.0
        with pytest.raises(RuntimeError, match="compiled forward graph produced NaN or Inf in output 0"):
            f(torch.full((4,), -1.0).tpu())
        # A NaN made only by the backward graph: sqrt's gradient at 0 is inf.
        g = torch.compile(lambda x: x.sqrt().sum(), backend="tpu")
        x = torch.zeros(3).tpu().requires_grad_()
        out = g(x)
        with pytest.raises(RuntimeError, match="compiled backward graph produced NaN or Inf"):
            out.backward()
    finally:
        torch_tpu.check_nans(previous)
        torch._dynamo.reset()


def test_compiled_graph_in_strict_mode_defers_its_index_checks_to_the_next_sync():
    torch._dynamo.reset()
    f = torch.compile(lambda t, i: t[i] * 2, backend="tpu")
    t = torch.randn(3, 4).tpu()
    f(t, torch.tensor([0, 2]).tpu())
    f(t, torch.tensor([0, 5]).tpu())  # no wait at the call
    with pytest.raises(IndexError, match="next synchronization"):
        torch_tpu.sync()
    torch._dynamo.reset()
