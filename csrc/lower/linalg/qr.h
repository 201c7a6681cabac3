// Householder QR (LAPACK geqrf / orgqr), which the SVD also uses (qr.cpp).
#pragma once

#include <cstdint>
#include <utility>

#include "lower/linalg/common.h"

namespace torch_tpu::lower::linalg {

// geqrf of [B, m, n]: (reflectors and R, tau [B, min(m, n)]).
std::pair<Value, Value> geqrf_of(Builder& b, const Value& a);

// Q = H_0 H_1 ... H_{k-1} I[m, cols] (orgqr), k = tau's length.
Value orgqr(Builder& b, const Value& reflectors, const Value& tau, int64_t cols);

}  // namespace torch_tpu::lower::linalg
