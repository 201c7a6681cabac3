"""Random ops on tpu: reproducibility under torch.manual_seed and tpu
Generators, value ranges and distributions (statistics over large samples,
since the bits differ from CPU's mt19937), dropout and its backward."""

import math

import pytest
import torch
import torch.nn.functional as F

from reference import assert_close, check_op

N = 200_000  # sample size for statistics: bounds below are > 8 standard errors


def draws(make, seed):
    torch.manual_seed(seed)
    return make().cpu()


SAMPLERS = {
    "rand": lambda: torch.rand(64, 3, device="tpu"),
    "randn": lambda: torch.randn(64, 3, device="tpu"),
    "randint": lambda: torch.randint(-50, 50, (64, 3), device="tpu"),
    "rand_bf16": lambda: torch.rand(64, 3, device="tpu", dtype=torch.bfloat16),
    "randn_like": lambda: torch.randn_like(torch.zeros(5, 7, device="tpu")),
    "rand_like": lambda: torch.rand_like(torch.zeros(5, 7, device="tpu")),
    "bernoulli": lambda: torch.bernoulli(torch.full((64, 3), 0.5, device="tpu")),
    "dropout": lambda: F.dropout(torch.ones(64, 3, device="tpu"), 0.5, training=True),
    "random_": lambda: torch.empty(64, 3, device="tpu", dtype=torch.int64).random_(),
    "normal_": lambda: torch.empty(64, 3, device="tpu").normal_(2.0, 3.0),
}


# ---- reproducibility ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_gives_identical_values(name):
    assert torch.equal(draws(SAMPLERS[name], 1234), draws(SAMPLERS[name], 1234))


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_different_seeds_give_different_values(name):
    assert not torch.equal(draws(SAMPLERS[name], 1), draws(SAMPLERS[name], 2))


def test_sequence_after_seed_replays_in_order():
    torch.manual_seed(7)
    first = [torch.rand(100, device="tpu").cpu() for _ in range(3)]
    torch.manual_seed(7)
    second = [torch.rand(100, device="tpu").cpu() for _ in range(3)]
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], first[1])


def test_successive_draws_are_not_shifted_copies():
    # Two ops after one seed use states (seed, c) and (seed, c + 1); the
    # streams must be independent, not the same stream offset by one block.
    a = torch.empty(1000, device="tpu", dtype=torch.int64).random_().cpu()
    b = torch.empty(1000, device="tpu", dtype=torch.int64).random_().cpu()
    assert len(set(a.tolist()) & set(b.tolist())) == 0


def test_successive_draws_are_uncorrelated():
    a = torch.rand(N, device="tpu").cpu().double()
    b = torch.rand(N, device="tpu").cpu().double()
    corr = torch.corrcoef(torch.stack([a, b]))[0, 1]
    assert abs(corr) < 0.02


def test_tpu_generator_reproduces_its_own_seed():
    g = torch.Generator(device="tpu")
    g.manual_seed(99)
    a = torch.rand(50, device="tpu", generator=g).cpu()
    b = torch.rand(50, device="tpu", generator=g).cpu()
    g.manual_seed(99)
    assert torch.equal(torch.rand(50, device="tpu", generator=g).cpu(), a)
    assert torch.equal(torch.rand(50, device="tpu", generator=g).cpu(), b)
    assert not torch.equal(a, b)


def test_tpu_generator_leaves_default_generator_alone():
    torch.manual_seed(5)
    expected = torch.rand(20, device="tpu").cpu()
    torch.manual_seed(5)
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    torch.randn(20, device="tpu", generator=g)
    torch.randint(0, 9, (20,), device="tpu", generator=g)
    assert torch.equal(torch.rand(20, device="tpu").cpu(), expected)


@pytest.mark.parametrize("op", [
    lambda t, g: t.uniform_(generator=g),
    lambda t, g: t.normal_(generator=g),
    lambda t, g: t.bernoulli_(0.5, generator=g),
    lambda t, g: t.random_(0, 10, generator=g),
    lambda t, g: t.random_(generator=g),
    lambda t, g: t.random_(10, generator=g),
])
def test_generator_argument_of_in_place_ops(op):
    def run(seed):
        g = torch.Generator(device="tpu")
        g.manual_seed(seed)
        return op(torch.empty(100, device="tpu"), g).cpu()
    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))


def test_cpu_generator_is_rejected():
    with pytest.raises(RuntimeError):
        torch.rand(5, device="tpu", generator=torch.Generator())


# ---- uniform -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rand_is_uniform_on_zero_one(dtype):
    x = torch.rand(N, device="tpu", dtype=dtype).cpu().double()
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(x.std() - 1 / math.sqrt(12)) < 0.01
    hist = torch.histc(x, bins=10, min=0, max=1) / N
    assert (hist - 0.1).abs().max() < 0.01


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rand_low_precision_stays_below_one(dtype):
    x = torch.rand(N, device="tpu", dtype=dtype)
    assert x.dtype == dtype
    x = x.cpu().double()
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.01


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_uniform_in_place_range(dtype):
    x = torch.empty(N, device="tpu", dtype=dtype).uniform_(-3.0, 5.0).cpu().double()
    assert x.min() >= -3 and x.max() < 5
    assert abs(x.mean() - 1.0) < 0.05
    assert abs(x.std() - 8 / math.sqrt(12)) < 0.05


def test_uniform_narrow_bf16_range_excludes_upper_bound():
    # 1.0 .. 1.0078125 holds two bf16 values; rounding up to `to` must not leak.
    x = torch.empty(N, device="tpu", dtype=torch.bfloat16).uniform_(1.0, 1.0078125).cpu()
    assert (x < 1.0078125).all() and (x >= 1.0).all()


def test_uniform_equal_bounds_gives_the_bound():
    x = torch.empty(10, device="tpu").uniform_(2.5, 2.5).cpu()
    assert torch.equal(x, torch.full((10,), 2.5))


def test_uniform_rejects_reversed_bounds():
    with pytest.raises(RuntimeError, match="from=2 > to=1"):
        torch.empty(3, device="tpu").uniform_(2, 1)


def test_uniform_rejects_integer_tensors():
    with pytest.raises(RuntimeError, match="not implemented"):
        torch.empty(3, device="tpu", dtype=torch.int64).uniform_()


def test_uniform_writes_only_the_view():
    base = torch.full((4, 6), -1.0, device="tpu")
    base[:, ::2].uniform_(0, 1)
    b = base.cpu()
    assert (b[:, 1::2] == -1).all()
    assert ((b[:, ::2] >= 0) & (b[:, ::2] < 1)).all()
    t = torch.full((3, 5), -1.0, device="tpu")
    t.t().uniform_(10, 11)
    assert ((t.cpu() >= 10) & (t.cpu() < 11)).all()


@pytest.mark.parametrize("shape", [(), (1,), (0,), (0, 3), (2, 3, 4)])
def test_rand_shapes(shape):
    x = torch.rand(shape, device="tpu")
    assert x.shape == torch.Size(shape) and x.device.type == "tpu"
    c = x.cpu()
    assert ((c >= 0) & (c < 1)).all()


def test_rand_like_keeps_dtype_and_shape():
    x = torch.rand_like(torch.zeros(3, 4, device="tpu", dtype=torch.bfloat16))
    assert x.shape == (3, 4) and x.dtype == torch.bfloat16


# ---- normal ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_randn_is_standard_normal(dtype):
    x = torch.randn(N, device="tpu", dtype=dtype)
    assert x.dtype == dtype
    x = x.cpu().double()
    assert torch.isfinite(x).all()
    assert abs(x.mean()) < 0.02
    assert abs(x.std() - 1) < 0.02
    # Tails: P(|z| > 2) = 0.0455, P(|z| > 3) = 0.0027.
    assert abs((x.abs() > 2).double().mean() - 0.0455) < 0.005
    assert abs((x.abs() > 3).double().mean() - 0.0027) < 0.001


def test_normal_in_place_mean_and_std():
    x = torch.empty(N, device="tpu").normal_(3.0, 2.0).cpu().double()
    assert abs(x.mean() - 3) < 0.04
    assert abs(x.std() - 2) < 0.04


def test_normal_zero_std_is_the_mean():
    assert torch.equal(torch.empty(5, device="tpu").normal_(1.5, 0.0).cpu(), torch.full((5,), 1.5))


def test_normal_functional_float_args():
    x = torch.normal(4.0, 0.5, size=(N,), device="tpu").cpu().double()
    assert abs(x.mean() - 4) < 0.01 and abs(x.std() - 0.5) < 0.01


def test_normal_rejects_negative_std():
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device="tpu").normal_(0, -1)


def test_randn_like_and_empty():
    x = torch.randn_like(torch.zeros(2, 3, device="tpu"))
    assert x.shape == (2, 3)
    assert torch.randn(0, 4, device="tpu").shape == (0, 4)
    assert torch.randn((), device="tpu").shape == ()


# ---- bernoulli ---------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_bernoulli_scalar_p_frequency(p):
    x = torch.empty(N, device="tpu").bernoulli_(p).cpu()
    assert set(x.unique().tolist()) <= {0.0, 1.0}
    assert abs(x.mean() - p) < 0.01


def test_bernoulli_tensor_probabilities():
    p = torch.tensor([0.0, 1.0, 0.25, 0.75], device="tpu").repeat(N // 4)
    x = torch.bernoulli(p).cpu().view(-1, 4)
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all()
    assert abs(x[:, 2].mean() - 0.25) < 0.01
    assert abs(x[:, 3].mean() - 0.75) < 0.01


def test_bernoulli_in_place_broadcasts_tensor_p():
    p = torch.tensor([0.0, 1.0, 0.5], device="tpu")
    x = torch.empty(N // 3, 3, device="tpu", dtype=torch.int64).bernoulli_(p).cpu()
    assert x.dtype == torch.int64
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all()
    assert abs(x[:, 2].double().mean() - 0.5) < 0.01


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.bool])
def test_bernoulli_keeps_self_dtype(dtype):
    x = torch.empty(1000, device="tpu", dtype=dtype).bernoulli_(0.5)
    assert x.dtype == dtype
    v = x.cpu().double()
    assert set(v.unique().tolist()) == {0.0, 1.0}


def test_bernoulli_bf16_probabilities():
    p = torch.full((N,), 0.3, device="tpu", dtype=torch.bfloat16)
    x = torch.bernoulli(p)
    assert x.dtype == torch.bfloat16
    assert abs(x.cpu().double().mean() - 0.30078125) < 0.01  # bf16(0.3)


def test_bernoulli_rejects_p_outside_unit_interval():
    with pytest.raises(RuntimeError, match="in \\[0, 1\\]"):
        torch.empty(3, device="tpu").bernoulli_(2.0)


# ---- random_ / randint -------------------------------------------------------
def test_randint_range_and_coverage():
    x = torch.randint(-3, 7, (N,), device="tpu").cpu()
    assert x.dtype == torch.int64
    assert x.min() == -3 and x.max() == 6
    counts = torch.bincount(x + 3, minlength=10).double() / N
    assert (counts - 0.1).abs().max() < 0.01


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8, torch.float32, torch.bfloat16])
def test_randint_dtypes(dtype):
    x = torch.randint(0, 100, (N,), device="tpu", dtype=dtype)
    assert x.dtype == dtype
    v = x.cpu().long()
    assert v.min() == 0 and v.max() == 99
    assert len(v.unique()) == 100


def test_randint_high_only_and_like():
    x = torch.randint(5, (1000,), device="tpu").cpu()
    assert x.min() == 0 and x.max() == 4
    y = torch.randint_like(torch.zeros(1000, device="tpu"), 3, 6).cpu()
    assert y.dtype == torch.float32 and set(y.unique().tolist()) == {3.0, 4.0, 5.0}


def test_randint_wide_range():
    # Ranges >= 2^32 draw 64-bit values, as PyTorch's random64 path.
    x = torch.randint(-2**40, 2**40, (N,), device="tpu").cpu()
    assert x.min() >= -2**40 and x.max() < 2**40
    assert (x < -2**39).any() and (x > 2**39).any()


def test_random_from_to_and_to_overloads():
    x = torch.empty(N, device="tpu").random_(10, 20).cpu()
    assert x.min() == 10 and x.max() == 19 and (x == x.round()).all()
    y = torch.empty(N, device="tpu", dtype=torch.int32).random_(4).cpu()
    assert set(y.unique().tolist()) == {0, 1, 2, 3}


def test_random_from_without_to_goes_to_dtype_max():
    x = torch.empty(N, device="tpu", dtype=torch.uint8).random_(200, None).cpu()
    assert x.min() == 200 and x.max() == 255
    f = torch.empty(N, device="tpu").random_(0, None).cpu()
    assert f.min() >= 0 and f.max() <= 2**24 and f.max() > 2**23


def test_random_full_int64_range():
    x = torch.empty(N, device="tpu", dtype=torch.int64).random_(-2**63, None).cpu()
    assert (x < -2**62).any() and (x > 2**62).any()


@pytest.mark.parametrize("dtype,hi", [
    (torch.int64, 2**63 - 1), (torch.int32, 2**31 - 1), (torch.int16, 2**15 - 1), (torch.int8, 127),
    (torch.uint8, 255), (torch.float32, 2**24), (torch.bfloat16, 2**8), (torch.float64, 2**53),
])
def test_random_default_range_is_zero_to_max(dtype, hi):
    # PyTorch: integers in [0, max], floats in [0, 2^digits] (exact integers).
    x = torch.empty(N, device="tpu", dtype=dtype).random_()
    assert x.dtype == dtype
    v = x.cpu()
    if dtype.is_floating_point:
        v = v.double()
        assert (v == v.round()).all()
    assert v.min() >= 0 and v.max() <= hi
    assert v.double().mean() > hi * 0.45


def test_random_bool_gives_both_values():
    x = torch.empty(1000, device="tpu", dtype=torch.bool).random_().cpu()
    assert x.any() and not x.all()


def test_random_rejects_empty_range():
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        torch.empty(3, device="tpu").random_(5, 3)


def test_random_rejects_out_of_dtype_range():
    with pytest.raises(RuntimeError, match="expects 'to' to be in"):
        torch.randint(0, 300, (3,), device="tpu", dtype=torch.uint8)


# ---- dropout -----------------------------------------------------------------
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_train_zeroes_and_scales(p):
    x = torch.rand(N, device="tpu") + 1  # no zeros in the input
    y = F.dropout(x, p, training=True).cpu()
    kept = y != 0
    assert abs((~kept).double().mean() - p) < 0.01
    torch.testing.assert_close(y[kept], x.cpu()[kept] / (1 - p))


def test_dropout_eval_is_identity():
    x = torch.randn(10, 10)
    check_op(lambda t: F.dropout(t, 0.5, training=False), x)
    check_op(lambda t: torch.nn.Dropout(0.3).eval()(t), x)


def test_dropout_p_zero_and_one():
    x = torch.randn(100, device="tpu")
    assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    assert (F.dropout(x, 1.0, training=True).cpu() == 0).all()


def test_native_dropout_mask_matches_output():
    x = torch.rand(N, device="tpu") + 1
    out, mask = torch.ops.aten.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and mask.shape == x.shape
    out, mask, xc = out.cpu(), mask.cpu(), x.cpu()
    torch.testing.assert_close(out, xc * mask / 0.7)
    assert abs(mask.double().mean() - 0.7) < 0.01


def test_native_dropout_train_none_means_train():
    x = torch.ones(1000, device="tpu")
    out, mask = torch.ops.aten.native_dropout(x, 0.5, None)
    assert not mask.cpu().all()


def test_native_dropout_eval_returns_input_and_true_mask():
    x = torch.randn(4, 5)
    out, mask = torch.ops.aten.native_dropout(x.to("tpu"), 0.5, False)
    assert_close(out, x)
    assert mask.dtype == torch.bool and mask.cpu().all()


def test_native_dropout_empty():
    out, mask = torch.ops.aten.native_dropout(torch.empty(0, 3, device="tpu"), 0.5, True)
    assert out.shape == (0, 3) and mask.shape == (0, 3) and mask.dtype == torch.bool


def test_dropout_bf16():
    x = torch.ones(N, device="tpu", dtype=torch.bfloat16)
    y = F.dropout(x, 0.5, training=True)
    assert y.dtype == torch.bfloat16
    v = y.cpu().double()
    assert set(v.unique().tolist()) == {0.0, 2.0}
    assert abs((v == 0).double().mean() - 0.5) < 0.01


def test_dropout_non_contiguous_input():
    x = (torch.rand(300, 200, device="tpu") + 1).t()
    y = F.dropout(x, 0.5, training=True).cpu()
    kept = y != 0
    torch.testing.assert_close(y[kept], x.cpu()[kept] * 2)


def test_dropout_backward_uses_the_forward_mask():
    x = (torch.rand(64, 32, device="tpu") + 1).requires_grad_()
    drop = torch.nn.Dropout(0.4)
    y = drop(x)
    w = torch.randn(64, 32, device="tpu")
    (y * w).sum().backward()
    kept = (y != 0).cpu()
    expected = w.cpu() * kept / 0.6
    torch.testing.assert_close(x.grad.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_dropout_backward_matches_cpu(dtype):
    grad = torch.randn(7, 9).to(dtype)
    mask = torch.rand(7, 9) > 0.3
    check_op(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 1 / 0.7), grad, mask)
    check_op(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 0.0), grad, mask)
