"""`python -m torch_tpu.bench` and `torch_tpu.bench.run`: a user's step timed
in Strict, DeferAndFuse and compiled. Times are reported, never asserted."""

import json
import os
import subprocess
import sys
import textwrap

import torch

import torch_tpu
from torch_tpu import bench

TINY_STEP = """
    import torch


    def make_step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(8, 16, device=device)
        y = torch.randint(0, 4, (8,), device=device)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        return step


    if __name__ == "__main__":
        raise SystemExit("imported by the benchmark, never run as a script")
"""


def write_script(tmp_path, text=TINY_STEP):
    path = tmp_path / "my_step.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "torch_tpu.bench", *args], capture_output=True, text=True, timeout=900)


def table_rows(stdout):
    """mode -> its row's cells, from the printed table."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode "))
    return {line.split()[0]: line.split() for line in lines[header + 1 :] if line.strip()}


def test_the_command_times_a_tiny_training_step_in_every_mode(tmp_path):
    r = run_bench(write_script(tmp_path), "--steps", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = table_rows(r.stdout)
    assert list(rows) == ["strict", "defer_and_fuse", "compiled"]
    for mode, cells in rows.items():
        steps_per_second, first_step, compiled = float(cells[1]), float(cells[2]), int(cells[3])
        assert steps_per_second > 0 and first_step > 0, (mode, cells)
        assert compiled > 0, (mode, cells)  # each mode's process starts with an empty cache
    strict, fused = rows["strict"], rows["defer_and_fuse"]
    # DeferAndFuse runs a step as fewer programs than Strict's one per op.
    assert float(fused[6]) < float(strict[6])
    assert "fresh process" in r.stdout


def test_the_api_returns_the_fields_the_command_does(tmp_path):
    ns = {}
    exec(textwrap.dedent(TINY_STEP), ns)
    step = ns["make_step"](torch.device("tpu"))
    results = bench.run(step, steps=3, warmup=1)
    assert [r["mode"] for r in results] == ["strict", "defer_and_fuse", "compiled"]
    for r in results:
        assert tuple(r) == bench.FIELDS
        assert r["steps_per_second"] > 0 and r["peak_memory_bytes"] > 0 and not r["fresh_process"]
        # The step reads no value: the host never waited inside it.
        assert r["host_waits_per_step"] == 0
    assert torch_tpu.get_eager_mode() == "strict"  # restored
    (from_script,) = bench.run_script(write_script(tmp_path), steps=3, modes=["defer"], quiet=True)
    assert tuple(from_script) == bench.FIELDS and from_script["fresh_process"]
    assert from_script["programs_compiled"] > 0 and from_script["programs_compiled_in_timed_steps"] == 0


def test_a_value_read_in_the_step_counts_as_a_host_wait(tmp_path):
    ns = {}
    exec(textwrap.dedent(TINY_STEP), ns)
    step = ns["make_step"](torch.device("tpu"))
    (r,) = bench.run(lambda: step().item(), steps=3, modes=["defer"])
    assert r["host_waits_per_step"] >= 1


GROWING_BATCH = """
    import torch


    def make_step(device):
        model = torch.nn.Linear(16, 4).to(device)
        rows = [4]

        def step():
            rows[0] += 1  # a new batch size each step
            model(torch.randn(rows[0], 16, device=device)).sum().backward()

        return step
"""


def test_a_step_that_compiles_every_time_is_pointed_out(tmp_path):
    r = run_bench(write_script(tmp_path, GROWING_BATCH), "--steps", "2", "--modes", "strict")
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(table_rows(r.stdout)["strict"][4]) > 0
    assert "programs compiled during the timed steps" in r.stdout


def test_json_output_parses(tmp_path):
    r = run_bench(write_script(tmp_path), "--steps", "2", "--rounds", "2", "--modes", "strict", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (result,) = json.loads(r.stdout)
    assert tuple(result) == bench.FIELDS
    assert (result["mode"], result["steps"], result["rounds"]) == ("strict", 2, 2)


def test_a_script_without_make_step_fails_saying_what_to_define(tmp_path):
    r = run_bench(write_script(tmp_path, "x = 1\n"), "--steps", "1", "--modes", "strict")
    assert r.returncode == 1
    assert "defines no make_step(device)" in r.stdout


def test_an_unknown_mode_is_refused():
    r = run_bench(os.devnull, "--modes", "strict,fast")
    assert r.returncode == 2 and "unknown mode 'fast'" in r.stderr
