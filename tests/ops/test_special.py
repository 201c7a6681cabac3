"""The lowerings of csrc/lower/special.cpp against CPU PyTorch: the gamma
family (lgamma, digamma, polygamma, mvlgamma, zeta), Bessel and Airy
functions, erfcx/ndtri/log_ndtr, xlogy/xlog1py/entr and the orthogonal
polynomials; special values (poles, negative arguments, inf, NaN), integer
inputs, non-contiguous inputs, out= and in-place variants, backward."""

import pytest
import torch
from reference import assert_close, check_op, to_device

SPECIALS = [
    float("nan"),
    float("inf"),
    -float("inf"),
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.0,
    -1.0,
    2.0,
    -2.0,
    -2.5,
    3.0,
    10.0,
    1e-20,
    30.0,
    100.0,
]


def specials():
    return torch.tensor(SPECIALS)


def uniform(shape, low, high, dtype=torch.float32):
    return torch.empty(shape).uniform_(low, high).to(dtype)


UNARY = {
    "lgamma": (torch.lgamma, -8.0, 8.0),
    "digamma": (torch.digamma, -8.0, 8.0),
    "i0": (torch.i0, -12.0, 12.0),
    "i0e": (torch.special.i0e, -12.0, 12.0),
    "i1": (torch.special.i1, -12.0, 12.0),
    "i1e": (torch.special.i1e, -12.0, 12.0),
    "ndtri": (torch.special.ndtri, 0.001, 0.999),
    "erfcx": (torch.special.erfcx, -6.0, 30.0),
    "log_ndtr": (torch.special.log_ndtr, -20.0, 6.0),
    "entr": (torch.special.entr, -1.0, 5.0),
    "bessel_j0": (torch.special.bessel_j0, -20.0, 20.0),
    "bessel_j1": (torch.special.bessel_j1, -20.0, 20.0),
    "bessel_y0": (torch.special.bessel_y0, 0.01, 20.0),
    "bessel_y1": (torch.special.bessel_y1, 0.01, 20.0),
    "modified_bessel_i0": (torch.special.modified_bessel_i0, -12.0, 12.0),
    "modified_bessel_i1": (torch.special.modified_bessel_i1, -12.0, 12.0),
    "modified_bessel_k0": (torch.special.modified_bessel_k0, 0.01, 12.0),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, 0.01, 12.0),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, 0.01, 12.0),
    "scaled_modified_bessel_k1": (torch.special.scaled_modified_bessel_k1, 0.01, 12.0),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, -20.0, 20.0),
    "airy_ai": (torch.special.airy_ai, -10.0, 10.0),
}
# Functions CPU also supports for bfloat16 (computing in float32).
BFLOAT16 = {"lgamma", "digamma", "i0", "i0e", "i1", "i1e", "entr"}
# Differentiable on CPU.
BACKWARD = {"lgamma", "digamma", "i0", "i0e", "i1", "i1e", "ndtri", "erfcx", "log_ndtr", "entr"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_cpu_in_its_domain(name):
    fn, low, high = UNARY[name]
    check_op(fn, uniform((6, 7), low, high))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_match_cpu(name):
    check_op(UNARY[name][0], specials())


@pytest.mark.parametrize("name", sorted(BFLOAT16))
def test_bfloat16_computes_in_float32_and_rounds_once(name):
    fn, low, high = UNARY[name]
    check_op(fn, uniform((5, 6), low, high, torch.bfloat16))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "bessel_j0", "airy_ai", "erfcx"])
def test_integer_input_promotes_to_float32(name):
    out = check_op(UNARY[name][0], torch.tensor([[1, 2, 3], [4, 5, 7]]))
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_unary_backward_matches_cpu(name):
    fn, low, high = UNARY[name]
    check_op(fn, uniform((4, 5), low, high), grad=True, atol=1e-4, rtol=1e-4)


def test_non_contiguous_input_and_out_variant():
    base = uniform((6, 8), -5.0, 5.0)
    view = base.t()[::2]
    for fn in [torch.special.i1e, torch.special.bessel_j1, torch.special.erfcx]:
        assert_close(fn(to_device(base, "tpu").t()[::2]), fn(view))
        out = torch.empty(0, device="tpu")
        fn(to_device(view, "tpu"), out=out)
        assert_close(out, fn(view))


def test_in_place_gamma_family():
    x = uniform((3, 4), 0.5, 6.0)
    for name in ["lgamma_", "digamma_", "i0_"]:
        t = to_device(x, "tpu")
        getattr(t, name)()
        assert_close(t, getattr(x.clone(), name)())


# ---- digamma / polygamma / zeta ----------------------------------------------------
def test_digamma_poles_and_reflection():
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, -3.5, -0.25, 1e-6, 9.99, 10.0, 1e18])
    check_op(torch.digamma, x)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7])
def test_polygamma_matches_cpu(n):
    x = torch.cat([uniform((20,), -9.0, 9.0), specials()])
    # CPU sums zeta in float64; at half-integers below zero its terms cancel
    # (x = -2.5: 32 - 32 + ...), so float32 keeps ~1e-4 of absolute accuracy.
    check_op(lambda t: torch.polygamma(n, t), x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_polygamma_backward_and_out(n):
    x = uniform((3, 4), 0.5, 5.0)
    check_op(lambda t: torch.polygamma(n, t), x, grad=True, atol=1e-4, rtol=1e-4)
    out = torch.empty(0, device="tpu")
    torch.polygamma(n, to_device(x, "tpu"), out=out)
    assert_close(out, torch.polygamma(n, x), rtol=1e-4)


def test_zeta_edge_cases_and_negative_q():
    x = torch.tensor([3.0, 3.0, 2.0, 1.0, 0.5, 4.0, 2.5, 3.0, 3.0, float("nan"), 2.0, 5.0, 10.0, 2.0])
    q = torch.tensor([-8.4784, 1.0, 0.5, 2.0, 3.0, -3.0, -2.5, 1e10, 1e-3, 1.0, float("inf"), -8.0676, 1.0, -100.5])
    check_op(torch.special.zeta, x, q, rtol=1e-4)


def test_zeta_scalar_operands_and_integer_inputs():
    q = uniform((5,), 0.5, 4.0)
    check_op(lambda t: torch.special.zeta(3.0, t), q)
    check_op(lambda t: torch.special.zeta(t, 2.0), uniform((5,), 1.5, 4.0))
    check_op(torch.special.zeta, torch.tensor([2, 3, 1, 0]), torch.tensor([1, 2, 0, -1]))


@pytest.mark.parametrize("p", [1, 3, 5])
def test_mvlgamma_composes_from_lgamma(p):
    x = uniform((4, 5), (p - 1) / 2 + 0.1, 8.0)
    check_op(lambda t: torch.mvlgamma(t, p), x, grad=True, atol=1e-4, rtol=1e-4)


# ---- x log y ------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [torch.xlogy, torch.special.xlog1py])
def test_xlogy_zero_times_anything_is_zero_and_nan_propagates(fn):
    x = torch.tensor([0.0, 0.0, 0.0, 1.0, 2.0, -1.0, float("nan"), 3.0])
    y = torch.tensor([0.0, float("inf"), float("nan"), -1.0, 0.5, 2.0, 1.0, -0.5])
    check_op(fn, x, y)


@pytest.mark.parametrize("fn", [torch.xlogy, torch.special.xlog1py])
def test_xlogy_scalars_broadcast_backward_and_in_place(fn):
    x, y = uniform((3, 1), -2.0, 2.0), uniform((4,), 0.1, 3.0)
    check_op(fn, x, y, grad=True, atol=1e-4, rtol=1e-4)
    check_op(lambda t: fn(t, 2.5), x)
    check_op(lambda t: fn(2.0, t), y)
    check_op(fn, torch.tensor([0, 1, 2]), torch.tensor([3, 0, 5]))
    t = to_device(x.expand(3, 4).clone(), "tpu")
    torch.xlogy(t, to_device(y, "tpu"), out=t)
    assert_close(t, torch.xlogy(x.expand(3, 4), y))


# ---- orthogonal polynomials ------------------------------------------------------------
POLYNOMIALS = [
    torch.special.chebyshev_polynomial_t,
    torch.special.chebyshev_polynomial_u,
    torch.special.chebyshev_polynomial_v,
    torch.special.chebyshev_polynomial_w,
    torch.special.shifted_chebyshev_polynomial_t,
    torch.special.shifted_chebyshev_polynomial_u,
    torch.special.shifted_chebyshev_polynomial_v,
    torch.special.shifted_chebyshev_polynomial_w,
    torch.special.hermite_polynomial_h,
    torch.special.hermite_polynomial_he,
    torch.special.laguerre_polynomial_l,
    torch.special.legendre_polynomial_p,
]


@pytest.mark.parametrize("fn", POLYNOMIALS, ids=lambda f: f.__name__)
def test_polynomial_recurrences_and_closed_forms_match_cpu(fn):
    x = torch.tensor([-2.0, -1.0, -0.7, -0.5, 0.0, 0.3, 0.5, 1.0, 1.5, 3.0, float("nan")])
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 12.0, 2.7])
    check_op(fn, x[:, None], n[None, :], rtol=1e-4)


@pytest.mark.parametrize("fn", POLYNOMIALS, ids=lambda f: f.__name__)
def test_polynomial_integer_and_scalar_degree(fn):
    x = uniform((4, 3), -1.5, 1.5)
    check_op(fn, x, torch.tensor([0, 3, 10]), rtol=1e-4)
    check_op(lambda t: fn(t, 4), x, rtol=1e-4)
    check_op(lambda n: fn(0.25, n), torch.tensor([1.0, 2.0, 6.0]), rtol=1e-4)


def test_hermite_degree_limit_and_non_finite_degree():
    x = torch.tensor([0.5, 0.5, 0.5, 0.5])
    n = torch.tensor([128.0, 129.0, float("inf"), float("nan")])
    check_op(torch.special.hermite_polynomial_h, x, n, rtol=1e-4)


# ---- regularized incomplete gamma ------------------------------------------------------
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_incomplete_gamma_matches_cpu(fn, dtype):
    a = uniform((6, 1), 0.05, 12.0, dtype)
    x = uniform((7,), 0.0, 15.0, dtype)
    check_op(fn, a, x)


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_incomplete_gamma_boundary_values(fn):
    a = torch.tensor([0.0, 0.0, 1.0, -1.0, 2.0, float("inf"), float("inf"), 2.0, float("nan"), 30.0])
    x = torch.tensor([1.0, 0.0, 0.0, 1.0, -1.0, 2.0, float("inf"), float("inf"), 1.0, 25.0])
    check_op(fn, a, x)


def test_incomplete_gamma_in_place_backward_and_integer_error():
    a, x = uniform((3, 4), 0.5, 5.0), uniform((3, 4), 0.1, 6.0)
    t = to_device(a, "tpu")
    t.igammac_(to_device(x, "tpu"))
    assert_close(t, torch.igammac(a, x))
    # Only `other` is differentiable (PyTorch's derivatives.yaml).
    check_op(lambda x_: torch.igamma(a.to(x_.device), x_), x, grad=True, atol=1e-4, rtol=1e-4)
    with pytest.raises(NotImplementedError):
        torch.igamma(torch.tensor([1, 2], device="tpu"), torch.tensor([1, 2], device="tpu"))
