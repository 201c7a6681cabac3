"""vdot, linalg.vecdot, addbmm, complex, polar, logspace, nonzero_static and
hash_tensor on tpu match CPU PyTorch (functional, in-place and out= forms)."""

import pytest
import torch
from reference import assert_close, check_op

import torch_tpu

# reference.py has no complex64 tolerances; these are float32's.
COMPLEX64_TOL = dict(atol=1e-5, rtol=1.3e-6 * 4)


def tpu(t):
    return t.to("tpu")


# ---- vdot / linalg.vecdot ---------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 130])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vdot_matches_cpu_for_floats(n, dtype):
    check_op(torch.vdot, torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype), grad=dtype == torch.float32)


def test_vdot_of_integers_is_exact():
    a, b = torch.randint(-50, 50, (33,)), torch.randint(-50, 50, (33,))
    assert torch.vdot(tpu(a), tpu(b)).item() == torch.vdot(a, b).item()


def test_vdot_conjugates_the_first_complex_argument():
    a = torch.randn(9, dtype=torch.complex64)
    b = torch.randn(9, dtype=torch.complex64)
    check_op(torch.vdot, a, b, **COMPLEX64_TOL)
    assert not torch.allclose(torch.vdot(a, b), torch.dot(a, b))  # the check can tell them apart


def test_vdot_reads_strided_inputs():
    a, b = torch.randn(20), torch.randn(5, 4)
    check_op(lambda x, y: torch.vdot(x[::2], y[:, 1].flip(0).repeat(2)), a, b, grad=True)


def test_vdot_out_writes_into_the_given_tensor():
    a, b = torch.randn(6), torch.randn(6)
    out = tpu(torch.zeros(()))
    r = torch.vdot(tpu(a), tpu(b), out=out)
    assert r is out
    assert_close(out, torch.vdot(a, b))


def test_vdot_of_bools_raises_like_cpu():
    a = torch.ones(3, dtype=torch.bool)
    with pytest.raises(NotImplementedError):
        torch.vdot(tpu(a), tpu(a))


@pytest.mark.parametrize("shapes,dim", [(((4, 5), (4, 5)), -1), (((3, 1, 6), (2, 6)), -1), (((5, 3), (5, 3)), 0)])
def test_linalg_vecdot_matches_cpu(shapes, dim):
    x, y = torch.randn(shapes[0]), torch.randn(shapes[1])
    check_op(lambda a, b: torch.linalg.vecdot(a, b, dim=dim), x, y, grad=True)


def test_linalg_vecdot_conjugates_complex_x():
    x, y = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4, dtype=torch.complex64)
    check_op(torch.linalg.vecdot, x, y, **COMPLEX64_TOL)


# ---- addbmm -----------------------------------------------------------------


@pytest.mark.parametrize("b,n,m,p", [(3, 4, 5, 6), (1, 2, 3, 4), (5, 1, 1, 1), (0, 3, 2, 4), (2, 3, 0, 2)])
def test_addbmm_matches_cpu(b, n, m, p):
    check_op(torch.addbmm, torch.randn(n, p), torch.randn(b, n, m), torch.randn(b, m, p), grad=True)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (-1, 0.25), (2, 0)])
def test_addbmm_scales_self_and_product(beta, alpha):
    check_op(
        lambda s, x, y: torch.addbmm(s, x, y, beta=beta, alpha=alpha),
        torch.randn(3, 4),
        torch.randn(2, 3, 5),
        torch.randn(2, 5, 4),
        grad=True,
    )


def test_addbmm_with_beta_zero_ignores_nan_in_self():
    s = torch.full((3, 4), float("nan"))
    x, y = torch.randn(2, 3, 5), torch.randn(2, 5, 4)
    r = torch.addbmm(tpu(s), tpu(x), tpu(y), beta=0)
    assert not torch.isnan(r.cpu()).any()
    assert_close(r, torch.addbmm(s, x, y, beta=0))


def test_addbmm_broadcasts_self():
    check_op(torch.addbmm, torch.randn(4), torch.randn(3, 2, 5), torch.randn(3, 5, 4), grad=True)


def test_addbmm_rounds_bfloat16_like_cpu():
    # CPU adds one batch at a time into the bf16 result; 8 batches of large
    # sums show the per-batch rounding.
    torch.manual_seed(0)
    s = torch.randn(5, 5, dtype=torch.bfloat16) * 10
    x, y = torch.randn(8, 5, 16, dtype=torch.bfloat16), torch.randn(8, 16, 5, dtype=torch.bfloat16)
    check_op(lambda a, b, c: torch.addbmm(a, b, c, alpha=0.7), s, x, y, atol=0, rtol=0)


def test_addbmm_of_many_bfloat16_batches_stays_close():
    # Past 64 batches one f32 contraction replaces the per-batch rounding.
    s = torch.randn(3, 4, dtype=torch.bfloat16)
    x, y = torch.randn(70, 3, 2, dtype=torch.bfloat16), torch.randn(70, 2, 4, dtype=torch.bfloat16)
    check_op(torch.addbmm, s, x, y, atol=0.3, rtol=2e-2)


def test_addbmm_of_integers_is_exact():
    s, x, y = torch.randint(-5, 5, (3, 4)), torch.randint(-5, 5, (2, 3, 6)), torch.randint(-5, 5, (2, 6, 4))
    check_op(lambda a, b, c: torch.addbmm(a, b, c, beta=2, alpha=3), s, x, y, atol=0, rtol=0)


def test_addbmm_reads_transposed_batches():
    check_op(
        lambda s, x, y: torch.addbmm(s, x.transpose(1, 2), y[:, ::2]),
        torch.randn(3, 4),
        torch.randn(2, 5, 3),
        torch.randn(2, 10, 4),
        grad=True,
    )


def test_addbmm_in_place_and_out():
    s, x, y = torch.randn(3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)
    expected = torch.addbmm(s, x, y, beta=0.5)
    st = tpu(s)
    st.addbmm_(tpu(x), tpu(y), beta=0.5)
    assert_close(st, expected)
    base = tpu(torch.zeros(4, 6))
    out = base[:, 1:4].t()  # a non-contiguous out view
    torch.addbmm(tpu(s), tpu(x), tpu(y), beta=0.5, out=out)
    assert_close(out, expected)
    assert_close(base[:, 0], torch.zeros(4))


# ---- complex / polar --------------------------------------------------------


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((), ()), ((2, 1, 3), (4, 1)), ((0, 2), (2,))])
def test_complex_matches_cpu(shapes):
    check_op(torch.complex, torch.randn(shapes[0]), torch.randn(shapes[1]))


def test_complex_backward_splits_the_gradient():
    check_op(lambda a, b: torch.view_as_real(torch.complex(a, b) ** 2) * 1.0, torch.randn(5), torch.randn(5), grad=True)


def test_complex_reads_strided_parts_and_writes_out():
    re, im = torch.randn(4, 6), torch.randn(6, 4)
    check_op(lambda a, b: torch.complex(a[:, ::2], b.t()[:, 1::2]), re, im)
    out = tpu(torch.zeros(4, 6, dtype=torch.complex64))
    torch.complex(tpu(re), tpu(im.t()), out=out)
    assert_close(out, torch.complex(re, im.t()))


def test_complex_of_integer_parts_raises_runtime_error_like_cpu():
    with pytest.raises(RuntimeError):
        torch.complex(tpu(torch.randn(3)), tpu(torch.ones(3, dtype=torch.int32)))


def test_complex_of_mixed_float_parts_raises_runtime_error_like_cpu():
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="scalar type"):
            torch.complex(torch.randn(3, device=device), torch.randn(3, dtype=torch.float64).to(device))


@pytest.mark.parametrize("fn", [torch.complex, torch.polar])
def test_float64_parts_into_a_complex64_out_raise_like_cpu(fn):
    a, b = torch.rand(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="ComplexDouble"):
        fn(a, b, out=torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="complex128|ComplexDouble"):  # polar's meta kernel words it so
        fn(tpu(a), tpu(b), out=tpu(torch.zeros(3, dtype=torch.complex64)))


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((), (5,)), ((2, 1), (1, 3)), ((0,), (0,))])
def test_polar_matches_cpu(shapes):
    check_op(torch.polar, torch.rand(shapes[0]) * 3, torch.randn(shapes[1]) * 4, **COMPLEX64_TOL)


def test_polar_backward_matches_cpu():
    # polar's derivative multiplies by the Python complex number 1j.
    r, theta, w_re, w_im = torch.rand(5) * 3, torch.randn(5) * 4, torch.randn(5), torch.randn(5)
    grads = {}
    for device in ("cpu", "tpu"):
        a = r.detach().clone().to(device).requires_grad_()
        t = theta.detach().clone().to(device).requires_grad_()
        z = torch.polar(a, t)
        (z.real * w_re.to(device) + z.imag * w_im.to(device)).sum().backward()
        grads[device] = (a.grad.cpu(), t.grad.cpu())
    torch.testing.assert_close(grads["tpu"], grads["cpu"], **COMPLEX64_TOL)


def test_polar_out_and_strided_inputs():
    r, t = torch.rand(6, 4), torch.randn(4, 6)
    out = tpu(torch.zeros(6, 4, dtype=torch.complex64))
    torch.polar(tpu(r), tpu(t).t(), out=out)
    assert_close(out, torch.polar(r, t.t()), **COMPLEX64_TOL)


# ---- logspace ---------------------------------------------------------------

LOGSPACE_CASES = [
    (0, 3, 4, 10.0),
    (-2.5, 2.5, 7, 10.0),
    (1, -1, 6, 2.0),
    (0, 10, 11, 2.0),
    (3, 3, 1, 10.0),
    (0, 1, 0, 10.0),
    (-1.3, 4.7, 50, 3.0),
    (0, 2, 3, 0.5),
]


@pytest.mark.parametrize("start,end,steps,base", LOGSPACE_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_logspace_matches_cpu_for_floats(start, end, steps, base, dtype):
    expected = torch.logspace(start, end, steps, base, dtype=dtype)
    assert_close(
        torch.logspace(start, end, steps, base, dtype=dtype, device="tpu"),
        expected,
        atol=0,
        rtol=2e-7 if dtype == torch.float64 else 0,
    )


@pytest.mark.parametrize("start,end,steps,base", LOGSPACE_CASES + [(-3, 5, 9, 2.0), (2.9, 7.2, 5, 10.0)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_logspace_truncates_integers_like_cpu(start, end, steps, base, dtype):
    if dtype == torch.uint8 and (start < 0 or end < 0 or base ** max(start, end) > 255):
        pytest.skip("uint8 cannot hold the endpoints")
    expected = torch.logspace(start, end, steps, base, dtype=dtype)
    actual = torch.logspace(start, end, steps, base, dtype=dtype, device="tpu")
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize(
    "start,end,steps,base", LOGSPACE_CASES + [(0, 2, 6, -2.0), (1 + 2j, 3 - 1j, 9, 10.0), (-1j, 2j, 5, 2.0)]
)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_logspace_of_complex_dtypes_matches_cpu(start, end, steps, base, dtype, mode):
    # c10::complex arithmetic: a negative base has log |base| + i pi
    expected = torch.logspace(start, end, steps, base, dtype=dtype)
    make = lambda: torch.logspace(start, end, steps, base, dtype=dtype, device="tpu")  # noqa: E731
    if mode == "compiled":
        actual = torch.compile(make, backend="tpu")()
    else:
        with torch_tpu.eager_mode(mode):
            actual = make() * 1
    tol = 1e-6 if dtype == torch.complex64 else 1e-14
    assert_close(actual, expected, atol=tol, rtol=tol)


def test_logspace_tensor_endpoints_and_out():
    # Like CPU, the tensor overloads read the endpoints and create on `device`.
    expected = torch.logspace(torch.tensor(-1.0), torch.tensor(2.0), 5)
    assert_close(torch.logspace(tpu(torch.tensor(-1.0)), tpu(torch.tensor(2.0)), 5, device="tpu"), expected)
    assert_close(torch.logspace(tpu(torch.tensor(-1.0)), 2.0, 5, device="tpu"), expected)
    base = tpu(torch.zeros(10))
    torch.logspace(-1, 2, 5, out=base[::2])
    assert_close(base[::2], expected)
    assert_close(base[1::2], torch.zeros(5))


# ---- nonzero_static ---------------------------------------------------------


@pytest.mark.parametrize("shape", [(10,), (3, 4), (2, 3, 4), (0, 3), (1,)])
@pytest.mark.parametrize("size", [0, 1, 5, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int64, torch.bfloat16])
def test_nonzero_static_matches_cpu(shape, size, dtype):
    x = (torch.randn(shape) > 0.3).to(dtype) * (2 if dtype != torch.bool else 1)
    expected = torch.nonzero_static(x, size=size)
    assert torch.equal(torch.nonzero_static(tpu(x), size=size).cpu(), expected)


def test_nonzero_static_pads_with_fill_value_and_truncates():
    x = torch.tensor([[0.0, 1.0, float("nan")], [2.0, 0.0, -0.0]])
    for size, fill in [(8, 99), (2, -1), (3, -7)]:
        expected = torch.nonzero_static(x, size=size, fill_value=fill)
        assert torch.equal(torch.nonzero_static(tpu(x), size=size, fill_value=fill).cpu(), expected)


def test_nonzero_static_of_0d_and_strided_inputs():
    for x in [torch.tensor(3.0), torch.tensor(0.0)]:
        assert torch.equal(torch.nonzero_static(tpu(x), size=2).cpu(), torch.nonzero_static(x, size=2))
    x = torch.randn(6, 5) > 0
    view = lambda t: t.t()[::2]  # noqa: E731
    assert torch.equal(torch.nonzero_static(view(tpu(x)), size=9).cpu(), torch.nonzero_static(view(x), size=9))


def test_nonzero_static_out():
    x = torch.tensor([0, 3, 0, 5, 6])
    out = tpu(torch.zeros(4, 1, dtype=torch.int64))
    torch.nonzero_static(tpu(x), size=4, fill_value=-2, out=out)
    assert torch.equal(out.cpu(), torch.nonzero_static(x, size=4, fill_value=-2))


# ---- hash_tensor ------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int8, torch.uint8, torch.bool]
)
@pytest.mark.parametrize("dim,keepdim", [((), False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True)])
def test_hash_tensor_matches_cpu(dtype, dim, keepdim):
    x = (torch.randn(3, 4, 5) * 50).to(dtype)
    expected = torch.hash_tensor(x, dim, keepdim=keepdim)
    actual = torch.hash_tensor(tpu(x), dim, keepdim=keepdim)
    assert actual.dtype == torch.uint64
    assert torch.equal(actual.cpu(), expected)


def test_hash_tensor_of_0d_empty_and_strided_inputs():
    for x in [torch.tensor(-2.5), torch.randn(4, 6).t()[1:]]:
        assert torch.equal(torch.hash_tensor(tpu(x)).cpu(), torch.hash_tensor(x))
    x = torch.zeros(0, 3)
    assert torch.equal(torch.hash_tensor(tpu(x), 1).cpu(), torch.hash_tensor(x, 1))
    # CPU's rules for reducing an empty input over all dims / over its empty dim.
    with pytest.raises(RuntimeError, match="reduction dim"):
        torch.hash_tensor(tpu(x))
    with pytest.raises(IndexError, match="non-zero size"):
        torch.hash_tensor(tpu(x), 0)


def test_hash_tensor_out():
    x = torch.randint(-100, 100, (3, 7))
    out = tpu(torch.zeros(3, dtype=torch.uint64))
    torch.hash_tensor(tpu(x), 1, out=out)
    assert torch.equal(out.cpu(), torch.hash_tensor(x, 1))
