// Linear algebra lowerings, defined in linalg/ by factorization (cholesky,
// lu, solve, qr, jacobi, ldl, matrix_exp; shared helpers in linalg/common).
// They compute in the input's precision: float32 or float64, and complex64
// or complex128; half types compute in float32. LAPACK's conventions (what
// PyTorch's CPU kernels return): Cholesky and triangular solves map to
// stablehlo.cholesky and stablehlo.triangular_solve; LU with partial pivoting
// (getrf), Householder QR (geqrf/orgqr) and Bunch-Kaufman LDL^T (sytrf/sytrs,
// and hetrf/hetrs for Hermitian complex matrices) are stablehlo.while
// loops over the columns; solvers, inverses and determinants are built from
// those. Batch dims are flattened to one leading dim B. Loop bodies select
// with row/column masks instead of slicing at a loop-variable index, so every
// step has static shapes. Singular or non-positive-definite inputs report
// through the `info` results (PyTorch's *_ex ops); the non-_ex ops check info
// on the host.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

TORCH_TPU_LOWERING(cholesky_inverse)
TORCH_TPU_LOWERING(cholesky_solve_helper)
TORCH_TPU_LOWERING(geqrf)
TORCH_TPU_LOWERING(linalg_cholesky_ex)
TORCH_TPU_LOWERING(linalg_det)
TORCH_TPU_LOWERING(linalg_eigh)
TORCH_TPU_LOWERING(linalg_householder_product)
TORCH_TPU_LOWERING(linalg_inv_ex)
TORCH_TPU_LOWERING(linalg_ldl_factor_ex)
TORCH_TPU_LOWERING(linalg_ldl_solve)
TORCH_TPU_LOWERING(linalg_lu)
TORCH_TPU_LOWERING(linalg_lu_factor_ex)
TORCH_TPU_LOWERING(linalg_lu_solve)
TORCH_TPU_LOWERING(linalg_matrix_exp)
TORCH_TPU_LOWERING(linalg_qr)
TORCH_TPU_LOWERING(linalg_slogdet)
TORCH_TPU_LOWERING(linalg_solve_ex)
TORCH_TPU_LOWERING(linalg_solve_triangular)
TORCH_TPU_LOWERING(linalg_svd)
TORCH_TPU_LOWERING(lu_unpack)
TORCH_TPU_LOWERING(triangular_solve)

}  // namespace torch_tpu::lower
