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


@pytest.mark.parametrize(
    "op",
    [
        lambda t, g: t.uniform_(generator=g),
        lambda t, g: t.normal_(generator=g),
        lambda t, g: t.bernoulli_(0.5, generator=g),
        lambda t, g: t.random_(0, 10, generator=g),
        lambda t, g: t.random_(generator=g),
        lambda t, g: t.random_(10, generator=g),
    ],
)
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
    x = torch.randint(-(2**40), 2**40, (N,), device="tpu").cpu()
    assert x.min() >= -(2**40) and x.max() < 2**40
    assert (x < -(2**39)).any() and (x > 2**39).any()


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
    x = torch.empty(N, device="tpu", dtype=torch.int64).random_(-(2**63), None).cpu()
    assert (x < -(2**62)).any() and (x > 2**62).any()


@pytest.mark.parametrize(
    "dtype,hi",
    [
        (torch.int64, 2**63 - 1),
        (torch.int32, 2**31 - 1),
        (torch.int16, 2**15 - 1),
        (torch.int8, 127),
        (torch.uint8, 255),
        (torch.float32, 2**24),
        (torch.bfloat16, 2**8),
        (torch.float64, 2**53),
    ],
)
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


# ---- more distributions: cauchy, exponential, geometric, log_normal ------------------
def ks_distance(samples, cdf):
    """Kolmogorov-Smirnov statistic of `samples` (1-d, double) against `cdf`."""
    x, _ = samples.sort()
    n = x.numel()
    f = cdf(x)
    hi = torch.arange(1, n + 1, dtype=torch.float64) / n
    return max((hi - f).max().item(), (f - (hi - 1.0 / n)).max().item())


# KS at N = 200000: P(D > 1.95 / sqrt(N)) is 0.001 for the true distribution,
# while a wrong parameter (rate off by 2%) gives D around 0.007.
KS_BOUND = 1.95 / math.sqrt(N)

DISTRIBUTIONS = {
    # name: (sampler on a tensor, CDF, mean, variance)
    "exponential": (lambda t: t.exponential_(2.0), lambda x: 1 - torch.exp(-2.0 * x), 0.5, 0.25),
    "log_normal": (
        lambda t: t.log_normal_(0.5, 0.4),
        lambda x: 0.5 * (1 + torch.erf((torch.log(x) - 0.5) / (0.4 * math.sqrt(2)))),
        math.exp(0.5 + 0.08),
        (math.exp(0.16) - 1) * math.exp(1 + 0.16),
    ),
    "cauchy": (lambda t: t.cauchy_(1.0, 2.0), lambda x: 0.5 + torch.atan((x - 1.0) / 2.0) / math.pi, None, None),
    "normal": (
        lambda t: t.normal_(-1.0, 3.0),
        lambda x: 0.5 * (1 + torch.erf((x + 1.0) / (3.0 * math.sqrt(2)))),
        -1.0,
        9.0,
    ),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_distribution_matches_its_cdf(name):
    sample, cdf, _, _ = DISTRIBUTIONS[name]
    x = sample(torch.empty(N, device="tpu")).cpu().double()
    assert torch.isfinite(x).all()
    assert ks_distance(x, cdf) < KS_BOUND


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["exponential", "log_normal", "normal"])
def test_distribution_mean_and_variance(name, dtype):
    sample, _, mean, var = DISTRIBUTIONS[name]
    x = sample(torch.empty(N, device="tpu", dtype=dtype))
    assert x.dtype == dtype
    x = x.cpu().double()
    # > 8 standard errors (4th moments included) plus bf16 rounding.
    assert abs(x.mean() - mean) < 8 * math.sqrt(var / N) + (0.01 * abs(mean) if dtype == torch.bfloat16 else 0)
    assert abs(x.var() / var - 1) < (0.05 if name == "log_normal" else 0.02)


def test_cauchy_median_and_quartiles():
    x = torch.empty(N, device="tpu").cauchy_(1.0, 2.0).cpu().double()
    q = torch.quantile(x[:100_000], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    torch.testing.assert_close(q, torch.tensor([-1.0, 1.0, 3.0], dtype=torch.float64), atol=0.05, rtol=0)


def test_exponential_is_positive():
    x = torch.empty(N, device="tpu").exponential_(0.5).cpu()
    assert (x > 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.2, 0.7])
def test_geometric_counts_trials_to_first_success(p, dtype):
    x = torch.empty(N, device="tpu", dtype=dtype).geometric_(p)
    assert x.dtype == dtype
    x = x.cpu().double()
    assert x.min() >= 1 and (x == x.round()).all()
    # P(X = k) = (1 - p)^(k - 1) p
    for k in (1, 2, 3):
        assert abs((x == k).double().mean() - (1 - p) ** (k - 1) * p) < 0.005
    assert abs(x.mean() - 1 / p) < 8 * math.sqrt((1 - p) / p**2 / N)


@pytest.mark.parametrize(
    "op,match",
    [
        (lambda t: t.cauchy_(0, 0), "cauchy_ expects sigma > 0.0, but found sigma=0"),
        (lambda t: t.exponential_(0), "exponential_ expects lambda > 0.0, but found lambda=0"),
        (lambda t: t.exponential_(-1.5), "exponential_ expects lambda > 0.0"),
        (lambda t: t.geometric_(-1), r"geometric_ expects p to be in \(0, 1\), but got p=-1"),
        (lambda t: t.geometric_(1), r"geometric_ expects p to be in \(0, 1\)"),
        (lambda t: t.log_normal_(0, 0), "log_normal_ expects std > 0.0, but found std=0"),
        (lambda t: torch.normal(t, -1.0), "normal expects std >= 0.0, but found std -1"),
    ],
)
def test_invalid_distribution_parameters_raise_like_cpu(op, match):
    with pytest.raises(RuntimeError, match=match):
        op(torch.zeros(10))
    with pytest.raises(RuntimeError, match=match):
        op(torch.zeros(10, device="tpu"))


def test_float_only_samplers_reject_integer_tensors():
    for op in (lambda t: t.cauchy_(), lambda t: t.exponential_(), lambda t: t.log_normal_()):
        with pytest.raises(RuntimeError):
            op(torch.zeros(3, dtype=torch.int64, device="tpu"))


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.cauchy_(),
        lambda t: t.exponential_(),
        lambda t: t.geometric_(0.5),
        lambda t: t.log_normal_(),
    ],
)
def test_samplers_write_only_the_view_and_handle_empty(op):
    base = torch.full((4, 6), -7.0, device="tpu")
    op(base[:, ::2])
    b = base.cpu()
    assert (b[:, 1::2] == -7).all() and (b[:, ::2] != -7).all()
    assert op(torch.empty(0, 3, device="tpu")).shape == (0, 3)


def test_functional_and_out_variants_sample():
    t = torch.zeros(1000, device="tpu")
    for op in (torch.ops.aten.exponential, torch.ops.aten.cauchy, torch.ops.aten.log_normal):
        assert op(t).shape == t.shape and op(t).device.type == "tpu"
    out = torch.empty(1000, device="tpu")
    torch.ops.aten.exponential.out(t, 3.0, out=out)
    assert (out.cpu() > 0).all()


# ---- normal with tensor mean / std --------------------------------------------------
def test_normal_tensor_mean_and_std_per_element():
    mean = torch.tensor([-5.0, 0.0, 10.0], device="tpu").repeat(N // 3)
    std = torch.tensor([1.0, 0.5, 3.0], device="tpu").repeat(N // 3)
    x = torch.normal(mean, std).cpu().double().view(-1, 3)
    torch.testing.assert_close(x.mean(0), torch.tensor([-5.0, 0.0, 10.0], dtype=torch.float64), atol=0.05, rtol=0)
    torch.testing.assert_close(x.std(0), torch.tensor([1.0, 0.5, 3.0], dtype=torch.float64), atol=0.05, rtol=0)


def test_normal_broadcasts_mean_and_std_like_cpu():
    mean, std = torch.zeros(5, 1, device="tpu"), torch.ones(1, 4, device="tpu")
    assert torch.normal(mean, std).shape == torch.normal(mean.cpu(), std.cpu()).shape == (5, 4)
    assert torch.normal(mean, 2.0).shape == (5, 1)
    assert torch.normal(3.0, std).shape == (1, 4)


def test_normal_float_mean_tensor_std():
    std = torch.full((N,), 2.0, device="tpu")
    x = torch.normal(3.0, std).cpu().double()
    assert abs(x.mean() - 3) < 0.04 and abs(x.std() - 2) < 0.04


def test_normal_tensor_out_and_bf16():
    mean = torch.zeros(N, device="tpu", dtype=torch.bfloat16)
    out = torch.empty(N, device="tpu", dtype=torch.bfloat16)
    torch.normal(mean, 1.0, out=out)
    v = out.cpu().double()
    assert out.dtype == torch.bfloat16 and abs(v.mean()) < 0.02 and abs(v.std() - 1) < 0.02


def test_normal_zero_std_tensor_gives_mean():
    mean = torch.arange(6.0, device="tpu")
    assert torch.equal(torch.normal(mean, torch.zeros(6, device="tpu")).cpu(), torch.arange(6.0))


# ---- multinomial --------------------------------------------------------------------
def test_multinomial_with_replacement_frequencies():
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], device="tpu")
    x = torch.multinomial(p, N, replacement=True).cpu()
    assert x.dtype == torch.int64 and x.shape == (N,)
    freq = torch.bincount(x, minlength=4).double() / N
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.float64), atol=0.006, rtol=0)


def test_multinomial_unnormalized_rows_sample_each_row():
    w = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 5.0]], device="tpu")
    x = torch.multinomial(w, 20000, replacement=True).cpu()
    assert x.shape == (2, 20000)
    assert abs((x[0] == 1).double().mean() - 0.75) < 0.02 and not (x[0] == 2).any()
    assert (x[1] == 2).all()


def test_multinomial_without_replacement_draws_distinct_nonzero_categories():
    w = torch.rand(64, 10, device="tpu") + 0.01
    w[:, 3] = 0
    x = torch.multinomial(w, 9).cpu()
    assert x.shape == (64, 9)
    for row in x:
        assert len(set(row.tolist())) == 9 and 3 not in row.tolist()


def test_multinomial_without_replacement_first_draw_follows_probabilities():
    p = torch.tensor([0.5, 0.25, 0.125, 0.125], device="tpu").expand(N // 4, 4)
    first = torch.multinomial(p, 2)[:, 0].cpu()
    freq = torch.bincount(first, minlength=4).double() / first.numel()
    torch.testing.assert_close(freq, torch.tensor([0.5, 0.25, 0.125, 0.125], dtype=torch.float64), atol=0.01, rtol=0)
    # Second draw without replacement: P(second = 0) = sum_j p_j * p_0 / (1 - p_j) over j != 0.
    second = torch.multinomial(p, 2)[:, 1].cpu()
    expected = sum(pj * 0.5 / (1 - pj) for pj in (0.25, 0.125, 0.125))
    assert abs((second == 0).double().mean() - expected) < 0.01


def test_multinomial_errors_like_cpu():
    for make, kwargs, match in [
        (lambda d: torch.ones(1, 2, 3, device=d), dict(num_samples=2), "1 or 2"),
        (lambda d: torch.ones(2, dtype=torch.long, device=d), dict(num_samples=1), "floating-point dtypes"),
        (lambda d: torch.ones(2, device=d), dict(num_samples=0), "n_sample <= 0"),
        (lambda d: torch.ones(2, device=d), dict(num_samples=3), "n_sample > prob_dist"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            torch.multinomial(make("cpu"), **kwargs)
        with pytest.raises(RuntimeError, match=match):
            torch.multinomial(make("tpu"), **kwargs)
    with pytest.raises(RuntimeError, match="Long tensor out"):
        torch.multinomial(torch.ones(2, device="tpu"), 1, out=torch.empty(1, device="tpu"))


@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize(
    "probs,match",
    [
        ([0.5, float("inf"), 0.5], "inf"),
        ([0.5, float("nan"), 0.5], "inf"),
        ([0.5, -0.1, 0.5], "element < 0"),
        ([[0.5, 0.5], [0.0, 0.0]], "sum of probabilities"),
    ],
)
def test_multinomial_invalid_distribution_raises_like_cpu(probs, match, replacement):
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=match if device == "tpu" else None):
            torch.multinomial(torch.tensor(probs, device=device), 2, replacement=replacement)


def test_multinomial_check_leaves_valid_rows_sampling():
    w = torch.tensor([[0.0, 1.0], [1.0, 0.0]], device="tpu")
    assert torch.multinomial(w, 1).cpu().flatten().tolist() == [1, 0]


# ---- randperm -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "n,dtype",
    [
        (0, torch.int64),
        (1, torch.int64),
        (10, torch.int64),
        (1000, torch.int32),
        (300, torch.float32),
        (5000, torch.int64),
    ],
)
def test_randperm_is_a_permutation(n, dtype):
    x = torch.randperm(n, device="tpu", dtype=dtype)
    assert x.dtype == dtype and x.shape == (n,) and x.device.type == "tpu"
    assert torch.equal(x.cpu().long().sort().values, torch.arange(n))


def test_randperm_positions_are_uniform():
    # 600 draws: each frequency's standard deviation is 0.016, so 0.06 is
    # 3.7 of them (the test is seeded, so it cannot flake).
    first = torch.stack([torch.randperm(5, device="tpu") for _ in range(600)]).cpu()
    freq = torch.stack([torch.bincount(first[:, j], minlength=5) for j in range(5)]).double() / 600
    assert (freq - 0.2).abs().max() < 0.06


def test_randperm_out_and_generator():
    out = torch.empty(7, dtype=torch.int64, device="tpu")
    torch.randperm(7, out=out)
    assert torch.equal(out.cpu().sort().values, torch.arange(7))
    g1 = torch.Generator(device="tpu").manual_seed(3)
    g2 = torch.Generator(device="tpu").manual_seed(3)
    assert torch.equal(
        torch.randperm(50, device="tpu", generator=g1).cpu(), torch.randperm(50, device="tpu", generator=g2).cpu()
    )


# ---- reproducibility of the new samplers ----------------------------------------------
MORE_SAMPLERS = {
    "cauchy_": lambda: torch.empty(64, 3, device="tpu").cauchy_(),
    "exponential_": lambda: torch.empty(64, 3, device="tpu").exponential_(),
    "geometric_": lambda: torch.empty(64, 3, device="tpu").geometric_(0.3),
    "log_normal_": lambda: torch.empty(64, 3, device="tpu").log_normal_(),
    "normal_tensor": lambda: torch.normal(torch.zeros(64, 3, device="tpu"), torch.ones(64, 3, device="tpu")),
    "multinomial": lambda: torch.multinomial(torch.ones(8, 50, device="tpu"), 10),
    "multinomial_replacement": lambda: torch.multinomial(torch.ones(8, 50, device="tpu"), 10, replacement=True),
    "randperm": lambda: torch.randperm(100, device="tpu"),
}


@pytest.mark.parametrize("name", sorted(MORE_SAMPLERS))
def test_more_samplers_replay_under_manual_seed(name):
    assert torch.equal(draws(MORE_SAMPLERS[name], 77), draws(MORE_SAMPLERS[name], 77))
    assert not torch.equal(draws(MORE_SAMPLERS[name], 77), draws(MORE_SAMPLERS[name], 78))


@pytest.mark.parametrize("name", sorted(MORE_SAMPLERS))
def test_more_samplers_replay_under_tpu_manual_seed(name):
    def run(seed):
        torch.tpu.manual_seed(seed)
        return MORE_SAMPLERS[name]().cpu()

    assert torch.equal(run(5), run(5))
    assert not torch.equal(run(5), run(6))


@pytest.mark.parametrize(
    "op",
    [
        lambda t, g: t.cauchy_(generator=g),
        lambda t, g: t.exponential_(generator=g),
        lambda t, g: t.geometric_(0.4, generator=g),
        lambda t, g: t.log_normal_(generator=g),
        lambda t, g: torch.normal(t, 1.0, generator=g),
        lambda t, g: torch.multinomial(t + 1, 5, generator=g),
    ],
)
def test_generator_argument_of_distributions(op):
    def run(seed):
        g = torch.Generator(device="tpu")
        g.manual_seed(seed)
        return op(torch.zeros(100, device="tpu"), g).cpu()

    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))


def test_distributions_are_lowered_not_fallbacks():
    import torch_tpu

    torch_tpu.reset_metrics()
    for make in MORE_SAMPLERS.values():
        make()
    assert torch_tpu.metrics()["cpu_fallbacks"] == {}
