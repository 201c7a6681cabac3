"""Complex inputs to the float formulas (csrc/lower/common/arith.cpp's
float_op and the ops written like it) compute in complex, against CPU:
before, a complex input was converted to float32 there, dropping its
imaginary part, so asin, acos, atan, asinh, atanh, sinh, cosh and exp2 of a
complex tensor returned silently wrong values, as did var, std, var_mean and
std_mean (a complex variance is the mean of |x - mean|^2); log2 and log10 of
0 gave -inf + nan j; lerp with a complex weight did not compile. complex64
and complex128, each eager mode and compiled."""

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
