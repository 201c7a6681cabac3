"""float64 and complex128 linear algebra computes in double precision, as
CPU's LAPACK (d and z routines) does: every factorization, solve, inverse,
determinant, eigen- and singular-value routine and matrix_exp agrees with
CPU to 1e-12, in each eager mode and compiled. Before, the lowerings
converted double inputs to float32 (complex64) and agreed to 1e-7 only."""

import pytest
import torch
from reference import assert_close

import torch_tpu

MODES = ["strict", "defer_and_fuse", "compiled"]
TOL = dict(atol=1e-12, rtol=1e-12)


def inputs(dtype):
    g = torch.Generator().manual_seed(3)

    def randn(*shape):
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
        if dtype.is_complex:
            x = torch.complex(x, torch.randn(*shape, generator=g, dtype=torch.float64))
        return x.to(dtype)

    a = randn(2, 5, 5) + 3 * torch.eye(5, dtype=dtype)
    return a, randn(2, 5, 3), randn(2, 6, 4)


OPS = {
    "solve": lambda a, b, t: torch.linalg.solve(a, b),
    "inv": lambda a, b, t: torch.linalg.inv(a),
    "det": lambda a, b, t: torch.linalg.det(a),
    "slogdet": lambda a, b, t: torch.linalg.slogdet(a),
    "lu_factor": lambda a, b, t: torch.linalg.lu_factor(a),
    "cholesky": lambda a, b, t: torch.linalg.cholesky(a @ a.mH),
    "cholesky_solve": lambda a, b, t: torch.cholesky_solve(b, torch.linalg.cholesky(a @ a.mH)),
    "qr": lambda a, b, t: torch.linalg.qr(t),
    "solve_triangular": lambda a, b, t: torch.linalg.solve_triangular(a.triu(), b, upper=True),
    "matrix_exp": lambda a, b, t: torch.linalg.matrix_exp(a * 0.3),
    "matrix_exp_scaled_and_squared": lambda a, b, t: torch.linalg.matrix_exp(a * 2),
}
REAL_ONLY = {
    "eigvalsh": lambda a, b, t: torch.linalg.eigvalsh(a @ a.mT),
    "svdvals": lambda a, b, t: torch.linalg.svdvals(t),
    "ldl_factor": lambda a, b, t: torch.linalg.ldl_factor(a + a.mT),
    "lstsq": lambda a, b, t: torch.linalg.lstsq(t, t[..., :2] + 1).solution,
}
CASES = [(name, dtype) for name in OPS for dtype in (torch.float64, torch.complex128)]
CASES += [(name, torch.float64) for name in REAL_ONLY]


def call(name, *args):
    return {**OPS, **REAL_ONLY}[name](*args)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,dtype", CASES)
def test_double_precision_linalg_matches_cpu_to_double_rounding(name, dtype, mode):
    args = inputs(dtype)
    expected = call(name, *args)
    on_tpu = [x.to("tpu") for x in args]
    if mode == "compiled":
        actual = torch.compile(lambda *xs: call(name, *xs), backend="tpu")(*on_tpu)
    else:
        with torch_tpu.eager_mode(mode):
            actual = call(name, *on_tpu)
    actual = list(actual) if isinstance(actual, tuple) else actual
    expected = list(expected) if isinstance(expected, tuple) else expected
    assert_close(actual, expected, **TOL)


def test_float32_linalg_still_computes_in_float32():
    # The result's dtype and precision follow the input: float32 agrees with
    # CPU's float32, not with a float64 result.
    a, b, _ = inputs(torch.float64)
    a32, b32 = a.float(), b.float()
    x = torch.linalg.solve(a32.to("tpu"), b32.to("tpu"))
    assert x.dtype == torch.float32
    assert_close(x, torch.linalg.solve(a32, b32), atol=1e-5, rtol=1e-5)
