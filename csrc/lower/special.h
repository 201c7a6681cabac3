// Special functions (torch.special and their ATen ops): gamma family,
// Bessel functions, error-function relatives, orthogonal polynomials,
// xlogy/xlog1py/entr. Each follows PyTorch's CPU kernel
// (aten/src/ATen/native/Math.h) in float32.
#pragma once

#include "lower/lowering.h"

namespace torch_tpu::lower {

// special.cpp
TORCH_TPU_LOWERING(digamma)
TORCH_TPU_LOWERING(i0)
TORCH_TPU_LOWERING(igamma)
TORCH_TPU_LOWERING(igammac)
TORCH_TPU_LOWERING(lgamma)
TORCH_TPU_LOWERING(polygamma)
TORCH_TPU_LOWERING(special_airy_ai)
TORCH_TPU_LOWERING(special_bessel_j0)
TORCH_TPU_LOWERING(special_bessel_j1)
TORCH_TPU_LOWERING(special_bessel_y0)
TORCH_TPU_LOWERING(special_bessel_y1)
TORCH_TPU_LOWERING(special_chebyshev_polynomial_t)
TORCH_TPU_LOWERING(special_chebyshev_polynomial_u)
TORCH_TPU_LOWERING(special_chebyshev_polynomial_v)
TORCH_TPU_LOWERING(special_chebyshev_polynomial_w)
TORCH_TPU_LOWERING(special_entr)
TORCH_TPU_LOWERING(special_erfcx)
TORCH_TPU_LOWERING(special_hermite_polynomial_h)
TORCH_TPU_LOWERING(special_hermite_polynomial_he)
TORCH_TPU_LOWERING(special_i0e)
TORCH_TPU_LOWERING(special_i1)
TORCH_TPU_LOWERING(special_i1e)
TORCH_TPU_LOWERING(special_laguerre_polynomial_l)
TORCH_TPU_LOWERING(special_legendre_polynomial_p)
TORCH_TPU_LOWERING(special_log_ndtr)
TORCH_TPU_LOWERING(special_modified_bessel_i0)
TORCH_TPU_LOWERING(special_modified_bessel_i1)
TORCH_TPU_LOWERING(special_modified_bessel_k0)
TORCH_TPU_LOWERING(special_modified_bessel_k1)
TORCH_TPU_LOWERING(special_ndtri)
TORCH_TPU_LOWERING(special_scaled_modified_bessel_k0)
TORCH_TPU_LOWERING(special_scaled_modified_bessel_k1)
TORCH_TPU_LOWERING(special_shifted_chebyshev_polynomial_t)
TORCH_TPU_LOWERING(special_shifted_chebyshev_polynomial_u)
TORCH_TPU_LOWERING(special_shifted_chebyshev_polynomial_v)
TORCH_TPU_LOWERING(special_shifted_chebyshev_polynomial_w)
TORCH_TPU_LOWERING(special_spherical_bessel_j0)
TORCH_TPU_LOWERING(special_xlog1py)
TORCH_TPU_LOWERING(special_zeta)
TORCH_TPU_LOWERING(xlogy)

}  // namespace torch_tpu::lower
