"""torch.autocast("tpu"): CUDA's autocast policy on tpu tensors, eager and
compiled, checked against CPU running the same casts by hand."""

import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from repo_paths import EXAMPLES

import torch_tpu  # noqa: F401  (registers the tpu device)

sys.path.insert(0, EXAMPLES)
import train_gpt  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        a = torch.randn(4, 4).tpu()
        assert (a @ a).dtype == torch.bfloat16


# (op, what CUDA's policy gives for float32 inputs under autocast)
POLICY_CASES = [
    ("mm", lambda a, b: a @ b, "low"),
    ("linear", lambda a, b: F.linear(a, b, b[0]), "low"),
    ("bmm", lambda a, b: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)), "low"),
    ("addmm", lambda a, b: torch.addmm(a, a, b), "low"),
    ("conv2d", lambda a, b: F.conv2d(a.view(1, 1, 8, 8), b[:3, :3].reshape(1, 1, 3, 3)), "low"),
    ("softmax", lambda a, b: a.softmax(-1), "fp32"),
    ("log_softmax", lambda a, b: F.log_softmax(a, -1), "fp32"),
    ("sum", lambda a, b: a.sum(), "fp32"),
    ("exp", lambda a, b: a.exp(), "fp32"),
    ("layer_norm", lambda a, b: F.layer_norm(a, (8,)), "fp32"),
    ("mse_loss", lambda a, b: F.mse_loss(a, b), "fp32"),
    ("relu", lambda a, b: a.relu(), "same"),
    ("add", lambda a, b: a + b, "same"),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,fn,policy", POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_ops_follow_cudas_autocast_policy_and_match_cpu_casts(name, fn, policy, dtype):
    torch.manual_seed(0)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with torch.autocast("tpu", dtype=dtype):
        out = fn(a.tpu(), b.tpu())
    expected_dtype = {"low": dtype, "fp32": torch.float32, "same": torch.float32}[policy]
    assert out.dtype == expected_dtype
    # CPU with the policy's casts made by hand.
    cast = {"low": dtype, "fp32": torch.float32, "same": torch.float32}[policy]
    expected = fn(a.to(cast), b.to(cast)).to(expected_dtype)
    tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-5}[cast]
    torch.testing.assert_close(out.cpu().float(), expected.float(), rtol=tol, atol=tol * 4)


def test_mixed_dtype_ops_promote_to_the_widest_input():
    a32, b16 = torch.randn(4).tpu(), torch.randn(4).tpu().bfloat16()
    with torch.autocast("tpu"):
        assert torch.addcmul(a32, b16, b16).dtype == torch.float32
        assert torch.atan2(b16, a32).dtype == torch.float32


def test_lower_precision_inputs_run_in_float32_where_the_policy_says():
    x = torch.randn(4, 8).tpu().bfloat16()
    with torch.autocast("tpu"):
        assert x.softmax(-1).dtype == torch.float32
        assert F.layer_norm(x, (8,)).dtype == torch.float32


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p, t = torch.rand(4).tpu(), torch.rand(4).tpu()
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, t)
    with torch.autocast("tpu"):
        assert F.binary_cross_entropy_with_logits(p, t).dtype == torch.float32


def test_disabled_region_and_outside_run_in_float32():
    a = torch.randn(4, 4).tpu()
    with torch.autocast("tpu"):
        with torch.autocast("tpu", enabled=False):
            assert (a @ a).dtype == torch.float32
    assert (a @ a).dtype == torch.float32


def _gpt_config():
    dataset = train_gpt.CharDataset()
    config = train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=32, dropout=0.0
    )
    return dataset, config


def test_gpt_training_under_autocast_eager_and_compiled_agree():
    dataset, config = _gpt_config()
    generator = torch.Generator().manual_seed(4)
    batches = [train_gpt.get_batch(dataset.data, 4, config.block_size, generator) for _ in range(3)]
    runs = {}
    for name in ("eager", "compiled"):
        model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 4)
        step_model = torch.compile(model, backend="tpu") if name == "compiled" else model
        losses = []
        for x, y in batches:
            with torch.autocast("tpu", dtype=torch.bfloat16):
                _, loss = step_model(x.tpu(), y.tpu())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            assert all(p.grad.dtype == torch.float32 for p in model.parameters())
            optimizer.step()
            losses.append(loss.item())
        runs[name] = (losses, [p.detach().cpu() for p in model.parameters()])
    # Both run the same casts; only the order of float32 reductions may differ.
    for a, b in zip(runs["eager"][0], runs["compiled"][0]):
        assert abs(a - b) <= 1e-3 * abs(a)
    for p_e, p_c in zip(runs["eager"][1], runs["compiled"][1]):
        torch.testing.assert_close(p_c, p_e, rtol=1e-3, atol=1e-4)


def test_gpt_loss_under_autocast_is_close_to_float32():
    dataset, config = _gpt_config()
    model, _ = train_gpt.make_model_and_optimizer(config, "tpu", 6)
    x, y = train_gpt.get_batch(dataset.data, 4, config.block_size, torch.Generator().manual_seed(6))
    _, loss32 = model(x.tpu(), y.tpu())
    with torch.autocast("tpu"):
        logits, loss16 = model(x.tpu(), y.tpu())
    assert logits.dtype == torch.bfloat16 and loss16.dtype == torch.float32
    assert abs(loss16.item() - loss32.item()) <= 2e-2 * loss32.item()


# ---- GradScaler --------------------------------------------------------------


@pytest.mark.parametrize("found_before", [0.0, 1.0])
def test_unscale_and_non_finite_check_match_cpu(found_before):
    torch.manual_seed(1)
    cases = [
        [torch.randn(5), torch.randn(2, 3).bfloat16(), torch.randn(4).half()],
        [torch.randn(5), torch.tensor([1.0, float("inf")]), torch.randn(3).bfloat16()],
        [torch.tensor([float("nan"), 2.0]).half(), torch.randn(3)],
        [torch.tensor(3.0)],  # a 0-d gradient
    ]
    for grads in cases:
        results = {}
        for dev in ("cpu", "tpu"):
            gs = [g.clone().to(dev) for g in grads]
            found = torch.full((1,), found_before).to(dev)
            torch._amp_foreach_non_finite_check_and_unscale_(gs, found, torch.full((1,), 0.25).to(dev))
            results[dev] = ([g.cpu() for g in gs], found.cpu())
        for g_t, g_c in zip(results["tpu"][0], results["cpu"][0]):
            assert g_t.dtype == g_c.dtype
            torch.testing.assert_close(g_t, g_c, equal_nan=True)
        torch.testing.assert_close(results["tpu"][1], results["cpu"][1])


def test_update_scale_matches_cpu_step_by_step():
    # growth_interval 2: grows after two good steps, backs off (and restarts
    # the count) after a bad one, and never grows into infinity.
    steps = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    for start in (1024.0, 3e38):
        state = {
            dev: (torch.full((1,), start).to(dev), torch.zeros(1, dtype=torch.int32).to(dev)) for dev in ("cpu", "tpu")
        }
        for found in steps:
            for dev, (scale, tracker) in state.items():
                out = torch._amp_update_scale_(scale, tracker, torch.full((1,), found).to(dev), 2.0, 0.5, 2)
                assert out is scale
            torch.testing.assert_close(state["tpu"][0].cpu(), state["cpu"][0])
            assert state["tpu"][1].cpu().item() == state["cpu"][1].item()


@pytest.mark.parametrize(
    "args",
    [
        (torch.ones(2), torch.zeros(1, dtype=torch.int32), torch.zeros(1)),
        (torch.ones(1), torch.zeros(2, dtype=torch.int32), torch.zeros(1)),
        (torch.ones(1), torch.zeros(1, dtype=torch.int32), torch.zeros(3)),
        (torch.ones(1), torch.zeros(1), torch.zeros(1)),
        (torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.int32), torch.zeros(1)),
        (torch.ones(1), torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.float64)),
    ],
    ids=["scale numel", "tracker numel", "found numel", "tracker dtype", "scale dtype", "found dtype"],
)
def test_update_scale_rejects_what_cpu_rejects(args):
    with pytest.raises(RuntimeError) as cpu:
        torch._amp_update_scale_(*[a.clone() for a in args], 2.0, 0.5, 2)
    with pytest.raises(RuntimeError) as tpu:
        torch._amp_update_scale_(*[a.tpu() for a in args], 2.0, 0.5, 2)
    assert str(tpu.value) == str(cpu.value)


def test_training_with_grad_scaler_skips_overflowing_steps_as_cpu_does():
    # A step whose gradients overflow is skipped and the scale backs off, on
    # both devices; the other steps update the parameters alike.
    results = {}
    for dev in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(dev)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(dev, init_scale=2.0**8, growth_interval=2)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(dev)
        scales = []
        for step in range(5):
            loss = model(x).square().mean() * (1e38 if step == 2 else 1.0)  # times the scale: inf
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scales.append(scaler.get_scale())
        results[dev] = (scales, [p.detach().cpu() for p in model.parameters()])
    assert results["tpu"][0] == results["cpu"][0]
    assert results["cpu"][0][2] == results["cpu"][0][1] / 2  # the overflowing step backed off
    for p_t, p_c in zip(results["tpu"][1], results["cpu"][1]):
        torch.testing.assert_close(p_t, p_c, rtol=1e-5, atol=1e-6)


def test_autocast_float16_step_with_grad_scaler_runs_on_tpu():
    torch.manual_seed(0)
    model = nn.Linear(8, 2).tpu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu")
    before = model.weight.detach().cpu().clone()
    with torch.autocast("tpu", dtype=torch.float16):
        out = model(torch.randn(4, 8).tpu())
        assert out.dtype == torch.float16
        loss = out.float().square().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert model.weight.grad.dtype == torch.float32
    assert not torch.equal(model.weight.detach().cpu(), before)
    assert scaler.get_scale() == 2.0**16
