"""complex128 (cdouble) tensors on tpu: allocation, copies to and from CPU,
elementwise math, matmul, reductions and FFTs, against CPU in Strict,
DeferAndFuse and compiled, with gradients where complex autograd applies."""

import pytest
import torch
from reference import assert_close

import torch_tpu

# complex128 results: float64 tolerances on the real and imaginary parts,
# a little looser where a result sums many products (matmul, FFT).
ATOL, RTOL = 1e-12, 1e-12
SUM_ATOL, SUM_RTOL = 1e-10, 1e-10
MODES = ["strict", "defer_and_fuse", "compiled"]


def zrand(*shape):
    return torch.randn(shape, dtype=torch.complex128)


def run_in(mode, fn, *args):
    """fn on tpu copies of args, in the eager mode or compiled."""
    tpu_args = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
    if mode == "compiled":
        torch._dynamo.reset()
        return torch.compile(fn, backend="tpu")(*tpu_args)
    with torch_tpu.eager_mode(mode):
        out = fn(*tpu_args)
        torch_tpu.sync()
        return out


def test_complex128_round_trips_to_device_and_back_bit_exactly():
    x = zrand(3, 5)
    x[0, 0] = complex(1 / 3, -1e-300)  # a part float32 cannot hold
    on_device = x.to("tpu")
    assert on_device.dtype == torch.complex128 and on_device.device.type == "tpu"
    assert torch.equal(on_device.cpu(), x)


def test_complex128_factories_and_copies_between_complex_dtypes():
    z = torch.zeros(2, 3, dtype=torch.complex128, device="tpu")
    assert torch.equal(z.cpu(), torch.zeros(2, 3, dtype=torch.complex128))
    f = torch.full((4,), 2 - 3j, dtype=torch.cdouble, device="tpu")
    assert torch.equal(f.cpu(), torch.full((4,), 2 - 3j, dtype=torch.cdouble))
    x = zrand(6)
    assert_close(x.to("tpu").to(torch.complex64), x.to(torch.complex64), atol=0, rtol=0)
    y = torch.randn(6, dtype=torch.float64)
    assert_close(y.to("tpu").to(torch.complex128), y.to(torch.complex128), atol=0, rtol=0)
    assert_close(x.to("tpu").cdouble().real, x.real, atol=0, rtol=0)


def test_complex128_in_place_write_into_a_view():
    x = zrand(4, 4)
    d = x.to("tpu")
    d[1:3, ::2] = 5 + 1e-12j
    x[1:3, ::2] = 5 + 1e-12j
    assert torch.equal(d.cpu(), x)


@pytest.mark.parametrize("mode", MODES)
def test_complex128_elementwise_math_matches_cpu(mode):
    a, b = zrand(5, 4), zrand(5, 4)

    def fn(x, y):
        return (x * y - x / y + x.conj() * (1 / 3 + 2j), torch.exp(x), torch.sqrt(y), x.abs(), x.angle())

    assert_close(list(run_in(mode, fn, a, b)), list(fn(a, b)), ATOL, RTOL)


@pytest.mark.parametrize("mode", MODES)
def test_complex128_matmul_matches_cpu(mode):
    a, b = zrand(6, 7), zrand(7, 3)
    assert_close(run_in(mode, torch.matmul, a, b), a @ b, SUM_ATOL, SUM_RTOL)
    assert_close(run_in(mode, lambda x: x @ x.mH, a), a @ a.mH, SUM_ATOL, SUM_RTOL)


@pytest.mark.parametrize("mode", MODES)
def test_complex128_reductions_match_cpu(mode):
    x = zrand(4, 6)

    def fn(t):
        return t.sum(1), t.mean(0), t.prod(1), torch.linalg.vector_norm(t, dim=1)

    assert_close(list(run_in(mode, fn, x)), list(fn(x)), SUM_ATOL, SUM_RTOL)


@pytest.mark.parametrize("mode", MODES)
def test_complex128_and_float64_ffts_match_cpu(mode):
    z, r = zrand(3, 16), torch.randn(3, 16, dtype=torch.float64)

    def fn(c, x):
        return torch.fft.fft(c), torch.fft.ifft2(c), torch.fft.rfft(x), torch.fft.irfft(c, n=16)

    actual, expected = run_in(mode, fn, z, r), fn(z, r)
    assert [t.dtype for t in actual] == [t.dtype for t in expected]
    assert_close(list(actual), list(expected), SUM_ATOL, SUM_RTOL)


def test_float64_and_python_complex_promote_to_complex128_as_on_cpu():
    x, z, c = torch.randn(4, dtype=torch.float64), zrand(4), torch.randn(4, dtype=torch.complex64)
    cases = {
        "float64 * complex128": lambda: (x, z, lambda a, b: a * b),
        "float64 + python complex": lambda: (x, z, lambda a, b: a + (1 / 3 + 2j)),
        "complex64 * float64": lambda: (c, x, lambda a, b: a * b),
        "complex of float64 parts": lambda: (x, x, lambda a, b: torch.complex(a, b * 2)),
    }
    for name, case in cases.items():
        a, b, fn = case()
        expected = fn(a, b)
        actual = fn(a.to("tpu"), b.to("tpu"))
        assert actual.dtype == expected.dtype == torch.complex128, name
        assert_close(actual, expected, ATOL, RTOL, msg=name)


@pytest.mark.parametrize("mode", MODES)
def test_complex128_gradient_through_abs_of_matmul_matches_cpu(mode):
    a, b = zrand(3, 4), zrand(4, 2)

    def grads(x, y):
        x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
        (x @ y).abs().sum().backward()
        return x.grad, y.grad

    assert_close(list(run_in(mode, grads, a, b)), list(grads(a, b)), SUM_ATOL, SUM_RTOL)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_matmul_dot_and_norm_read_the_conjugate_bit_as_cpu_does(dtype):
    # PyTorch's Conjugate fallback hands mm/bmm/addmm/dot/vdot/vector_norm a
    # lazily conjugated input as it is; the values must be conjugated.
    a, b = torch.randn(4, 3, dtype=dtype), torch.randn(3, dtype=dtype)
    tol = (SUM_ATOL, SUM_RTOL) if dtype == torch.complex128 else (2e-6, 2e-6)
    checks = {
        "a @ a.mH": lambda x, y: x @ x.mH,
        "bmm": lambda x, y: torch.bmm(x.conj().unsqueeze(0), x.mT.unsqueeze(0)),
        "addmm": lambda x, y: torch.addmm(x @ x.mH, x.conj(), x.mT),
        "dot": lambda x, y: torch.dot(y.conj(), y),
        "vdot": lambda x, y: torch.vdot(y.conj(), y),
        "mv": lambda x, y: torch.mv(x, y.conj()),
    }
    for name, fn in checks.items():
        assert_close(fn(a.to("tpu"), b.to("tpu")), fn(a, b).resolve_conj(), *tol, msg=name)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_angle_and_vector_norm_match_cpu(dtype):
    z = torch.tensor([1 + 1j, -1 + 0.5j, -2 - 1e-3j, 0j, 3 + 0j], dtype=dtype)
    tol = (ATOL, RTOL) if dtype == torch.complex128 else (1e-6, 1e-6)
    assert_close(z.to("tpu").angle(), z.angle(), *tol)
    for order in (2, 1, float("inf"), 0.5):
        assert_close(torch.linalg.vector_norm(z.to("tpu"), order), torch.linalg.vector_norm(z, order), *tol)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_addmm_and_baddbmm_with_complex_alpha_and_beta_match_cpu(dtype):
    s, a, b = torch.randn(2, 3, dtype=dtype), torch.randn(2, 4, dtype=dtype), torch.randn(4, 3, dtype=dtype)
    tol = (SUM_ATOL, SUM_RTOL) if dtype == torch.complex128 else (1e-5, 1e-5)
    for alpha, beta in ((2 + 3j, 1 + 2j), (1 + 1j, 0j), (1, 1j)):

        def fn(x, y, z):
            return torch.addmm(x, y, z, alpha=alpha, beta=beta), torch.baddbmm(
                x[None], y[None], z[None], alpha=alpha, beta=beta
            )

        assert_close(list(fn(s.to("tpu"), a.to("tpu"), b.to("tpu"))), list(fn(s, a, b)), *tol, msg=f"{alpha}, {beta}")
