"""torch.linalg.eig and eigvals on tpu against CPU. They run on the host as
CUDA's do (csrc/device/linalg_kernels.cpp): CPU's LAPACK kernel, so the
eigenvalues come in CPU's order and the eigenvectors with CPU's
normalization, and the outputs compare directly. Checked: real and complex
inputs, batches, complex-conjugate pairs, gradients through eigenvalues and
gauge-invariant functions of the eigenvectors, out=, each eager mode and
compiled, and CPU's errors."""

import pytest
import torch
from reference import assert_close

import torch_tpu

TOL = dict(atol=1e-4, rtol=1e-4)


def nonsymmetric(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(*shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        a = torch.complex(a, torch.randn(*shape, generator=g, dtype=torch.float64))
    return a.to(dtype)


def eig_and_gradients(a, run):
    """Eigenvalues, eigenvectors' moduli (a function of the vectors that does
    not depend on their phase) and the gradient of a loss of both."""
    a = a.detach().clone().requires_grad_()
    values, vectors = run(torch.linalg.eig, a)
    weights = torch.linspace(0.5, 1.5, values.shape[-1], device=a.device)
    loss = (values.real * weights).sum() + (values.imag**2).sum() + (vectors.abs() * weights).sum()
    loss.backward()
    return values, vectors.abs(), a.grad


def run_in(mode):
    if mode == "compiled":
        return lambda f, *args: torch.compile(lambda *xs: f(*xs), backend="tpu")(*args)
    return lambda f, *args: f(*args)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_eig_values_vectors_and_gradients_match_cpu(shape, dtype, mode):
    a = nonsymmetric(*shape, dtype=dtype)
    expected = eig_and_gradients(a, run_in("strict"))
    with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
        # an op before and after, so DeferAndFuse has pending work to run first
        on_tpu = a.to("tpu") * 1.0
        actual = eig_and_gradients(on_tpu, run_in(mode))
        actual = [t * 1 for t in actual]
    assert all(t.device.type == "tpu" for t in actual)
    assert actual[0].dtype == expected[0].dtype
    assert_close(list(actual), list(expected), **TOL)


def test_real_matrix_with_complex_conjugate_eigenvalues():
    rotation = torch.tensor([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    values, vectors = torch.linalg.eig(rotation.to("tpu"))
    cpu_values, cpu_vectors = torch.linalg.eig(rotation)
    assert values.dtype == torch.complex64
    assert_close(values, cpu_values, atol=0, rtol=0)
    assert_close(vectors, cpu_vectors, atol=0, rtol=0)
    # A V = V diag(w), computed on the device
    residual = rotation.to("tpu").to(torch.complex64) @ vectors - vectors * values.unsqueeze(-2)
    assert residual.abs().max().item() < 1e-5


def test_eigvals_matches_cpu_with_gradient():
    a = nonsymmetric(2, 5, 5)
    cpu = a.clone().requires_grad_()
    tpu = a.to("tpu").requires_grad_()
    expected, actual = torch.linalg.eigvals(cpu), torch.linalg.eigvals(tpu)
    assert_close(actual, expected, **TOL)
    expected.real.sum().backward()
    actual.real.sum().backward()
    assert_close(tpu.grad, cpu.grad, **TOL)
    with torch.no_grad():  # no graph: the eigenvalues-only kernel
        assert_close(torch.linalg.eigvals(a.to("tpu")), torch.linalg.eigvals(a), **TOL)


def test_out_variants_write_into_given_tensors():
    a = nonsymmetric(3, 3)
    values = torch.empty(0, dtype=torch.complex64, device="tpu")
    vectors = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.linalg.eig(a.to("tpu"), out=(values, vectors))
    cpu_values, cpu_vectors = torch.linalg.eig(a)
    assert_close(values, cpu_values, **TOL)
    assert_close(vectors, cpu_vectors, **TOL)
    out = torch.empty(3, dtype=torch.complex128, device="tpu")
    torch.linalg.eigvals(a.to("tpu"), out=out)
    assert out.dtype == torch.complex128
    assert_close(out, cpu_values.to(torch.complex128), **TOL)


def test_errors_are_cpus():
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        torch.linalg.eig(torch.randn(3, 4, device="tpu"))
    real_out = torch.empty(0, device="tpu")
    with pytest.raises(RuntimeError, match="Expected eigenvalues to be safely castable"):
        torch.linalg.eig(torch.randn(3, 3, device="tpu"), out=(real_out, torch.empty(0, device="tpu")))
    with pytest.raises(RuntimeError, match="torch.linalg.eigvals: Expected eigenvalues to be safely castable"):
        torch.linalg.eigvals(torch.randn(3, 3, device="tpu"), out=real_out)
    with pytest.raises(RuntimeError, match="same device"):
        torch.linalg.eigvals(torch.randn(3, 3, device="tpu"), out=torch.empty(0, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="linalg.eig: input tensor should not contain infs or NaNs"):
        torch.linalg.eig(torch.full((2, 2), float("nan"), device="tpu"))
