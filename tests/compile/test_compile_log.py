"""The compile log: each new program of a call site after its warm-up says
what differs from the site's nearest earlier variant (torch_tpu/profiler.py,
csrc/exec/compile_log.h). An eager op's or a flush's warm-up ends when it
runs a program again (each test calls the first shape twice); a graph's is
its first program. Shapes here are odd sizes no other test uses, so each of
them is a new program in this process."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torch_tpu

MARK = "[torch_tpu compile]"


def log_lines(capfd):
    return [line for line in capfd.readouterr().err.splitlines() if line.startswith(MARK)]


@pytest.fixture
def compile_log():
    with torch_tpu.explain_compiles():
        yield


def test_a_strict_shape_change_names_the_dimension(compile_log, capfd):
    capfd.readouterr()
    with torch_tpu.eager_mode("strict"):
        for n in (131, 131, 137):
            a, b = torch.randn(3, n).to("tpu"), torch.randn(3, n).to("tpu")
            torch.testing.assert_close(torch.atan2(a, b).cpu(), torch.atan2(a.cpu(), b.cpu()))
    lines = [line for line in log_lines(capfd) if "aten::atan2" in line]
    assert len(lines) == 1, lines
    assert "variant 2" in lines[0]
    assert "self dim 1: 131 -> 137" in lines[0] and "other dim 1: 131 -> 137" in lines[0]


def test_a_strict_dtype_change_names_the_dtype(compile_log, capfd):
    a = torch.randn(5, 139).to("tpu")
    with torch_tpu.eager_mode("strict"):
        torch.hypot(a, a).cpu()
        torch.hypot(a, a).cpu()
        capfd.readouterr()
        torch.hypot(a.double(), a.double()).cpu()
    lines = [line for line in log_lines(capfd) if "aten::hypot" in line]
    assert len(lines) == 1, lines
    assert "self dtype: float32 -> float64" in lines[0]
    assert "dim" not in lines[0]  # only what changed


def test_a_number_baked_into_the_program_is_named(compile_log, capfd):
    # roll's shifts are part of its program (a Python float an op takes as a
    # program input, clamp's min say, compiles nothing new).
    a = torch.randn(7, 149).to("tpu")
    with torch_tpu.eager_mode("strict"):
        torch.roll(a, 3, 1).cpu()
        torch.roll(a, 3, 1).cpu()
        a.clamp(min=0.25).cpu()
        capfd.readouterr()
        torch.testing.assert_close(torch.roll(a, 5, 1).cpu(), torch.roll(a.cpu(), 5, 1))
        a.clamp(min=0.5).cpu()
    lines = log_lines(capfd)
    assert len(lines) == 1 and "aten::roll" in lines[0] and "shifts[0]: 3 -> 5" in lines[0], lines


def test_a_defer_and_fuse_shape_change_names_the_dimension(compile_log, capfd):
    capfd.readouterr()
    with torch_tpu.eager_mode("defer_and_fuse"):
        for n in (151, 151, 157):
            x = torch.randn(2, n).to("tpu")
            got = (x.exp() * 2 + x).sum(-1).cpu()
            torch.testing.assert_close(got, (x.cpu().exp() * 2 + x.cpu()).sum(-1))
    lines = [line for line in log_lines(capfd) if "DeferAndFuse program" in line]
    assert len(lines) == 1, lines
    assert "op 1 aten::exp result 0 dim 1: 151 -> 157" in lines[0]


def test_a_compiled_graph_shape_change_names_the_dimension(compile_log, capfd):
    f = torch.compile(lambda a: (a.cos() * 3).sum(-1), backend="tpu")
    capfd.readouterr()
    for n in (163, 167):
        x = torch.randn(4, n).to("tpu")
        torch.testing.assert_close(f(x).cpu(), (x.cpu().cos() * 3).sum(-1))
    lines = [line for line in log_lines(capfd) if "compiled graph" in line]
    assert len(lines) == 1, lines
    assert "forward" in lines[0] and "L['a'] dim 1: 163 -> 167" in lines[0]


def test_a_call_site_past_n_variants_warns_once(capfd):
    with torch_tpu.explain_compiles(variants_warning=3), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch_tpu.eager_mode("strict"):
            for n in (171, 171, *range(172, 178)):
                torch.randn(n).to("tpu").sinh().cpu()
    messages = [str(w.message) for w in caught if "aten::sinh" in str(w.message)]
    assert len(messages) == 1, messages
    assert "compiled 4 variants since its warm-up" in messages[0] and "=3" in messages[0]


def test_the_first_programs_of_a_site_are_its_warm_up(compile_log, capfd):
    # A model's first step compiles an op once per shape it meets there.
    capfd.readouterr()
    with torch_tpu.eager_mode("strict"):
        for n in (197, 199, 211):
            torch.randn(3, n).to("tpu").expm1().cpu()
    assert [line for line in log_lines(capfd) if "aten::expm1" in line] == []


def test_the_log_is_off_by_default_and_prints_nothing(capfd):
    assert not torch_tpu.profiler.compile_log_enabled()
    capfd.readouterr()
    with torch_tpu.eager_mode("strict"):
        for n in (179, 179, 181):
            torch.randn(2, n).to("tpu").cosh().cpu()
    assert log_lines(capfd) == []


def test_the_environment_variable_turns_it_on(tmp_path):
    code = textwrap.dedent("""
        import torch, torch_tpu
        for n in (191, 191, 193):
            torch.randn(2, n).to("tpu").tanh().cpu()
    """)
    env = dict(os.environ, TORCH_TPU_LOG_COMPILES="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith(MARK) and "aten::tanh" in line]
    assert len(lines) == 1 and "self dim 1: 191 -> 193" in lines[0], done.stderr[-3000:]
