// Linear algebra lowerings (linalg.cpp), in the input's precision: factorizations built from
// StableHLO's cholesky/triangular_solve and while loops, and the solvers,
// inverses and determinants PyTorch composes from them.
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
