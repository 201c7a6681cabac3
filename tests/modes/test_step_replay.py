"""DeferAndFuse replays a repeated step as its remembered program
(csrc/exec/step_replay.h): over several steps of small training loops, the
results equal CPU's, the replay happens (torch_tpu.metrics() counts
step_replays), and every way a step can differ from the remembered one (a
new shape, a new number, a flush in the middle, a shorter step, random ops)
still gives the results recording gives."""

import os
import subprocess
import sys
import threading

import pytest
import torch

import torch_tpu

STEPS = 7

# The CPU generator is one for the process: threads that seed it and draw
# their initial weights at once take each other's numbers (3 of 200 runs of
# three threads, with no tpu op at all), so a model is made by one thread at a time.
_SEEDED_INIT = threading.Lock()


def make_model(device, dropout=0.0):
    with _SEEDED_INIT:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Dropout(dropout), torch.nn.Linear(16, 4)
        )
    return model.to(device)


def batches(steps, sizes=None):
    generator = torch.Generator().manual_seed(1)
    sizes = sizes or [5] * steps
    return [(torch.randn(n, 8, generator=generator), torch.randn(n, 4, generator=generator)) for n in sizes]


def train(device, data, optimizer_class=torch.optim.AdamW, step_fn=None, **optimizer_args):
    """Per-step losses and the final parameters, on CPU."""
    model = make_model(device)
    optimizer = optimizer_class(model.parameters(), **optimizer_args)
    losses = []
    for step, (x, y) in enumerate(data):
        optimizer.zero_grad()
        if step_fn:
            loss = step_fn(step, model, optimizer, x.to(device), y.to(device))
        else:
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return [l.item() for l in losses], [p.detach().cpu() for p in model.parameters()]


def in_defer_and_fuse(fn):
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch_tpu.sync()
        torch_tpu.reset_metrics()
        result = fn()
        torch_tpu.sync()
        return result, torch_tpu.metrics()


def assert_same_training(expected, got):
    torch.testing.assert_close(torch.tensor(got[0]), torch.tensor(expected[0]), rtol=1e-5, atol=1e-6)
    for e, g in zip(expected[1], got[1]):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_adamw_loop_replays_its_step_and_equals_cpu():
    data = batches(STEPS)
    expected = train("cpu", data, lr=1e-2)
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, lr=1e-2))
    assert_same_training(expected, got)
    # Each step is two flushes (the target's upload cuts the forward); the
    # first step creates AdamW's state, the second is remembered, the rest replay.
    assert metrics["step_replays"] >= 2 * (STEPS - 3)
    assert metrics["step_replay_ops"] > metrics["ops_dispatched"] // 2


def test_for_loop_sgd_in_place_updates_replay():
    data = batches(STEPS)
    args = dict(lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=False)
    expected = train("cpu", data, torch.optim.SGD, **args)
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, torch.optim.SGD, **args))
    assert_same_training(expected, got)
    assert metrics["step_replays"] >= 2 * (STEPS - 3)


def test_a_step_whose_shape_changes_mid_run_is_recorded_again():
    data = batches(9, sizes=[5, 5, 5, 5, 3, 3, 3, 5, 5])
    expected = train("cpu", data, lr=1e-2)
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, lr=1e-2))
    assert_same_training(expected, got)
    assert metrics["step_replay_fallbacks"] >= 1
    assert metrics["step_replays"] >= 4


def test_python_numbers_that_change_every_step_replay():
    fallbacks_before = {}

    def scaled_step(step, model, optimizer, x, y):
        if step == 2:  # AdamW's state made, the step remembered
            fallbacks_before["n"] = torch_tpu.metrics()["step_replay_fallbacks"]
        for group in optimizer.param_groups:
            group["lr"] = 1e-2 / (1 + step)
        # 1.0 and 2.0 among them: a lowering keeps 1 as a constant where it
        # is given one, yet a program made for others computes with it alike.
        scale = (0.3, 0.45, 0.6, 1.0, 0.75, 2.0, 0.9)[step]
        return torch.nn.functional.mse_loss(model(x * scale) * scale, y)

    data = batches(STEPS)
    expected = train("cpu", data, step_fn=scaled_step, lr=1e-2)
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, step_fn=scaled_step, lr=1e-2))
    assert_same_training(expected, got)
    # One flush a step (both batches are uploaded before it).
    assert metrics["step_replays"] >= STEPS - 2
    assert metrics["step_replay_fallbacks"] == fallbacks_before["n"]


def test_adamw_whose_bias_correction_reaches_one_keeps_replaying_its_step():
    # sqrt(1 - beta2 ** t) rounds to exactly 1.0 from step 8 with beta2 =
    # 0.01 (from step ~716 with the 0.95 LLM recipes use): foreach AdamW's
    # _foreach_div_ then divides by 1.0, which the step's program already
    # takes as an input. The step fell back and compiled again before.
    data = batches(10)
    args = dict(lr=1e-3, betas=(0.9, 0.01))
    expected = train("cpu", data, **args)
    model = make_model("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), **args)
    losses = []
    with torch_tpu.eager_mode("defer_and_fuse"):
        for step, (x, y) in enumerate(data):
            if step == 4:  # replaying
                torch_tpu.sync()
                before = torch_tpu.metrics()
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x.to("tpu")), y.to("tpu"))
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        torch_tpu.sync()
        after = torch_tpu.metrics()
    assert_same_training(expected, ([l.item() for l in losses], [p.detach().cpu() for p in model.parameters()]))
    assert after["step_replays"] - before["step_replays"] >= 2 * 6  # steps 5-10, two flushes each
    assert after["step_replay_fallbacks"] == before["step_replay_fallbacks"]


def test_out_ops_and_copies_between_tpu_tensors_replay():
    def step_with_arange_and_copy(step, model, optimizer, x, y):
        positions = torch.arange(x.shape[0], device=x.device, dtype=torch.float32)  # an out= op
        hidden = model[0](x).t().contiguous().t()  # a copy between tpu tensors
        hidden = hidden + positions[:, None] * 0.01
        return torch.nn.functional.mse_loss(model[3](model[2](model[1](hidden))), y)

    data = batches(STEPS)
    expected = train("cpu", data, step_fn=step_with_arange_and_copy, lr=1e-2)
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, step_fn=step_with_arange_and_copy, lr=1e-2))
    assert_same_training(expected, got)
    assert metrics["step_replays"] >= STEPS - 2


def test_a_host_read_mid_step_flushes_and_both_halves_replay():
    seen = []

    def step_with_reads(step, model, optimizer, x, y):
        hidden = model[1](model[0](x))
        seen.append(hidden.sum().item())  # a flush in the middle of the step
        seen.append(hidden[0].cpu())
        return torch.nn.functional.mse_loss(model[3](model[2](hidden)), y)

    data = batches(STEPS)
    expected = train("cpu", data, step_fn=step_with_reads, lr=1e-2)
    expected_seen = list(seen)
    seen.clear()
    got, metrics = in_defer_and_fuse(lambda: train("tpu", data, step_fn=step_with_reads, lr=1e-2))
    assert_same_training(expected, got)
    for e, g in zip(expected_seen, seen):
        torch.testing.assert_close(torch.as_tensor(g), torch.as_tensor(e), rtol=1e-5, atol=1e-6)
    assert metrics["flushes"].get("host_read", 0) >= STEPS
    assert metrics["step_replays"] >= 2 * (STEPS - 3)


def test_a_step_that_is_a_prefix_of_the_remembered_one():
    data = batches(STEPS + 2)

    def run(device):
        model = make_model(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for step, (x, y) in enumerate(data):
            optimizer.zero_grad()
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            if step == 4:  # an evaluation: the same forward, read, no backward
                out.append(loss.item())
                continue
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        return out, [p.detach().cpu() for p in model.parameters()]

    expected = run("cpu")
    got, metrics = in_defer_and_fuse(lambda: run("tpu"))
    assert_same_training(expected, got)
    # One flush a step; the evaluation's runs as a prefix of the step's.
    assert metrics["step_replay_fallbacks"] >= 1
    assert metrics["step_replays"] >= STEPS - 1


def test_a_view_of_a_pending_result_read_by_the_next_step():
    def run(device):
        torch.manual_seed(0)
        weight = torch.randn(6, 6).to(device)
        state = torch.zeros(4, 6, device=device)
        window = None
        out = []
        for step in range(10):
            state = torch.tanh(state @ weight + (step * 0.1 + 0.05))
            if window is not None:
                state = state + window.sum(dim=1, keepdim=True)
            window = state[:, 1:3]  # a view the next step reads, pending until the sync
            if step % 2 == 1:
                if device == "tpu":
                    torch_tpu.sync()
                out.append(state.cpu())
        return out

    expected = run("cpu")
    got, metrics = in_defer_and_fuse(lambda: run("tpu"))
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    assert metrics["step_replays"] >= 3


def test_threads_each_replay_their_own_steps():
    data = batches(STEPS)
    expected = train("cpu", data, lr=1e-2)
    results = {}

    def worker(k):
        with torch_tpu.eager_mode("defer_and_fuse"):
            results[k] = train("tpu", data, lr=1e-2)

    torch_tpu.reset_metrics()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert sorted(results) == [0, 1, 2]
    for got in results.values():
        assert_same_training(expected, got)
    assert torch_tpu.metrics()["step_replays"] >= 3 * 2 * (STEPS - 3)


DROPOUT_SCRIPT = r"""
import sys, torch, torch_tpu
sys.path.insert(0, {here!r})
from test_step_replay import batches, make_model
torch_tpu.set_eager_mode("defer_and_fuse")
torch.tpu.manual_seed(7)
model = make_model("tpu", dropout=0.5)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
losses = []
for x, y in batches(6):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x.to("tpu")), y.to("tpu"))
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
after = torch.rand(5, device="tpu")
torch.save({{"losses": [l.item() for l in losses], "params": [p.detach().cpu() for p in model.parameters()],
            "after": after.cpu(), "replays": torch_tpu.metrics()["step_replays"]}}, {out!r})
"""


def test_a_replayed_step_uploads_only_what_changes():
    # dropout's keep probability and scale are numbers its lowering derives
    # from p, kept by the remembered step: uploaded once, when it was
    # remembered, not by every replay. Each replay uploads its RNG state.
    w = torch.ones(16, 16, device="tpu")
    acc = torch.zeros(16, 16, device="tpu")
    acc_cpu = torch.zeros(16, 16)
    with torch_tpu.eager_mode("defer_and_fuse"):
        for step in range(8):
            if step == 4:
                torch_tpu.sync()
                torch_tpu.reset_metrics()
            acc.add_(torch.nn.functional.dropout(w, 0.3))
            torch_tpu.sync()
            acc_cpu += 1 / 0.7 * (acc.cpu() - acc_cpu > 0)  # each kept element grew by 1 / 0.7
            torch.testing.assert_close(acc.cpu(), acc_cpu)
        metrics = torch_tpu.metrics()
    assert metrics["step_replays"] == 4
    assert metrics["uploads"] == 4


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_float_that_replays_feed_again_is_uploaded_once_and_then_reused(mode):
    # An optimizer's lr, betas and eps feed every replay the same numbers:
    # the second time a replay feeds a number, it is uploaded and kept, and
    # later replays read the kept buffer. A number fed once travels in its
    # launch (an upload per launch), as one that changes every step does.
    x_cpu = torch.randn(8, 8)
    x = x_cpu.to("tpu")
    acc = torch.zeros(8, 8, device="tpu")
    acc_cpu = torch.zeros(8, 8)

    def step(s):
        nonlocal acc_cpu
        acc.add_(x * s)
        torch_tpu.sync()
        acc_cpu = acc_cpu + x_cpu * s
        torch.testing.assert_close(acc.cpu(), acc_cpu)

    with torch_tpu.eager_mode(mode):
        for s in (0.5, 0.25, 0.5, 0.25):  # captured (Strict) or remembered (DeferAndFuse) as a replay
            step(s)
        # Numbers no replay fed before (the kept buffers are the process's:
        # each mode, and every other test, feeds others).
        a, b = (0.3141, 0.7182) if mode == "strict" else (0.2718, 0.6931)
        torch_tpu.reset_metrics()
        for s in (a, b) * 6:  # alternating
            step(s)
        repeated = torch_tpu.metrics()
        for k in range(6):  # a new number each step
            step(a + 0.0101 * (k + 1))
        changing = torch_tpu.metrics()
    # Strict replays the mul and the add_, DeferAndFuse the step they make.
    replays, per_step = ("op_cache_replays", 2) if mode == "strict" else ("step_replays", 1)
    assert repeated[replays] == 12 * per_step and changing[replays] == 18 * per_step
    # a and b in their launches, then each uploaded once and kept.
    assert repeated["uploads"] == 4
    assert changing["uploads"] - repeated["uploads"] == 6


def test_dropout_draws_the_same_random_numbers_with_and_without_replay(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    results = {}
    for replay in ("1", "0"):
        out = str(tmp_path / f"replay{replay}.pt")
        env = dict(os.environ, TORCH_TPU_STEP_REPLAY=replay)
        subprocess.run(
            [sys.executable, "-c", DROPOUT_SCRIPT.format(here=here, out=out)], env=env, check=True, timeout=300
        )
        results[replay] = torch.load(out)
    replayed, recorded = results["1"], results["0"]
    assert replayed["replays"] >= 4 and recorded["replays"] == 0
    # The same programs on the same random states: bit for bit.
    assert replayed["losses"] == recorded["losses"]
    for a, b in zip(replayed["params"], recorded["params"]):
        assert torch.equal(a, b)
    assert torch.equal(replayed["after"], recorded["after"])
