"""The example's character-level GPT trains on tpu exactly as on CPU.

Both runs start from the same CPU-initialised weights and see the same
batches (drawn on CPU from the seed); dropout is off, and conftest.py sets
float32 matmul precision "highest", so every step should agree with CPU to
float32 rounding.
"""

import sys

import pytest
import torch
from repo_paths import EXAMPLES

sys.path.insert(0, EXAMPLES)

import train_gpt  # noqa: E402

STEPS = 100
SEED = 1234
BATCH_SIZE = 4
RTOL = 1e-4


@pytest.fixture(scope="module")
def dataset():
    return train_gpt.CharDataset()


@pytest.fixture(scope="module")
def config(dataset):
    return train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=32, dropout=0.0
    )


@pytest.fixture(scope="module")
def runs(dataset, config):
    """(losses, model) for cpu and tpu; trained once for the module's tests."""
    torch.set_float32_matmul_precision("highest")
    out = {}
    for device in ("cpu", "tpu"):
        out[device] = train_gpt.train(
            config, device, STEPS, SEED, batch_size=BATCH_SIZE, dataset=dataset, return_model=True
        )
    return out


def test_batches_depend_only_on_the_seed(dataset):
    draw = lambda: train_gpt.get_batch(dataset.data, 3, 8, torch.Generator().manual_seed(7))  # noqa: E731
    (x1, y1), (x2, y2) = draw(), draw()
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    # Targets are the inputs shifted by one character.
    assert torch.equal(x1[:, 1:], y1[:, :-1])


def test_initial_weights_are_the_same_on_every_device(config):
    cpu_model, _ = train_gpt.make_model_and_optimizer(config, "cpu", SEED)
    tpu_model, _ = train_gpt.make_model_and_optimizer(config, "tpu", SEED)
    for (name, p_cpu), (_, p_tpu) in zip(cpu_model.named_parameters(), tpu_model.named_parameters()):
        assert p_tpu.device.type == "tpu", name
        assert torch.equal(p_tpu.detach().cpu(), p_cpu.detach()), name


def test_tied_head_and_embedding_stay_one_parameter_on_tpu(config):
    # nn.Module.to() keeps shared parameters shared only when
    # torch._has_compatible_shallow_copy_type(cpu_param, tpu_tensor) is true
    # (it then assigns param.data in place); otherwise each module gets its
    # own new Parameter and the tie silently breaks.
    model, _ = train_gpt.make_model_and_optimizer(config, "tpu", SEED)
    assert model.head.weight is model.tok_emb.weight


def test_losses_match_cpu_at_every_step(runs):
    cpu_losses, _ = runs["cpu"]
    tpu_losses, _ = runs["tpu"]
    assert len(tpu_losses) == len(cpu_losses) == STEPS
    for step, (t, c) in enumerate(zip(tpu_losses, cpu_losses), start=1):
        assert abs(t - c) <= RTOL * abs(c), f"step {step}: tpu loss {t!r} vs cpu {c!r}"


def test_loss_decreases(runs):
    losses, _ = runs["tpu"]
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 0.5, f"loss went from {first:.3f} to {last:.3f}"


def key_bias_slice(name, config):
    """The key part of an attention block's qkv bias: softmax over keys is
    invariant to it, so its true gradient is zero and the computed one is
    float32 noise that Adam normalises into steps of up to lr. That noise
    differs between any two backends; nothing else does."""
    if name.endswith("attn.qkv.bias"):
        return slice(config.n_embd, 2 * config.n_embd)
    return None


def test_parameters_after_training_match_cpu(runs, config):
    _, cpu_model = runs["cpu"]
    _, tpu_model = runs["tpu"]
    names = [name for name, _ in cpu_model.named_parameters()]
    assert names == [name for name, _ in tpu_model.named_parameters()]
    for (name, p_cpu), (_, p_tpu) in zip(cpu_model.named_parameters(), tpu_model.named_parameters()):
        assert p_tpu.device.type == "tpu", name
        actual, expected = p_tpu.detach().cpu(), p_cpu.detach()
        noise = key_bias_slice(name, config)
        if noise is not None:
            torch.testing.assert_close(actual[noise], expected[noise], rtol=0, atol=1e-3)
            keep = torch.ones(actual.shape[0], dtype=torch.bool)
            keep[noise] = False
            actual, expected = actual[keep], expected[keep]
        torch.testing.assert_close(
            actual, expected, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"parameter {name}\n{m}"
        )


def test_generation_runs_on_tpu(runs, dataset):
    _, model = runs["tpu"]
    text = train_gpt.sample(model, dataset, prompt="We ", new_tokens=8, seed=0)
    assert text.startswith("We ") and len(text) == 11
