"""The tpu RNG state as on CUDA: torch.tpu.get_rng_state()/set_rng_state(),
a tpu Generator's get_state()/set_state() and torch.random.fork_rng(
device_type="tpu") bring back the very dropout masks that followed, in
Strict, DeferAndFuse and compiled graphs."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


@pytest.fixture(params=["strict", "defer_and_fuse"])
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def _masks(n=3):
    x = torch.ones(64, 64, device="tpu")
    return [F.dropout(x, p=0.5, training=True).cpu() for _ in range(n)]


def test_set_rng_state_replays_dropout_masks(mode):
    torch.tpu.manual_seed(3)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = _masks()
    assert not torch.equal(first[0], first[1])  # the state moves on: each mask is new
    torch.tpu.set_rng_state(state)
    again = _masks()
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_rng_state_is_what_the_next_draw_uses_whatever_is_pending():
    # Under DeferAndFuse the draws are recorded, not run: the state taken
    # between them still splits the sequence where the program order does.
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.tpu.manual_seed(5)
        x = torch.ones(32, device="tpu")
        a = F.dropout(x, 0.5)
        state = torch.tpu.get_rng_state()
        b = F.dropout(x, 0.5)
        torch.tpu.set_rng_state(state)
        c = F.dropout(x, 0.5)
        torch.testing.assert_close(b.cpu(), c.cpu(), atol=0, rtol=0)
        assert not torch.equal(a.cpu(), b.cpu())


def test_fork_rng_restores_the_state_on_exit(mode):
    torch.tpu.manual_seed(11)
    state = torch.tpu.get_rng_state()
    expected = _masks(2)
    torch.tpu.set_rng_state(state)
    with torch.random.fork_rng(device_type="tpu"):
        torch.tpu.manual_seed(999)
        _masks(2)
    after = _masks(2)
    for a, b in zip(expected, after):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_generator_state_round_trip(mode):
    g = torch.Generator(device="tpu").manual_seed(7)
    state = g.get_state()
    a = torch.rand(100, device="tpu", generator=g).cpu()
    g.set_state(state)
    b = torch.rand(100, device="tpu", generator=g).cpu()
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_rng_state_survives_torch_save(tmp_path):
    torch.tpu.manual_seed(13)
    torch.save({"rng": torch.tpu.get_rng_state()}, tmp_path / "rng.pt")
    expected = _masks(2)
    torch.tpu.set_rng_state(torch.load(tmp_path / "rng.pt")["rng"])
    for a, b in zip(expected, _masks(2)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_compiled_dropout_replays_after_set_rng_state():
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True) * 2, backend="tpu")
    x = torch.ones(16, 16, device="tpu")
    torch.tpu.manual_seed(17)
    state = torch.tpu.get_rng_state()
    first = [f(x).cpu() for _ in range(3)]  # trace, then replays
    assert not torch.equal(first[1], first[2])
    torch.tpu.set_rng_state(state)
    for a in first:
        torch.testing.assert_close(f(x).cpu(), a, atol=0, rtol=0)


def test_bad_rng_state_raises():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
