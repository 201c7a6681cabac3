// LU with partial pivoting (LAPACK getrf), which the LU lowerings, the
// solvers, inverses and determinants are built from (lu.cpp).
#pragma once

#include "lower/linalg/common.h"

namespace torch_tpu::lower::linalg {

// getrf's factors of [B, m, n] matrices.
struct LU {
  Value lu;    // [B, m, n]: unit-lower L below the diagonal, U on and above
  Value piv;   // [B, min(m, n)] s32, 1-based rows swapped with, as LAPACK
  Value info;  // [B] s32: 1-based index of the first zero pivot, or 0
};

// LU with partial pivoting (LAPACK getrf) of [B, m, n].
LU lu_factor(Builder& b, const Value& a);

// Solves A X = B (`left`) or X A = B, or their adjoint forms, from A's LU
// factors; all [B, ...].
// X A = B is A^T X^T = B^T, and A^T Y = C is A^H conj(Y) = conj(C);
// X A^H = B is A conj(X^T) = conj(B^T). (conj is the identity for real A.)
Value lu_solve(Builder& b, const Value& lu, const Value& piv, const Value& rhs, bool left, bool adjoint);

}  // namespace torch_tpu::lower::linalg
