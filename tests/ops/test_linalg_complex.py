"""Complex matrices in the linalg lowerings (csrc/lower/linalg/).

The LU family (getrf with icamax's |re| + |im| pivoting, and the solves,
inverses and determinants built on it), least squares, the Cholesky family (A = L L^H, its
solves and inverse, and info for a matrix that is not positive definite) and
the triangular solves, Householder QR (LAPACK's complex reflectors: R's
diagonal real, tau complex), matrix_exp, the Hermitian eigenproblem and the
SVD (Jacobi rotations with a phase), and LDL (csytrf's and chetrf's
Bunch-Kaufman pivoting, and their solves) compute on complex64 and
complex128 matrices, against CPU, with gradients, in each eager mode and
compiled. Eigenvectors and singular vectors are unique up to a phase per
column, so those are compared through what does not depend on it. Before,
every one of them dropped the imaginary part and returned wrong values."""

import pytest
import torch
from reference import assert_close

import torch_tpu

TOL = dict(atol=1e-4, rtol=1e-4)
DTYPES = [torch.complex64, torch.complex128]


def complex_matrix(*shape, dtype, shift=0.0):
    g = torch.Generator().manual_seed(11)
    a = torch.complex(*(torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(2)))
    if shift:  # well conditioned: its eigenvalues moved away from 0
        a = a + shift * torch.eye(shape[-1], dtype=torch.float64)
    return a.to(dtype)


OPS = {
    "lu_factor": lambda a, b: torch.linalg.lu_factor(a),
    "lu": lambda a, b: torch.linalg.lu(a),
    "lu_unpack": lambda a, b: torch.lu_unpack(*torch.linalg.lu_factor(a)),
    "lu_solve": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
    "lu_solve_adjoint": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
    "lu_solve_right": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False),
    "lu_solve_right_adjoint": lambda a, b: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(a), b.mT, left=False, adjoint=True
    ),
    "solve": lambda a, b: torch.linalg.solve(a, b),
    "solve_vector": lambda a, b: torch.linalg.solve(a, b[..., 0]),
    "solve_right": lambda a, b: torch.linalg.solve(a, b.mT, left=False),
    "solve_conjugated": lambda a, b: torch.linalg.solve(a.mH, b),
    "inv": lambda a, b: torch.linalg.inv(a),
    "det": lambda a, b: torch.linalg.det(a),
    "slogdet": lambda a, b: torch.linalg.slogdet(a),
    "solve_triangular": lambda a, b: torch.linalg.solve_triangular(a.triu(), b, upper=True),
    # Hermitian positive definite: a a^H + I (the shift keeps a well conditioned)
    "cholesky": lambda a, b: torch.linalg.cholesky(a @ a.mH),
    "cholesky_upper": lambda a, b: torch.linalg.cholesky(a @ a.mH, upper=True),
    "cholesky_solve": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a @ a.mH)),
    "cholesky_solve_upper": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a @ a.mH, upper=True), True),
    "cholesky_inverse": lambda a, b: torch.cholesky_inverse(torch.linalg.cholesky(a @ a.mH)),
    # torch.triangular_solve's transpose is A^T, not A^H, for complex A too
    "triangular_solve_transpose": lambda a, b: torch.triangular_solve(b, a.triu(), upper=True, transpose=True),
    "triangular_solve_lower": lambda a, b: torch.triangular_solve(b, a.tril(), upper=False),
    "qr": lambda a, b: torch.linalg.qr(a),
    "qr_complete_wide": lambda a, b: torch.linalg.qr(b.mT, mode="complete"),
    "qr_tall": lambda a, b: torch.linalg.qr(b),
    "geqrf": lambda a, b: torch.geqrf(b),
    "householder_product": lambda a, b: torch.linalg.householder_product(*torch.geqrf(b)),
    "ormqr": lambda a, b: torch.ormqr(*torch.geqrf(a), b),
    "matrix_exp": lambda a, b: torch.linalg.matrix_exp(a * 0.2),
    "matrix_exp_scaled_and_squared": lambda a, b: torch.linalg.matrix_exp(a),
    "lstsq_tall": lambda a, b: torch.linalg.lstsq(b, a, driver="gelsd"),
    "lstsq_wide_minimum_norm": lambda a, b: torch.linalg.lstsq(b.mT, a[..., :3, :]),
    "solve_triangular_right": lambda a, b: torch.linalg.solve_triangular(a.tril(), b.mT, upper=False, left=False),
}


def run(name, a, b, mode):
    fn = OPS[name]
    if mode == "compiled":
        return torch.compile(fn, backend="tpu")(a, b)
    with torch_tpu.eager_mode(mode):
        out = fn(a, b)
        return [t * 1 if t.is_floating_point() or t.is_complex() else t for t in out] if isinstance(out, tuple) else out


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_lu_family_on_complex_matrices_matches_cpu(name, dtype, mode):
    a = complex_matrix(2, 4, 4, dtype=dtype, shift=2.0)
    b = complex_matrix(2, 4, 3, dtype=dtype)
    expected = OPS[name](a, b)
    actual = run(name, a.to("tpu"), b.to("tpu"), mode)
    assert_close(list(actual) if isinstance(actual, (tuple, list)) else actual, expected, **TOL)


@pytest.mark.parametrize(
    "name",
    ["solve", "inv", "det", "slogdet", "lu_solve_right_adjoint", "cholesky", "cholesky_solve", "qr", "lstsq_tall"],
)
def test_gradients_through_complex_factorizations_match_cpu(name):
    a = complex_matrix(3, 3, dtype=torch.complex64, shift=2.0)
    b = complex_matrix(3, 2, dtype=torch.complex64)

    def loss_and_grads(a, b):
        a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        out = OPS[name](a, b)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum((o.real if o.is_complex() else o).sum() + (o.imag.sum() if o.is_complex() else 0) for o in outs)
        loss.backward()
        return [loss, a.grad] + ([b.grad] if b.grad is not None else [])

    assert_close(loss_and_grads(a.to("tpu"), b.to("tpu")), loss_and_grads(a, b), **TOL)


def test_pivoting_follows_lapacks_complex_magnitude():
    # |re| + |im| picks row 1 (3 + 3 = 6 > 5 = 5 + 0), the modulus would pick row 0 (5 > 4.24)
    a = torch.tensor([[5 + 0j, 1], [3 + 3j, 2]], dtype=torch.complex64)
    lu, pivots = torch.linalg.lu_factor(a.to("tpu"))
    expected_lu, expected_pivots = torch.linalg.lu_factor(a)
    assert pivots.cpu().tolist() == expected_pivots.tolist() == [2, 2]
    assert_close(lu, expected_lu, **TOL)


def ldl(a, b, hermitian):
    """LDL factors of `a` (csytrf, or chetrf when hermitian) and the solve of
    a X = b with them (csytrs, chetrs)."""
    factors = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    return factors.LD, factors.pivots, factors.info, torch.linalg.ldl_solve(*factors[:2], b, hermitian=hermitian)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True], ids=["symmetric", "hermitian"])
def test_ldl_of_complex_matrices_matches_lapacks_factors_pivots_and_solves(hermitian, dtype, mode):
    # 24 random matrices of 6: Bunch-Kaufman takes 1x1 pivots, interchanges and 2x2 blocks on them, each matrix its
    # own sequence. Symmetric (A = L D L^T) or Hermitian (A = L D L^H); the upper triangle holds other values, and
    # a Hermitian diagonal an imaginary part, which LAPACK does not read.
    g = torch.Generator().manual_seed(4)
    a = torch.randn(24, 6, 6, dtype=dtype, generator=g)
    a = a + (a.mH if hermitian else a.mT)
    if hermitian:
        a = a + 1j * torch.diag_embed(torch.ones(6, dtype=a.real.dtype))
    a = a + torch.triu(torch.full_like(a, 5 - 2j), diagonal=1)
    b = torch.randn(24, 6, 2, dtype=dtype, generator=g)
    expected = ldl(a, b, hermitian)
    assert (expected[1] < 0).any() and (expected[1] != torch.arange(1, 7, dtype=torch.int32)).any()
    fn = torch.compile(ldl, backend="tpu") if mode == "compiled" else ldl
    with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
        actual = fn(a.to("tpu"), b.to("tpu"), hermitian)
    assert torch.equal(actual[1].cpu(), expected[1])  # every interchange and 2x2 block as LAPACK's
    assert torch.equal(actual[2].cpu(), expected[2])
    assert_close(actual[0], expected[0], **TOL)
    assert_close(actual[3], expected[3], atol=1e-3, rtol=1e-3)


def test_complex_ldl_reports_a_zero_column_and_conjugates_only_when_hermitian():
    a = complex_matrix(3, 4, 4, dtype=torch.complex128)
    a = a + a.mT
    a[1, :, 2] = 0
    a[1, 2, :] = 0
    symmetric = torch.linalg.ldl_factor_ex(a)
    assert symmetric.info.tolist() == [0, 3, 0]
    assert_close(torch.linalg.ldl_factor_ex(a.to("tpu")), symmetric, **TOL)
    # The same lower triangle read as Hermitian factors another matrix.
    hermitian = torch.linalg.ldl_factor_ex(a, hermitian=True)
    assert not torch.allclose(hermitian.LD, symmetric.LD)
    assert_close(torch.linalg.ldl_factor_ex(a.to("tpu"), hermitian=True), hermitian, **TOL)


def hermitian_with_noise(a):
    """a + a^H, with an imaginary part on the diagonal and other values in
    the upper triangle: eigh reads the lower triangle and the diagonal's
    real part only, as LAPACK's heevd."""
    h = a + a.mH
    h = h + 1j * torch.diag_embed(torch.arange(h.shape[-1], dtype=h.real.dtype, device=h.device)).to(h.dtype)
    return h + torch.triu(torch.full_like(h, 7 - 3j), diagonal=1)


# What does not depend on each vector's phase: values, |vectors|, and the
# matrix rebuilt from the factors.
PHASE_FREE = {
    "eigh": lambda a: (lambda w, v: [w, v.abs(), v @ torch.diag_embed(w.to(v.dtype)) @ v.mH])(
        *torch.linalg.eigh(hermitian_with_noise(a))
    ),
    "eigh_upper": lambda a: (lambda w, v: [w, v.abs(), v @ torch.diag_embed(w.to(v.dtype)) @ v.mH])(
        *torch.linalg.eigh(hermitian_with_noise(a).mH, UPLO="U")
    ),
    "eigvalsh": lambda a: torch.linalg.eigvalsh(a + a.mH),
    "svd_tall": lambda a: (lambda u, s, vh: [s, u.abs(), vh.abs(), u @ torch.diag_embed(s.to(u.dtype)) @ vh])(
        *torch.linalg.svd(a[..., :3], full_matrices=False)
    ),
    "svd_wide": lambda a: (lambda u, s, vh: [s, u.abs(), vh.abs(), u @ torch.diag_embed(s.to(u.dtype)) @ vh])(
        *torch.linalg.svd(a[..., :3, :], full_matrices=False)
    ),
    # full_matrices: the completed columns are unitary and span the rest
    "svd_full": lambda a: (
        lambda u, s, vh: [s, u.mH @ u, vh @ vh.mH, u[..., :3] @ torch.diag_embed(s.to(u.dtype)) @ vh[..., :3, :]]
    )(*torch.linalg.svd(a[..., :3, :], full_matrices=True)),
    "svdvals": lambda a: torch.linalg.svdvals(a),
    "pinv": lambda a: torch.linalg.pinv(a[..., :3]),
    "matrix_rank": lambda a: torch.linalg.matrix_rank(a[..., :2] @ a[..., :2].mH),  # rank 2 of 4
    "matrix_norm_2": lambda a: torch.linalg.matrix_norm(a, ord=2),
    "cond": lambda a: torch.linalg.cond(a),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PHASE_FREE))
def test_eigh_and_svd_of_complex_matrices_match_cpu(name, dtype, mode):
    a = complex_matrix(2, 4, 4, dtype=dtype)
    fn = PHASE_FREE[name]
    expected = fn(a)
    if mode == "compiled":
        actual = torch.compile(fn, backend="tpu")(a.to("tpu"))
    else:
        with torch_tpu.eager_mode(mode), torch_tpu.matmul_precision("highest"):
            actual = fn(a.to("tpu"))
    tol = TOL if dtype == torch.complex64 else dict(atol=1e-10, rtol=1e-10)
    assert_close(actual, expected, **tol)


@pytest.mark.parametrize("name", ["eigh", "svd_tall", "svd_wide"])
def test_gradients_through_complex_eigh_and_svd_match_cpu(name):
    a = complex_matrix(4, 4, dtype=torch.complex128)
    weights = torch.linspace(0.5, 2.0, 16, dtype=torch.float64).reshape(4, 4)

    def loss_and_grad(a):
        a = a.detach().clone().requires_grad_()
        outs = PHASE_FREE[name](a)
        loss = sum(
            ((o.abs() if o.is_complex() else o) * weights.to(o.device)[: o.shape[-2], : o.shape[-1]]).sum()
            if o.dim() > 1
            else (o * weights.to(o.device)[0, : o.shape[-1]]).sum()
            for o in outs
        )
        loss.backward()
        return [loss, a.grad]

    assert_close(loss_and_grad(a.to("tpu")), loss_and_grad(a), atol=1e-8, rtol=1e-8)


def test_complex_cholesky_reports_the_first_minor_that_is_not_positive_definite():
    a = complex_matrix(3, 4, 4, dtype=torch.complex64, shift=2.0)
    hpd = a @ a.mH
    hpd[1, 2, 2] = -100  # its third leading minor fails
    factor, info = torch.linalg.cholesky_ex(hpd.to("tpu"))
    expected_factor, expected_info = torch.linalg.cholesky_ex(hpd)
    assert info.cpu().tolist() == expected_info.tolist() == [0, 3, 0]
    assert_close(factor[0], expected_factor[0], **TOL)
    with pytest.raises(torch.linalg.LinAlgError, match="order 3 is not positive-definite"):
        torch.linalg.cholesky(hpd.to("tpu"))
