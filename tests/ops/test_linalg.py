"""Linear algebra (float32) against CPU: Cholesky, triangular solves, LU and
what PyTorch builds on it (solve, inv, det, slogdet), Householder QR, eigh
and SVD; batched, identity, random well-conditioned inputs, gradients, and
the errors CPU raises for singular or non-positive-definite inputs."""

import pytest
import torch
from reference import assert_close, check_op

import torch_tpu

TOL = dict(atol=1e-4, rtol=1e-4)  # factorizations round differently than LAPACK's blocked kernels
BATCHES = [(), (3,), (2, 1)]


def well_conditioned(*shape):
    """Random square matrices with singular values in [1, 2]: LU, QR and
    solves are stable, so tpu and CPU agree to float32 rounding."""
    n = shape[-1]
    q1, _ = torch.linalg.qr(torch.randn(shape))
    q2, _ = torch.linalg.qr(torch.randn(shape))
    s = torch.linspace(1, 2, n).expand(shape[:-1])
    return q1 @ torch.diag_embed(s) @ q2.mT


def spd(*batch_and_n):
    """Symmetric positive-definite matrices of size n, batch dims first."""
    n = batch_and_n[-1]
    a = torch.randn(*batch_and_n, n)
    return a @ a.mT + n * torch.eye(n)


def symmetric_with_distinct_eigenvalues(*batch_and_n):
    n = batch_and_n[-1]
    shape = batch_and_n + (n,)
    q, _ = torch.linalg.qr(torch.randn(shape))
    w = torch.linspace(-2, 3, n).expand(shape[:-1])
    return q @ torch.diag_embed(w) @ q.mT


# ---- Cholesky ------------------------------------------------------------------------
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_cpu_with_gradients(batch, upper):
    check_op(lambda a: torch.linalg.cholesky(a, upper=upper), spd(*batch, 4), grad=True, **TOL)


def test_cholesky_of_identity_is_identity():
    check_op(torch.linalg.cholesky, torch.eye(5), atol=0, rtol=0)


def test_cholesky_ex_reports_first_failing_minor_in_info():
    a = spd(3, 4)
    a[1, 2, 2] = -100.0  # leading minor of order 3 of matrix 1 is not positive-definite
    l, info = torch.linalg.cholesky_ex(a.to("tpu"))
    assert info.cpu().tolist() == torch.linalg.cholesky_ex(a).info.tolist() == [0, 3, 0]
    assert_close(l[0], torch.linalg.cholesky(a[0]), **TOL)


def test_cholesky_of_non_positive_definite_raises_linalg_error():
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(-torch.eye(3).to("tpu"))


def test_cholesky_of_non_square_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.linalg.cholesky(torch.randn(3, 4).to("tpu"))


@pytest.mark.skipif(
    not hasattr(torch.ops.aten, "cholesky"),
    reason="this torch has no aten::cholesky (removed in torch 2.14): torch.cholesky only raises, "
    "naming torch.linalg.cholesky, whose tests are above",
)
def test_old_cholesky_api_matches_cpu_and_raises_on_non_positive_definite():
    check_op(torch.cholesky, spd(4), upper=True, grad=True, **TOL)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.cholesky(-torch.eye(3).to("tpu"))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_match_cpu_with_gradients(upper):
    a = spd(2, 4)
    f = torch.linalg.cholesky(a, upper=upper)
    check_op(lambda b, m: torch.cholesky_solve(b, m, upper=upper), torch.randn(2, 4, 3), f, grad=True, **TOL)
    check_op(lambda m: torch.cholesky_inverse(m, upper=upper), f[0], grad=True, **TOL)


# ---- triangular solves -------------------------------------------------------------
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_matches_cpu_with_gradients(upper, left, unitriangular):
    a = well_conditioned(2, 4, 4).triu() if upper else well_conditioned(2, 4, 4).tril()
    a = a + 3 * torch.eye(4)  # keep the triangle well conditioned
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    check_op(
        lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unitriangular),
        a,
        b,
        grad=True,
        **TOL,
    )


def test_solve_triangular_broadcasts_batch_dims():
    a = torch.randn(4, 4).tril() + 4 * torch.eye(4)
    check_op(lambda x, y: torch.linalg.solve_triangular(x, y, upper=False), a, torch.randn(3, 4, 2), **TOL)


@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve_returns_solution_and_coefficient(transpose):
    a = torch.randn(2, 3, 3).triu() + 3 * torch.eye(3)
    check_op(
        lambda b, m: torch.triangular_solve(b, m, upper=True, transpose=transpose),
        torch.randn(2, 3, 2),
        a,
        grad=True,
        **TOL,
    )


# ---- LU --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (5, 3), (3, 5), (2, 1, 4, 2)])
def test_lu_factor_matches_lapack_pivots_and_factors(shape):
    check_op(torch.linalg.lu_factor_ex, torch.randn(shape), **TOL)


def test_lu_factor_of_identity_has_no_swaps():
    lu, piv = torch.linalg.lu_factor(torch.eye(4).to("tpu"))
    assert piv.cpu().tolist() == [1, 2, 3, 4]
    assert_close(lu, torch.eye(4), atol=0, rtol=0)


def test_lu_factor_ex_reports_zero_pivot_in_info():
    a = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    check_op(torch.linalg.lu_factor_ex, a, atol=1e-6, rtol=1e-6)
    assert torch.linalg.lu_factor_ex(a.to("tpu")).info.item() == torch.linalg.lu_factor_ex(a).info.item() != 0


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)])
def test_linalg_lu_and_lu_unpack_reconstruct_the_input_with_gradients(shape):
    check_op(torch.linalg.lu, torch.randn(shape), grad=True, **TOL)
    lu, piv = torch.linalg.lu_factor(torch.randn(shape))
    check_op(torch.lu_unpack, lu, piv, **TOL)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_matches_cpu_with_gradients(left, adjoint):
    a = well_conditioned(2, 4, 4)
    lu, piv = torch.linalg.lu_factor(a)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    check_op(lambda f, p, y: torch.linalg.lu_solve(f, p, y, left=left, adjoint=adjoint), lu, piv, b, grad=True, **TOL)


@pytest.mark.parametrize("batch", BATCHES)
def test_solve_matches_cpu_with_gradients(batch):
    check_op(torch.linalg.solve, well_conditioned(*batch, 4, 4), torch.randn(*batch, 4, 2), grad=True, **TOL)


def test_solve_with_vector_and_broadcast_right_hand_sides():
    a = well_conditioned(3, 4, 4)
    check_op(torch.linalg.solve, a, torch.randn(3, 4), **TOL)
    check_op(torch.linalg.solve, a[0], torch.randn(4), **TOL)
    check_op(torch.linalg.solve, a[0], torch.randn(2, 4, 5), **TOL)
    check_op(lambda x, y: torch.linalg.solve(x, y, left=False), a, torch.randn(3, 2, 4), **TOL)


@pytest.mark.parametrize("batch", BATCHES)
def test_inv_matches_cpu_with_gradients(batch):
    check_op(torch.linalg.inv, well_conditioned(*batch, 5, 5), grad=True, **TOL)


def test_inverse_of_singular_matrix_raises_linalg_error():
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(torch.ones(3, 3).to("tpu"))
    _, info = torch.linalg.inv_ex(torch.ones(2, 3, 3).to("tpu"))
    assert (info.cpu() > 0).all()


def test_solve_of_singular_matrix_raises_linalg_error():
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.solve(torch.zeros(3, 3).to("tpu"), torch.randn(3).to("tpu"))


@pytest.mark.parametrize("batch", BATCHES)
def test_det_slogdet_logdet_match_cpu_with_gradients(batch):
    a = well_conditioned(*batch, 4, 4)
    check_op(torch.linalg.det, a, grad=True, **TOL)
    check_op(torch.linalg.slogdet, a, grad=True, **TOL)
    check_op(torch.logdet, spd(*batch, 4), grad=True, **TOL)


@pytest.mark.parametrize("view", ["transposed", "sliced"])
def test_det_slogdet_gradients_of_non_contiguous_input(view):
    # PyTorch's backward reads LU factors of A^T for a contiguous A and of A
    # otherwise: the forward must factor the one the backward expects.
    base = well_conditioned(2, 4, 4)
    if view == "transposed":
        make_view = lambda t: t.mT  # noqa: E731
    else:
        base = torch.cat([base, torch.randn(2, 4, 1)], dim=-1)
        make_view = lambda t: t[..., :4]  # noqa: E731
    check_op(lambda t: torch.linalg.det(make_view(t)), base, grad=True, **TOL)
    check_op(lambda t: torch.linalg.slogdet(make_view(t)), base, grad=True, **TOL)


def test_det_of_singular_and_permutation_matrices():
    perm = torch.eye(4)[[2, 0, 3, 1]]
    check_op(torch.linalg.det, perm, atol=0, rtol=0)
    check_op(torch.linalg.det, torch.ones(3, 3), atol=1e-6, rtol=0)
    check_op(torch.linalg.slogdet, torch.zeros(2, 2), atol=0, rtol=0)


def test_det_of_empty_matrix_is_one():
    check_op(torch.linalg.det, torch.randn(3, 0, 0), atol=0, rtol=0)


# ---- QR --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_lapack_householder_signs(shape, mode):
    check_op(lambda a: torch.linalg.qr(a, mode=mode), torch.randn(shape), **TOL)


def test_qr_gradients_match_cpu():
    check_op(torch.linalg.qr, well_conditioned(2, 4, 4), grad=True, **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 1, 4, 3)])
def test_geqrf_matches_lapack_reflectors_and_tau(shape):
    check_op(torch.geqrf, torch.randn(shape), **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 4, 3)])
def test_householder_product_of_geqrf_reflectors(shape):
    a, tau = torch.geqrf(torch.randn(shape))
    check_op(torch.linalg.householder_product, a, tau, grad=True, **TOL)


# ---- eigh and SVD ------------------------------------------------------------------------
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_values_and_vectors_up_to_sign(batch, uplo):
    a = symmetric_with_distinct_eigenvalues(*batch, 5)
    check_op(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a, grad=True, **TOL)
    check_op(lambda x: (lambda w, v: (w, v.abs()))(*torch.linalg.eigh(x, UPLO=uplo)), a, grad=True, **TOL)


def test_eigh_of_diagonal_matrix_sorts_eigenvalues():
    check_op(torch.linalg.eigvalsh, torch.diag(torch.tensor([3.0, -1.0, 2.0, 0.5])), atol=0, rtol=0)


def test_eigh_reads_only_the_requested_triangle():
    a = symmetric_with_distinct_eigenvalues(4)
    junk = a.tril() + 100 * torch.ones(4, 4).triu(1)
    check_op(lambda x: torch.linalg.eigvalsh(x, UPLO="L"), junk, **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (1, 1)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_up_to_signs_with_gradients(shape, full_matrices):
    def usv(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        return u[..., :k].abs(), s, vh[..., :k, :].abs(), u[..., :k] @ vh[..., :k, :]

    check_op(usv, torch.randn(shape), grad=True, **TOL)


def test_full_svd_has_orthogonal_factors():
    u, s, vh = torch.linalg.svd(torch.randn(6, 3).to("tpu"), full_matrices=True)
    assert_close(u.mT @ u, torch.eye(6), **TOL)
    assert_close(vh @ vh.mT, torch.eye(3), **TOL)


def test_svdvals_and_matrix_norms_built_on_svd():
    a = torch.randn(3, 5, 4)
    check_op(torch.linalg.svdvals, a, grad=True, **TOL)
    check_op(lambda x: torch.linalg.matrix_norm(x, ord=2), a, **TOL)
    check_op(torch.linalg.pinv, a, **TOL)


# ---- Matrix exponential ---------------------------------------------------------------
def run_in(mode, fn):
    """fn as run eagerly in `mode`, or compiled for tpu ("compiled")."""
    if mode == "compiled":
        return torch.compile(fn, backend="tpu")
    return lambda *args: _in_mode(mode, fn, *args)


def _in_mode(mode, fn, *args):
    with torch_tpu.eager_mode(mode):
        out = fn(*args)
        torch_tpu.synchronize()
        return out


MODES = ["strict", "defer_and_fuse", "compiled"]
# 1-norms in each of CPU's float32 degree intervals: T1, T2, T4, T8, T12, and
# T18 with 0, 2 and 6 squarings.
EXP_NORMS = [1e-8, 3e-4, 2e-2, 0.3, 1.2, 2.5, 10.0, 150.0]


def with_norm(a, norm):
    return a * (norm / torch.linalg.matrix_norm(a, ord=1)).unsqueeze(-1).unsqueeze(-1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("norm", EXP_NORMS)
def test_matrix_exp_matches_cpu_in_every_degree_with_gradients(norm, mode):
    a = with_norm(torch.randn(4, 4), norm)
    expected = torch.linalg.matrix_exp(a)
    actual = run_in(mode, torch.linalg.matrix_exp)(a.to("tpu"))
    assert_close(actual, expected, atol=1e-5 * expected.abs().max().item(), rtol=1e-4)
    if norm <= 10:
        check_op(run_in(mode, torch.linalg.matrix_exp), a, grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_matrix_exp_picks_a_degree_per_matrix_of_a_batch(mode):
    a = torch.stack([with_norm(torch.randn(3, 3), n) for n in EXP_NORMS[:-1]]).view(7, 1, 3, 3)
    check_op(run_in(mode, torch.linalg.matrix_exp), a, grad=True, atol=1e-4, rtol=1e-4)


def test_matrix_exp_of_one_by_one_and_empty_matrices():
    check_op(torch.linalg.matrix_exp, torch.randn(3, 1, 1), grad=True)
    check_op(torch.matrix_exp, torch.randn(2, 0, 0))


def test_matrix_exp_of_bad_input_raises_like_cpu():
    for bad in (torch.randn(2, 3), torch.ones(3, 3, dtype=torch.long), torch.randn(3)):
        with pytest.raises(RuntimeError) as on_cpu:
            torch.linalg.matrix_exp(bad)
        with pytest.raises(type(on_cpu.value)):
            torch.linalg.matrix_exp(bad.to("tpu"))


# ---- Least squares ----------------------------------------------------------------------
def lstsq_results(driver=None):
    def results(a, b):
        return tuple(torch.linalg.lstsq(a, b, driver=driver))

    return results


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 6, 4), (2, 6, 3)), ((2, 6, 4), (1, 6, 2))])
def test_lstsq_returns_what_cpu_returns_for_each_driver(shapes, driver, mode):
    # CPU's default driver (gelsy) returns the rank but no residuals and no
    # singular values; gels residuals only; gelsd and gelss all four.
    a, b = well_conditioned_rect(shapes[0]), torch.randn(shapes[1])
    expected = lstsq_results(driver)(a, b)
    actual = run_in(mode, lstsq_results(driver))(a.to("tpu"), b.to("tpu"))
    assert [t.shape for t in actual] == [t.shape for t in expected]
    assert [t.dtype for t in actual] == [t.dtype for t in expected]
    assert_close(list(actual), list(expected), **TOL)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((6, 4), (6,))])
def test_lstsq_solution_gradients_match_cpu(shapes, mode):
    a, b = well_conditioned_rect(shapes[0]), torch.randn(shapes[1])
    check_op(run_in(mode, lambda a, b: torch.linalg.lstsq(a, b).solution), a, b, grad=True, **TOL)


def test_lstsq_of_a_vector_right_hand_side_matches_cpu():
    a, b = well_conditioned_rect((2, 6, 3)), torch.randn(2, 6)
    for driver in (None, "gels", "gelsd"):
        check_op(lstsq_results(driver), a, b, **TOL)


def test_lstsq_bad_arguments_raise_like_cpu():
    a, b = torch.randn(5, 3), torch.randn(5, 2)
    cases = [
        lambda d: torch.linalg.lstsq(a.to(d), b.to(d), driver="foo"),
        lambda d: torch.linalg.lstsq(a.to(d), torch.randn(4, 2, device=d)),
        lambda d: torch.linalg.lstsq(a.to(d).long(), b.to(d).long()),
        lambda d: torch.linalg.lstsq(a.to(d), b.to(d).double()),
        lambda d: torch.linalg.lstsq(torch.randn(3, device=d), b.to(d)),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as on_cpu:
            case("cpu")
        with pytest.raises(type(on_cpu.value)):
            case("tpu")


def well_conditioned_rect(shape):
    """Random matrices of full rank with singular values in [1, 2]."""
    m, n = shape[-2:]
    k = min(m, n)
    q1, _ = torch.linalg.qr(torch.randn(*shape[:-2], m, k))
    q2, _ = torch.linalg.qr(torch.randn(*shape[:-2], n, k))
    return q1 @ torch.diag_embed(torch.linspace(1, 2, k).expand(*shape[:-2], k)) @ q2.mT


# ---- ormqr -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize(
    "shapes,left",
    [(((5, 3), (5, 2)), True), (((4, 4), (3, 4)), False), (((4, 2), (3, 4)), False), (((2, 5, 3), (2, 5, 4)), True)],
)
def test_ormqr_applies_geqrf_reflectors_like_cpu_with_gradients(shapes, left, transpose, mode):
    reflectors, tau = torch.geqrf(torch.randn(shapes[0]))
    other = torch.randn(shapes[1])
    fn = run_in(mode, lambda a, t, c: torch.ormqr(a, t, c, left=left, transpose=transpose))
    check_op(fn, reflectors, tau, other, grad=True, **TOL)


def test_ormqr_bad_shapes_raise_like_cpu():
    reflectors, tau = torch.geqrf(torch.randn(5, 3))
    cases = [
        lambda d: torch.ormqr(reflectors.to(d), tau.to(d), torch.randn(4, 2, device=d)),
        lambda d: torch.ormqr(reflectors.to(d), tau.to(d), torch.randn(5, device=d)),
        lambda d: torch.ormqr(reflectors.to(d), tau.to(d)[:2].repeat(3), torch.randn(5, 2, device=d)),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as on_cpu:
            case("cpu")
        with pytest.raises(type(on_cpu.value)):
            case("tpu")


def symmetric_indefinite(*batch_and_n, seed=0):
    """Random symmetric matrices: Bunch-Kaufman takes 1x1 pivots, row
    interchanges and 2x2 pivots on them."""
    torch.manual_seed(seed)
    n = batch_and_n[-1]
    a = torch.randn(*batch_and_n, n)
    return a + a.mT


def run_in_mode(fn, args, mode):
    args = [a.to("tpu") for a in args]
    if mode == "compiled":
        torch._dynamo.reset()  # each shape a fresh compile, not a recompile counted against the limit
        return torch.compile(fn, backend="tpu", fullgraph=True)(*args)
    with torch_tpu.eager_mode(mode):
        return fn(*args)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("shape", [(1,), (2,), (5,), (4, 7), (2, 3, 12)])
def test_ldl_factor_ex_matches_lapack_pivots_and_factors(shape, mode):
    a = symmetric_indefinite(*shape)
    expected = torch.linalg.ldl_factor_ex(a)
    actual = run_in_mode(torch.linalg.ldl_factor_ex, [a], mode)
    assert_close(actual.pivots, expected.pivots)  # exact: every interchange and 2x2 block as LAPACK's
    assert_close(actual.info, expected.info)
    assert_close(actual.LD, expected.LD, **TOL)


def test_ldl_factor_takes_2x2_pivots_and_interchanges_as_lapack():
    # Zero diagonal: the first step must take a 2x2 block with an interchange.
    a = torch.tensor([[0.0, 1.0, 4.0], [1.0, 0.0, 2.0], [4.0, 2.0, 0.0]])
    expected = torch.linalg.ldl_factor(a)
    assert (expected.pivots < 0).any()
    assert_close(torch.linalg.ldl_factor(a.to("tpu")), expected, **TOL)
    # Many seeds: each pivot pattern Bunch-Kaufman picks, in one batch.
    batch = torch.stack([symmetric_indefinite(6, seed=s) for s in range(40)])
    expected = torch.linalg.ldl_factor_ex(batch)
    actual = torch.linalg.ldl_factor_ex(batch.to("tpu"))
    assert_close(actual.pivots, expected.pivots)
    assert_close(actual.LD, expected.LD, **TOL)


def test_ldl_factor_ex_reports_a_zero_column_in_info():
    a = symmetric_indefinite(3, 4)
    a[1, :, 2] = 0
    a[1, 2, :] = 0
    a[2] = 0
    expected = torch.linalg.ldl_factor_ex(a)
    assert expected.info.tolist() == [0, 3, 1]
    assert_close(torch.linalg.ldl_factor_ex(a.to("tpu")), expected, **TOL)


def test_ldl_factor_reads_only_the_lower_triangle():
    a = symmetric_indefinite(5)
    skewed = a.tril() + torch.randn(5, 5).triu(1)
    assert_close(torch.linalg.ldl_factor(skewed.to("tpu")), torch.linalg.ldl_factor(a), **TOL)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 1)])
def test_ldl_solve_matches_cpu_with_lapack_factors(batch, mode):
    a = symmetric_indefinite(*batch, 6, seed=3)
    ld, pivots = torch.linalg.ldl_factor(a)
    rhs = torch.randn(*batch, 6, 2)
    expected = torch.linalg.ldl_solve(ld, pivots, rhs)
    assert_close(run_in_mode(torch.linalg.ldl_solve, [ld, pivots, rhs], mode), expected, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(a @ expected, rhs, atol=1e-3, rtol=1e-3)


def test_ldl_factor_and_solve_end_to_end_on_device_broadcast_right_hand_sides():
    a = symmetric_indefinite(2, 8, seed=5)
    rhs = torch.randn(8, 3)  # broadcast over the factors' batch
    ld, pivots = torch.linalg.ldl_factor(a.to("tpu"))
    x = torch.linalg.ldl_solve(ld, pivots, rhs.to("tpu"))
    assert_close(x, torch.linalg.solve(a, rhs.expand(2, 8, 3)), atol=1e-3, rtol=1e-3)


def test_ldl_errors_match_cpu():
    for fn in [
        lambda d: torch.linalg.ldl_factor_ex(torch.randn(2, 3, device=d)),
        lambda d: torch.linalg.ldl_solve(
            torch.eye(3, device=d), torch.ones(3, dtype=torch.int32, device=d), torch.ones(4, 1, device=d)
        ),
        lambda d: torch.linalg.ldl_solve(torch.eye(3, device=d), torch.ones(3, device=d), torch.ones(3, 1, device=d)),
        lambda d: torch.linalg.ldl_solve(
            torch.eye(3, device=d), torch.ones(3, dtype=torch.int32, device=d), torch.ones(3, 1, device=d).double()
        ),
    ]:
        with pytest.raises(Exception) as on_cpu:
            fn("cpu")
        with pytest.raises(type(on_cpu.value)) as on_tpu:
            fn("tpu")
        assert str(on_tpu.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
