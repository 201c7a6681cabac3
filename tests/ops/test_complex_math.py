"""Complex inputs to the float formulas (csrc/lower/common/arith.cpp's
float_op and the ops written like it) compute in complex, against CPU:
before, a complex input was converted to float32 there, dropping its
imaginary part, so asin, acos, atan, asinh, atanh, sinh, cosh and exp2 of a
complex tensor returned silently wrong values, as did var, std, var_mean and
std_mean (a complex variance is the mean of |x - mean|^2); log2 and log10 of
0 gave -inf + nan j; lerp with a complex weight did not compile; logaddexp
and silu raised CPU's old "not implemented" for complex inputs, which CPU now
computes. complex64 and complex128, each eager mode and compiled."""

import pytest
import torch
from reference import assert_close

import torch_tpu

DTYPES = [torch.complex64, torch.complex128]
MODES = ["strict", "defer_and_fuse", "compiled"]
TOL = dict(atol=1e-5, rtol=1e-4)


def sample(dtype):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(4, 6, generator=g, dtype=dtype) * 1.5).contiguous()
    # zeros, branch points, and a point on asinh's branch cut (with a +0.0 real
    # part: XLA's expansions do not read the sign of a zero, CPU's do)
    x.view(-1)[:5] = torch.tensor([0, 1, -1, 1j, complex(0.0, -2.0)], dtype=dtype)
    return x


UNARY = {
    name: getattr(torch, name)
    for name in ["asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tanh", "exp2", "log2", "log10"]
}
UNARY["sinc"] = torch.sinc
UNARY["sigmoid"] = torch.sigmoid
UNARY["silu"] = torch.nn.functional.silu  # CPU's complex kernel: x / (1 + exp(-x))

REDUCTIONS = {
    "var": lambda x, y: x.var(),
    "std_dim_keepdim": lambda x, y: x.std(0, keepdim=True),
    "var_no_correction": lambda x, y: x.var(1, correction=0),
    "var_mean": lambda x, y: torch.var_mean(x, 1),
    "std_mean": lambda x, y: torch.std_mean(x),
    "lerp_scalar_weight": lambda x, y: torch.lerp(x, y, 0.3),
    "lerp_complex_weight": lambda x, y: torch.lerp(x, y, y * 0.2),
    # norms of a complex tensor are its magnitudes' norms (p = 2 squared x
    # itself: complex squares, and renorm scaled by them)
    "renorm": lambda x, y: torch.renorm(x, 2, 0, 1.5),
    "renorm_p3": lambda x, y: torch.renorm(x, 3, 1, 0.5),
    "norm_p0": lambda x, y: torch.norm(x, p=0),
    "norm_p1": lambda x, y: torch.norm(x, p=1, dim=1),
    "norm_p2": lambda x, y: torch.norm(x, p=2, dim=0),
    "normalize": lambda x, y: torch.nn.functional.normalize(x, dim=1),
    "logsumexp": lambda x, y: torch.logsumexp(x, 1),  # shifted by the max real part
}


def on_tpu(fn, mode, *args):
    args = [a.to("tpu") for a in args]
    if mode == "compiled":
        out = torch.compile(fn, backend="tpu")(*args)
    else:
        with torch_tpu.eager_mode(mode):
            out = fn(*args)
    return list(out) if isinstance(out, tuple) else out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_formulas_keep_the_imaginary_part(name, dtype, mode):
    x = sample(dtype)
    expected = UNARY[name](x)
    assert_close(on_tpu(UNARY[name], mode, x), expected, **TOL)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_variances_and_lerp_of_complex_tensors(name, dtype, mode):
    x, y = sample(dtype), sample(dtype).flip(0)
    expected = REDUCTIONS[name](x, y)
    actual = on_tpu(REDUCTIONS[name], mode, x, y)
    assert_close(list(actual) if isinstance(actual, list) else actual, expected, **TOL)


def test_a_complex_variance_is_real_and_counts_both_parts():
    x = torch.tensor([1j, -1j], dtype=torch.complex64)  # real parts equal: a real-part variance would be 0
    v = x.to("tpu").var()
    assert v.dtype == torch.float32 and v.item() == pytest.approx(2.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "start,end,steps", [(1 + 2j, 5 - 1j, 5), (0j, 1j, 7), (-3, 3 + 4j, 6), (2, 5, 4), (1 + 1j, 2.5, 1)]
)
def test_complex_linspace_matches_cpu(start, end, steps, dtype):
    # it returned zeros: the complex dtype took the integer path
    expected = torch.linspace(start, end, steps, dtype=dtype)
    assert_close(torch.linspace(start, end, steps, dtype=dtype, device="tpu"), expected, atol=0, rtol=0)


def _edge_values(dtype):
    """A 5 x 7 sample with equal -inf real parts and a NaN, cases PyTorch's
    complex log_add_exp treats apart. (+inf real parts are left out: there
    log(exp(min) + exp(max)) gives inf + nan j, and where the NaN that
    follows appears depends on the order the scan combines in.)"""
    x = sample(dtype).repeat(2, 2)[:5, :7].contiguous()
    x[1, 2], x[1, 3] = complex(float("-inf"), 1.0), complex(float("-inf"), 2.0)
    x[2, 0] = complex(float("-inf"), -1.0)
    x[3, 3] = complex(float("nan"), 0.0)
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_complex_logcumsumexp_matches_cpu_up_to_the_imaginary_parts_branch(dim, dtype, mode):
    # It failed to compile (a real comparison of complex operands). A
    # logarithm's imaginary part is defined modulo 2 pi: CPU's sequential
    # scan and this tree scan (as CUDA's) may land on different branches,
    # so exp(i imag) is compared, with the real parts and NaNs.
    x = _edge_values(dtype)
    expected = torch.logcumsumexp(x, dim)
    actual = on_tpu(lambda t: torch.logcumsumexp(t, dim), mode, x).cpu()
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.real, expected.real, equal_nan=True, **TOL)
    finite = expected.imag.isfinite()
    assert torch.equal(actual.imag.isfinite(), finite)
    torch.testing.assert_close(torch.exp(1j * actual.imag[finite]), torch.exp(1j * expected.imag[finite]), **TOL)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_logaddexp_matches_cpu_with_its_edge_cases(dtype, mode):
    # It raised CPU's old "not implemented for 'ComplexFloat'". PyTorch's
    # rule orders the operands by real part (the second is min when they tie)
    # and treats NaN and equal infinite real parts apart: +inf ones give
    # inf + nan j or inf + angle j.
    x = _edge_values(dtype)
    y = x.flip(1).clone()
    y[0, :3] = torch.tensor([complex(float("inf"), 3.0), complex(float("inf"), 1.0), complex(1.0, float("nan"))])
    x[0, :3] = torch.tensor([complex(float("inf"), 1.0), complex(float("inf"), 1.0), 2.0 + 0j])
    expected = torch.logaddexp(x, y)
    actual = on_tpu(torch.logaddexp, mode, x, y).cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True, **TOL)


@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_randn_and_rand_draw_each_part_as_pytorch_does(dtype):
    # They raised CPU's "not implemented for this dtype", which CPU itself
    # does not: PyTorch draws into view_as_real(self), normal_'s parts with
    # std / sqrt(2) (so E|z - mean|^2 = std^2) and uniform_'s each in [from, to).
    torch.manual_seed(0)
    n = 200_000
    z = torch.randn(n, dtype=dtype, device="tpu").cpu()
    assert z.dtype == dtype
    for part in (z.real, z.imag):
        assert abs(part.mean().item()) < 0.01 and part.var().item() == pytest.approx(0.5, rel=0.02)
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]))[0, 1].item()) < 0.01  # independent parts
    w = torch.empty(n, dtype=dtype, device="tpu").normal_(2.0, 3.0).cpu()
    assert (w - complex(2.0, 2.0)).abs().pow(2).mean().item() == pytest.approx(9.0, rel=0.02)
    u = torch.empty(n, dtype=dtype, device="tpu").uniform_(-1.0, 3.0).cpu()
    for part in (u.real, u.imag):
        assert part.min().item() >= -1.0 and part.max().item() < 3.0
        assert part.mean().item() == pytest.approx(1.0, abs=0.02)
    r = torch.rand(4, 3, dtype=dtype, device="tpu")
    assert r.shape == (4, 3) and r.dtype == dtype
    assert torch.empty(0, dtype=dtype, device="tpu").normal_().shape == (0,)
