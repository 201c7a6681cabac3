// Elementwise math beyond the basic arithmetic of elementwise.cpp: inverse
// and hyperbolic trigonometry, exp2/log10, erfc/erfinv, copysign, hypot,
// fmax/fmin, nextafter, logit, logaddexp, nan_to_num, gcd/lcm, shifts,
// round(decimals), angle, frexp.
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

// math.cpp
TORCH_TPU_LOWERING(acos)
TORCH_TPU_LOWERING(acosh)
TORCH_TPU_LOWERING(angle)
TORCH_TPU_LOWERING(asin)
TORCH_TPU_LOWERING(asinh)
TORCH_TPU_LOWERING(atan)
TORCH_TPU_LOWERING(atanh)
TORCH_TPU_LOWERING(bitwise_left_shift)
TORCH_TPU_LOWERING(bitwise_right_shift)
TORCH_TPU_LOWERING(copysign)
TORCH_TPU_LOWERING(cosh)
TORCH_TPU_LOWERING(erfc)
TORCH_TPU_LOWERING(erfinv)
TORCH_TPU_LOWERING(exp2)
TORCH_TPU_LOWERING(fmax)
TORCH_TPU_LOWERING(fmin)
TORCH_TPU_LOWERING(frac)
TORCH_TPU_LOWERING(frexp)
TORCH_TPU_LOWERING(gcd)
TORCH_TPU_LOWERING(heaviside)
TORCH_TPU_LOWERING(hypot)
TORCH_TPU_LOWERING(lcm)
TORCH_TPU_LOWERING(log10)
TORCH_TPU_LOWERING(logaddexp)
TORCH_TPU_LOWERING(logaddexp2)
TORCH_TPU_LOWERING(logit)
TORCH_TPU_LOWERING(logit_backward)
TORCH_TPU_LOWERING(nan_to_num)
TORCH_TPU_LOWERING(nextafter)
TORCH_TPU_LOWERING(round_decimals)
TORCH_TPU_LOWERING(signbit)
TORCH_TPU_LOWERING(sinc)
TORCH_TPU_LOWERING(sinh)

}  // namespace torch_tpu::lower
