"""torch.profiler on tpu: each program the device runs is a device event
with device time (torch_tpu/profiler.py, csrc/device/program_profiler.h)."""

import json
import sys

import pytest
import torch
from repo_paths import EXAMPLES
from torch.profiler import ProfilerActivity, profile

import torch_tpu
import torch_tpu.profiler

sys.path.insert(0, EXAMPLES)

import train_gpt  # noqa: E402

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def programs_executed():
    return torch_tpu.metrics()["programs_executed"]


def gpt_step(mode):
    """A function running one GPT training step in `mode`, warmed up (its
    programs compiled), and the loss of a CPU run of the same step."""
    config = train_gpt.GPTConfig(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16)
    model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", seed=0)
    step_model = torch.compile(model, backend="tpu") if mode == "compiled" else model
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 32, (2, 16), generator=g).to("tpu")
    y = torch.randint(0, 32, (2, 16), generator=g).to("tpu")
    eager = "strict" if mode == "compiled" else mode

    def step():
        with torch_tpu.eager_mode(eager):
            loss = train_gpt.train_step(step_model, optimizer, x, y).item()
            torch_tpu.synchronize()
        return loss

    step()
    step()
    return step


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_a_profiled_gpt_step_has_one_tpu_event_per_program(mode, tmp_path):
    step = gpt_step(mode)
    before = programs_executed()
    with profile(activities=ACTIVITIES) as prof:
        loss = step()
    launched = programs_executed() - before
    assert loss == loss and launched > 0
    events = torch_tpu.profiler.program_events(prof)
    assert len(events) == launched, [e.name for e in events]
    assert all(e.device_time_total > 0 for e in events), [(e.name, e.device_time_total) for e in events]
    assert all(e.name.startswith("tpu ") for e in events)
    if mode == "defer_and_fuse":
        assert any(e.name.startswith("tpu fused ") and "(cut: " in e.name for e in events), [e.name for e in events]
        # The warmed step runs as its recorded flush replayed (exec/step_replay.cpp), named so.
        assert any(e.name.endswith(", replayed)") for e in events), [e.name for e in events]
    if mode == "compiled":
        # Each graph is named by the function Dynamo compiled.
        assert any(e.name.startswith("tpu GPT.forward forward (") for e in events), [e.name for e in events]
        assert any(e.name.startswith("tpu GPT.forward backward (") for e in events), [e.name for e in events]

    # key_averages lists them with their device time.
    averages = {a.key: a for a in prof.key_averages()}
    for name in {e.name for e in events}:
        assert averages[name].self_device_time_total > 0, name
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=1000)
    assert "Self TPU" in table
    assert events[0].name[:40] in table

    # The exported trace is JSON holding the same events, with their args.
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert sorted(e["name"] for e in kernels) == sorted(e.name for e in events)
    for e in kernels:
        assert e["ph"] == "X" and e["dur"] > 0
        assert int(e["args"]["bytes_out"]) > 0
        assert e["args"]["cache"] in ("compiled", "disk cache", "cache hit", "replayed")


def test_device_events_are_linked_to_the_host_op_that_launched_them():
    x = torch.randn(48, 48).to("tpu")
    (x @ x).cpu()
    with torch_tpu.eager_mode("strict"), profile(activities=ACTIVITIES) as prof:
        (x @ x).cpu()
    mm = [a for a in prof.key_averages() if a.key == "aten::mm"]
    assert mm and mm[0].device_time_total > 0  # the CPU op carries its program's device time


def test_events_say_how_the_program_was_found(tmp_path):
    # Strict: the first call of a signature runs its program (compiled, or
    # found in a cache tier), the second captures it for the op cache (a
    # memory hit), the third replays the captured program with no lookup.
    x = torch.randn(3, 97).to("tpu")
    with torch_tpu.eager_mode("strict"), profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            x.neg().cpu()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())
    kernels = sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    assert [e["name"] for e in kernels] == ["tpu aten::neg"] * 3
    caches = [e["args"]["cache"] for e in kernels]
    assert caches[0] in ("compiled", "disk cache", "cache hit") and caches[1:] == ["cache hit", "replayed"]
    assert all(int(e["args"]["bytes_in"]) == int(e["args"]["bytes_out"]) == 3 * 97 * 4 for e in kernels), kernels
    assert all(e["args"]["ops"] == "aten::neg" for e in kernels)


def test_no_program_is_recorded_without_a_profiler():
    x = torch.randn(8, 8).to("tpu")
    assert not torch_tpu.profiler.programs_profiled()
    for _ in range(3):
        (x * 3).sum().cpu()  # launches with no session: nothing may be kept for a later one
    with profile(activities=ACTIVITIES) as prof:
        assert torch_tpu.profiler.programs_profiled()
    assert not torch_tpu.profiler.programs_profiled()
    assert torch_tpu.profiler.program_events(prof) == []


def test_a_cpu_only_profile_records_no_tpu_program():
    x = torch.randn(8, 8).to("tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert not torch_tpu.profiler.programs_profiled()
        (x * 3).sum().cpu()
    assert torch_tpu.profiler.program_events(prof) == []
    assert any(e.name == "aten::mul" for e in prof.events())


def test_the_legacy_autograd_profiler_times_tpu_ops():
    # torch.autograd.profiler.profile(use_device="tpu") needs the backend's
    # device hooks (it raised "PrivateUse1 used in profiler but not enabled").
    x = torch.randn(40, 40).to("tpu")
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        (x @ x).cpu()
    mm = [e for e in prof.key_averages() if e.key == "aten::mm"]
    assert mm and 0 < mm[0].cpu_time_total < 600e6 and mm[0].device_time_total > 0
    assert "Self TPU" in prof.key_averages().table()
