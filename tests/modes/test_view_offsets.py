"""A view's storage offset is a program input, not a constant
(csrc/runtime/view_layout.h): a loop that reads and writes `x[t]`,
`x.narrow(0, t, n)` or `x[:, t]` for a new `t` each iteration compiles no new
program after its first iterations, in Strict (the op cache replays one
capture) and in DeferAndFuse (the fused program's text is the same, and its
step replays), and every result equals CPU's exactly.

The loops warm up on t = 0 and t = 1: offset 0 stays a static read (the fast
reshape path), so it has programs of its own."""

import pytest
import torch

import torch_tpu

STEPS = 9
WARM = 2  # t = 0 (static offset) and t = 1 (the first dynamic one)


@pytest.fixture(params=["strict", "defer_and_fuse"])
def mode(request):
    torch_tpu._C._clear_op_cache()
    with torch_tpu.eager_mode(request.param):
        torch_tpu.sync()
        yield request.param


def compiles():
    torch_tpu.sync()
    return torch_tpu.metrics()["compiles"]


def run_loop(device, step, state, steps=STEPS):
    """Runs `step(t, *state)` for each t; returns the per-step results (on
    CPU) and the programs compiled after the warm-up iterations."""
    outs, compiled = [], None
    for t in range(steps):
        if t == WARM and device == "tpu":
            compiled = compiles()
        outs.append([o.cpu() for o in step(t, *state)])
    if device == "tpu":
        compiled = compiles() - compiled
    return outs, [s.cpu() for s in state], compiled


def check_loop(step, make_state, steps=STEPS):
    expected, expected_state, _ = run_loop("cpu", step, make_state("cpu"), steps)
    got, got_state, compiled = run_loop("tpu", step, make_state("tpu"), steps)
    for e, g in zip(expected, got):
        for a, b in zip(e, g):
            torch.testing.assert_close(b, a)
    for a, b in zip(expected_state, got_state):
        torch.testing.assert_close(b, a)
    assert compiled == 0, f"{compiled} programs compiled for new offsets"


def tensors(*shapes):
    def make(device):
        return [torch.randn(*s, generator=torch.Generator().manual_seed(k)).to(device) for k, s in enumerate(shapes)]

    return make


def test_reads_of_rows_narrows_and_columns_compile_nothing_new(mode):
    def step(t, x):
        return [x[t] * 2 + 1, x.narrow(0, t, 3).sum(0), x[:, t].exp(), x[t, 1:5].neg()]

    check_loop(step, tensors((STEPS + 3, STEPS)))


def test_in_place_writes_through_rows_and_columns_compile_nothing_new(mode):
    def step(t, x, y):
        x[t].add_(1)
        x[:, t].mul_(y[t, : x.shape[0]])
        x[t + 1] = y[t, : x.shape[1]]
        return [x[t].clone()]

    check_loop(step, tensors((STEPS + 1, STEPS + 2), (STEPS, 16)))


def test_scatters_into_a_view_at_an_offset_compile_nothing_new(mode):
    def step(t, x, idx, src):
        x[t].index_put_((idx,), src, accumulate=True)
        x[t + 1].scatter_(0, idx, src * 3)
        x[t].index_add_(0, idx, src)
        return [x.sum(1)]

    def make(device):
        x, src = tensors((STEPS + 1, 8), (3,))(device)
        return [x, torch.tensor([6, 1, 3]).to(device), src]

    check_loop(step, make)


def test_views_of_views_and_byte_views_at_offsets(mode):
    def step(t, x, b):
        rows = x[t : t + 3]  # a view at an offset, then views of it
        out = [rows[1].t().contiguous(), rows[:, ::2] * 2, b.view(torch.uint8)[4 * t : 4 * t + 6].to(torch.int32)]
        b.view(torch.int16)[2 * t].fill_(7)
        return out

    check_loop(step, tensors((STEPS + 3, 4, 3), (STEPS + 2,)))


def test_kv_cache_written_at_a_position_and_read_up_to_it(mode):
    # The decode loop of a KV cache: write the new key at position t, read
    # the cache's rows up to t (a new size each step: new programs then are
    # for the size, so the read here is of a fixed window ending at t).
    def step(t, cache, keys):
        cache[:, t + 2].copy_(keys[t])
        window = cache[:, t : t + 3]
        return [window.sum(1), (window * keys[t].unsqueeze(1)).amax(1)]

    check_loop(step, tensors((2, STEPS + 3, 4), (STEPS, 2, 4)))


def test_views_of_one_storage_replay_only_at_the_same_distance(mode):
    # Two views of one storage in one call: their distance decides whether
    # they overlap (add_ of an overlapping view into another is an error on
    # CPU): a program made for one distance never serves another.
    def step(t, x):
        x[t : t + 4].add_(x[t + 6 : t + 10])
        return [x[t : t + 4] * x[t + 5 : t + 9]]

    check_loop(step, lambda device: [torch.arange(30.0).to(device)])
    x = torch.arange(20.0)
    tx = x.to("tpu")
    for t in range(1, 5):
        tx[t : t + 4].add_(tx[t + 6 : t + 10])
        x[t : t + 4].add_(x[t + 6 : t + 10])
    with pytest.raises(RuntimeError, match="unsupported operation"):
        tx[1:5].add_(tx[2:6])
    torch.testing.assert_close(tx.cpu(), x, rtol=0, atol=0)


def test_in_place_op_returns_the_view_at_its_own_offset(mode):
    x = torch.zeros(8, 3)
    tx = x.to("tpu")
    for t in range(1, 7):
        r = tx[t].add_(t)
        assert r.storage_offset() == tx[t].storage_offset()
        torch.testing.assert_close(r.cpu(), x[t].add_(t), rtol=0, atol=0)
    torch.testing.assert_close(tx.cpu(), x, rtol=0, atol=0)


def test_a_fifty_step_row_loop_compiles_no_program_after_its_first_steps(mode):
    def step(t, x, h):
        h.copy_(torch.tanh(x[t] + h * 0.5))
        return [h.clone()]

    check_loop(step, tensors((50, 16), (16,)), steps=50)


def test_a_compiled_function_taking_a_row_replays_its_graph_for_every_row():
    compiled = torch.compile(lambda row, h: torch.tanh(row * 2 + h), backend="tpu")

    def step(t, x, h):
        h.copy_(compiled(x[t], h) if h.device.type == "tpu" else torch.tanh(x[t] * 2 + h))
        return [h.clone()]

    torch_tpu.sync()
    replays = torch_tpu.metrics()["graph_replays"]
    check_loop(step, tensors((STEPS, 5), (5,)))
    assert torch_tpu.metrics()["graph_replays"] - replays >= STEPS - WARM


def test_views_of_a_result_in_the_same_fused_program_read_their_own_row(mode):
    # In DeferAndFuse, h is made by the program that reads h[t]: its offset
    # is a constant there (XLA sees the slice), and a replayed step for
    # another t must not reuse it.
    x = torch.randn(STEPS, 4)
    tx = x.to("tpu")
    for t in list(range(STEPS)) + [3, 3, 5]:
        torch.testing.assert_close((tx * 2)[t].add(1).cpu(), (x * 2)[t].add(1))
        h = tx.exp()
        h[t].mul_(3)
        torch.testing.assert_close(h.cpu(), torch.cat([x[:t].exp(), x[t : t + 1].exp() * 3, x[t + 1 :].exp()]))


def test_an_out_of_range_index_into_a_replayed_view_raises_and_writes_nothing(mode):
    x = torch.zeros(6, 4)
    tx = x.to("tpu")
    src = torch.ones(2)
    for t in range(1, 5):
        tx[t].index_put_((torch.tensor([0, 3]).to("tpu"),), src.to("tpu"))
        x[t].index_put_((torch.tensor([0, 3]),), src)
    torch.testing.assert_close(tx.cpu(), x, rtol=0, atol=0)
    with pytest.raises(IndexError):
        tx[5].index_put_((torch.tensor([1, 4]).to("tpu"),), src.to("tpu"))
        torch_tpu.sync()
    torch.testing.assert_close(tx.cpu(), x, rtol=0, atol=0)
