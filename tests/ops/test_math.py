"""The lowerings of csrc/lower/math.cpp against CPU PyTorch: inverse and
hyperbolic trigonometry, exp2/log10, erfc/erfinv, sign and magnitude ops,
logit, logaddexp, nan_to_num, gcd/lcm, shifts, round(decimals), frexp; over
dtypes, special values, broadcasting, non-contiguous inputs, in-place and
out= variants, and float backward."""

import pytest
import torch
from reference import assert_close, check_op, to_device

SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 3.0, 1e-30, 100.0]
FLOAT_DTYPES = [torch.float32, torch.bfloat16]


def specials(dtype=torch.float32):
    return torch.tensor(SPECIALS, dtype=dtype)


def randn(*shape, dtype=torch.float32, scale=3.0):
    return (torch.randn(shape) * scale).to(dtype)


UNARY = {
    "acos": (torch.acos, -1.0, 1.0),
    "acosh": (torch.acosh, 1.0, 6.0),
    "asin": (torch.asin, -1.0, 1.0),
    "asinh": (torch.asinh, -6.0, 6.0),
    "atan": (torch.atan, -6.0, 6.0),
    "atanh": (torch.atanh, -0.99, 0.99),
    "cosh": (torch.cosh, -6.0, 6.0),
    "sinh": (torch.sinh, -6.0, 6.0),
    "log10": (torch.log10, 0.01, 100.0),
    "exp2": (torch.exp2, -20.0, 20.0),
    "erfc": (torch.erfc, -4.0, 4.0),
    "erfinv": (torch.erfinv, -0.99, 0.99),
    "frac": (torch.frac, -10.0, 10.0),
    "sinc": (torch.sinc, -4.0, 4.0),
    "angle": (torch.angle, -4.0, 4.0),
    "logit": (torch.logit, 0.01, 0.99),
}


def uniform(shape, low, high, dtype=torch.float32):
    return torch.empty(shape).uniform_(low, high).to(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_matches_cpu_in_its_domain(name, dtype):
    fn, low, high = UNARY[name]
    check_op(fn, uniform((4, 5), low, high, dtype))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_match_cpu(name):
    fn = UNARY[name][0]
    check_op(fn, specials())


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"frac"}))
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_unary_integer_input_computes_in_float32(name, dtype):
    x = torch.tensor([0, 1, 2, 3], dtype=torch.int64).to(dtype)
    out = check_op(UNARY[name][0], x)
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_backward_matches_cpu(name):
    fn, low, high = UNARY[name]
    check_op(fn, uniform((3, 4), low, high), grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["acos", "sinh", "exp2", "erfinv", "sinc", "frac"])
def test_unary_in_place_out_and_non_contiguous(name):
    fn, low, high = UNARY[name]
    base = uniform((4, 6), low, high)
    view = base.t()[1:]
    expected = fn(view)
    tpu_base = to_device(base, "tpu")
    assert_close(fn(tpu_base.t()[1:]), expected)
    getattr(tpu_base.t()[1:], name + "_")()
    assert_close(tpu_base.t()[1:], expected)
    out = torch.empty(0, device="tpu")
    fn(to_device(view, "tpu"), out=out)
    assert_close(out, expected)


def test_exp2_is_exact_for_integral_exponents_and_overflows_like_cpu():
    # Not below -126: XLA flushes subnormal results to zero.
    x = torch.tensor([-126.0, -20.0, 0.0, 20.0, 64.5, 127.0, 128.0, 1000.0, -1000.0])
    check_op(torch.exp2, x, atol=0, rtol=0)


def test_frac_of_integer_input_raises_like_cpu():
    with pytest.raises(NotImplementedError):
        torch.frac(torch.arange(3, device="tpu"))


# ---- binary ------------------------------------------------------------------------
BINARY = {
    "copysign": torch.copysign,
    "hypot": torch.hypot,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "nextafter": torch.nextafter,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "heaviside": torch.heaviside,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (3,))])
def test_binary_broadcasts_like_cpu(name, dtype, shapes):
    check_op(BINARY[name], randn(*shapes[0], dtype=dtype), randn(*shapes[1], dtype=dtype))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values_match_cpu(name):
    a = specials()
    check_op(BINARY[name], a[:, None].expand(-1, len(SPECIALS)), a[None, :].expand(len(SPECIALS), -1))


@pytest.mark.parametrize("name", ["copysign", "hypot", "fmax", "fmin", "logaddexp", "logaddexp2"])
def test_binary_backward_matches_cpu(name):
    check_op(BINARY[name], randn(3, 4), randn(4), grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["fmax", "fmin", "heaviside"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_binary_keeps_the_dtype(name, dtype):
    a = torch.tensor([[0, 1, 2], [3, 0, 1]]).to(dtype)
    b = torch.tensor([1, 0, 2]).to(dtype)
    out = check_op(BINARY[name], a, b)
    assert out.dtype == dtype


def test_copysign_takes_the_sign_bit_of_zero_and_nan():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    b = torch.tensor([-0.0, 0.0, -float("nan"), float("nan")])
    check_op(torch.copysign, a, b)
    check_op(torch.copysign, torch.tensor([1, -2, 3]), -2.5)


@pytest.mark.parametrize("name", ["hypot", "logaddexp", "logaddexp2", "nextafter"])
def test_float_only_binary_raises_for_integers_like_cpu(name):
    a = torch.tensor([1, 2])
    with pytest.raises(NotImplementedError):
        BINARY[name](a, a)
    with pytest.raises(NotImplementedError):
        BINARY[name](a.to("tpu"), a.to("tpu"))


def test_binary_in_place_and_out_variants():
    a, b = randn(3, 4), randn(3, 4)
    for name in ["copysign", "hypot", "nextafter", "heaviside"]:
        ta = to_device(a, "tpu")
        getattr(ta, name + "_")(to_device(b, "tpu"))
        assert_close(ta, BINARY[name](a, b))
    for name in ["fmax", "fmin", "logaddexp"]:
        out = torch.empty(3, 4, device="tpu")
        BINARY[name](to_device(a, "tpu"), to_device(b, "tpu"), out=out)
        assert_close(out, BINARY[name](a, b))


def test_signbit_over_dtypes():
    check_op(torch.signbit, specials())
    check_op(torch.signbit, torch.tensor([-3, 0, 4]))
    check_op(torch.signbit, torch.tensor([0, 200], dtype=torch.uint8))
    check_op(torch.signbit, torch.tensor([True, False]))


# ---- logit --------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [None, 0.0, 0.1, -1.0])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logit_clamps_with_eps(eps, dtype):
    x = torch.tensor([-0.5, 0.0, 0.05, 0.3, 0.5, 0.95, 1.0, 1.5, float("nan")], dtype=dtype)
    check_op(lambda t: torch.logit(t, eps), x)


@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_backward_matches_cpu(eps):
    x = torch.tensor([0.05, 0.3, 0.5, 0.7, 0.95])
    check_op(lambda t: torch.logit(t, eps), x, grad=True, atol=1e-4, rtol=1e-4)


# ---- nan_to_num ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5, "posinf": 7.0, "neginf": -9.0}, {"posinf": 1e30}])
def test_nan_to_num_replaces_non_finite_values(dtype, kwargs):
    check_op(lambda t: torch.nan_to_num(t, **kwargs), specials(dtype))


def test_nan_to_num_in_place_integers_and_backward():
    x = to_device(specials(), "tpu")
    x.nan_to_num_(nan=2.0)
    assert_close(x, specials().nan_to_num(nan=2.0))
    check_op(torch.nan_to_num, torch.tensor([1, -2, 3]))
    check_op(torch.nan_to_num, torch.tensor([1.0, float("inf"), 2.0, float("nan")]), grad=True)


# ---- integers -----------------------------------------------------------------------
@pytest.mark.parametrize("fn", [torch.gcd, torch.lcm])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_gcd_lcm_match_cpu(fn, dtype):
    low = 0 if dtype == torch.uint8 else -50
    a = torch.randint(low, 50, (6, 7)).to(dtype)
    b = torch.randint(low, 50, (7,)).to(dtype)
    a[0, 0] = 0
    b[1] = 0
    check_op(fn, a, b)


def test_gcd_of_fibonacci_neighbours_needs_many_steps():
    a = torch.tensor([1134903170, 0, 0, 12], dtype=torch.int64)
    b = torch.tensor([1836311903, 0, 7, 0], dtype=torch.int64)
    check_op(torch.gcd, a, b)
    check_op(torch.lcm, a, b)


def test_gcd_in_place_and_float_raises():
    a, b = torch.tensor([12, 18, -27]), torch.tensor([8, -12, 9])
    ta = a.to("tpu")
    ta.gcd_(b.to("tpu"))
    assert_close(ta, torch.gcd(a, b))
    with pytest.raises(NotImplementedError):
        torch.gcd(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"))


@pytest.mark.parametrize("fn", [torch.bitwise_left_shift, torch.bitwise_right_shift])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_shifts_match_cpu_including_out_of_range_shifts(fn, dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([info.min, -5, -1, 0, 1, 7, info.max], dtype=dtype)
    shifts = [0, 1, 3, info.bits - 1, info.bits, info.bits + 5] + ([-1, -70] if info.min < 0 else [])
    for s in shifts:
        check_op(fn, a, torch.full_like(a, s))
        check_op(fn, a, s)


def test_shift_operators_and_scalar_self():
    a = torch.tensor([1, -8, 33])
    check_op(lambda t: t << 2, a)
    check_op(lambda t: t >> 1, a)
    check_op(lambda t: torch.bitwise_left_shift(3, t), torch.tensor([0, 1, 4]))
    ta = a.to("tpu")
    ta <<= 3
    assert_close(ta, a << 3)
    with pytest.raises(NotImplementedError):
        torch.bitwise_left_shift(torch.ones(2, device="tpu"), 1)


# ---- round(decimals) ----------------------------------------------------------------
@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -3, 40])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_round_decimals_matches_cpu(decimals, dtype):
    x = torch.cat([randn(20, scale=2000.0), specials()]).to(dtype)
    check_op(lambda t: torch.round(t, decimals=decimals), x)


def test_round_decimals_in_place_out_and_backward():
    x = randn(3, 4, scale=100.0)
    tx = to_device(x, "tpu")
    tx.round_(decimals=2)
    assert_close(tx, x.round(decimals=2))
    out = torch.empty(0, device="tpu")
    torch.round(to_device(x, "tpu"), decimals=-1, out=out)
    assert_close(out, x.round(decimals=-1))
    check_op(lambda t: torch.round(t, decimals=1), x, grad=True)


# ---- frexp --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_frexp_splits_normal_subnormal_and_special_values(dtype):
    x = torch.cat([specials(), torch.tensor([1e-40, -3e-39, 1.17549435e-38, 3.4e38, 0.75, 1024.0])]).to(dtype)
    mantissa, exponent = check_op(torch.frexp, x)
    assert exponent.dtype == torch.int32


def test_frexp_out_and_backward():
    x = randn(3, 4)
    m, e = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.int32, device="tpu")
    torch.frexp(to_device(x, "tpu"), out=(m, e))
    assert_close(m, torch.frexp(x).mantissa)
    assert_close(e, torch.frexp(x).exponent)
    check_op(lambda t: torch.frexp(t).mantissa, x, grad=True)
    with pytest.raises(RuntimeError):
        torch.frexp(torch.arange(3, device="tpu"))
