"""The GPT example trains identically in Strict, Debug and DeferAndFuse, and
DeferAndFuse reaches a steady state where every step hits the cache."""

import sys

import pytest
import torch
from repo_paths import EXAMPLES

import torch_tpu

sys.path.insert(0, EXAMPLES)

import train_gpt  # noqa: E402

SEED = 4321


@pytest.fixture(scope="module")
def dataset():
    return train_gpt.CharDataset()


@pytest.fixture(scope="module")
def config(dataset):
    return train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=32, dropout=0.0
    )


def train_in_mode(mode, config, dataset, steps, lr_schedule=None, warmup=None):
    """Per-step losses; with `warmup`, also the metrics of the steps after it."""
    with torch_tpu.eager_mode(mode):
        model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", SEED)
        generator = torch.Generator().manual_seed(SEED)
        losses, after_warmup = [], None
        for step in range(1, steps + 1):
            if lr_schedule:
                for group in optimizer.param_groups:
                    group["lr"] = lr_schedule(step)
            if step == (warmup or 0) + 1:
                torch_tpu.sync()
                torch_tpu.reset_metrics()
            x, y = train_gpt.get_batch(dataset.data, 4, config.block_size, generator, "tpu")
            losses.append(train_gpt.train_step(model, optimizer, x, y))
        torch_tpu.sync()
        if warmup is not None:
            after_warmup = torch_tpu.metrics()
        return [l.item() for l in losses], after_warmup


def test_three_modes_give_identical_losses(config, dataset):
    strict, _ = train_in_mode("strict", config, dataset, 50)
    debug, _ = train_in_mode("debug", config, dataset, 50)
    fused, _ = train_in_mode("defer_and_fuse", config, dataset, 50)
    assert strict[-1] < strict[0]
    for name, other in (("debug", debug), ("defer_and_fuse", fused)):
        for step, (a, b) in enumerate(zip(strict, other)):
            assert abs(a - b) <= 1e-5 * abs(a), f"{name} step {step}: {b} vs strict {a}"


def test_defer_and_fuse_compiles_nothing_after_warmup_with_changing_lr(config, dataset):
    _, metrics = train_in_mode(
        "defer_and_fuse", config, dataset, 3 + 20, lr_schedule=lambda step: 1e-3 * (1.0 - step / 50.0), warmup=3
    )
    assert metrics["compiles"] == 0, metrics
    assert metrics["cache_misses"] == 0, metrics
    # One fused program per training step, cut at the optimizer step.
    assert metrics["flushes"].get("optimizer_step") == 20, metrics["flushes"]
    assert metrics["programs_executed"] == 20


def test_defer_and_fuse_runs_fewer_programs_than_strict(config, dataset):
    _, strict = train_in_mode("strict", config, dataset, 4, warmup=2)
    _, fused = train_in_mode("defer_and_fuse", config, dataset, 4, warmup=2)
    assert fused["programs_executed"] * 50 < strict["programs_executed"]


def test_defer_and_fuse_flushes_for_host_reads_and_respects_the_size_bound():
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch_tpu.reset_metrics()
        x = torch.ones(8, device="tpu")
        for _ in range(10):
            x = x * 2
        assert torch_tpu.metrics()["programs_executed"] == 0  # still pending
        assert x[3].item() == 1024.0
        assert torch_tpu.metrics()["flushes"].get("host_read", 0) >= 1


def test_defer_and_fuse_random_ops_match_strict():
    torch.manual_seed(7)
    a = torch.rand(5, device="tpu") + torch.randn(5, device="tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.manual_seed(7)
        b = torch.rand(5, device="tpu") + torch.randn(5, device="tpu")
    torch.testing.assert_close(a.cpu(), b.cpu())


def test_error_inside_deferred_run_leaves_pending_work_intact():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.arange(6.0, device="tpu")
        y = x * 3
        with pytest.raises(RuntimeError):
            torch.mm(x.view(2, 3), x.view(2, 3))  # shape error, raised at the call
        torch.testing.assert_close(y.cpu(), torch.arange(6.0) * 3)


def _gelu_layer_norm_linear(x, weight, bias):
    h = torch.nn.functional.gelu(x)
    h = torch.nn.functional.layer_norm(h, h.shape[-1:])
    return torch.nn.functional.linear(h, weight, bias)


def _integer_chain(a, b):
    c = (a * 3 + b) // 2 - (a % 5)
    return torch.cumsum(c.flip(0), 0).max(dim=1).values, c.argsort(dim=1, stable=True), (c > 4).sum()


def test_what_the_modes_guarantee():
    """docs/modes.md, "What the modes guarantee": Strict and Debug are
    bit-identical; DeferAndFuse agrees bit for bit on integer results and
    within rounding on float ones (XLA fuses float arithmetic differently)."""
    torch.manual_seed(3)
    x, weight, bias = torch.randn(16, 64), torch.randn(32, 64) / 8, torch.randn(32)
    a, b = torch.randint(-50, 50, (8, 16)), torch.randint(-50, 50, (8, 16))
    results = {}
    for mode in ("strict", "debug", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            floats = _gelu_layer_norm_linear(x.to("tpu"), weight.to("tpu"), bias.to("tpu")).cpu()
            ints = [t.cpu() for t in _integer_chain(a.to("tpu"), b.to("tpu"))]
        results[mode] = floats, ints
    assert torch.equal(results["strict"][0], results["debug"][0])
    torch.testing.assert_close(results["defer_and_fuse"][0], results["strict"][0], rtol=1e-4, atol=1e-4)
    for mode in ("debug", "defer_and_fuse"):
        for got, want in zip(results[mode][1], results["strict"][1]):
            assert torch.equal(got, want), mode
    torch.testing.assert_close(results["strict"][0], _gelu_layer_norm_linear(x, weight, bias), rtol=1e-4, atol=1e-4)
