// FFT: aten::_fft_c2c, _fft_r2c and _fft_c2r, which every torch.fft function
// (fftn, rfft2, hfft, ...) and stft decompose into, through stablehlo.fft.
// stablehlo.fft transforms the trailing (up to 3) dims, so the requested dims
// are transposed to the end and back. Scaling follows PyTorch's
// fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the product of the
// signal sizes; XLA's inverse transforms already divide by n, which is undone.
#include "lower/fft.h"

#include <cmath>
#include <stdexcept>

namespace torch_tpu::lower {

namespace {

constexpr int64_t kMaxFftRank = 3;  // stablehlo.fft's limit on fft_length

std::vector<int64_t> wrapped_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, rank));
  return out;
}

// A permutation moving `dims` (in order) behind the other dims, and its inverse.
std::vector<int64_t> dims_last(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) {
    bool moved = false;
    for (int64_t d : dims) moved |= d == i;
    if (!moved) perm.push_back(i);
  }
  perm.insert(perm.end(), dims.begin(), dims.end());
  return perm;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

Value multiply_by(Builder& b, const Value& v, double factor) {
  if (factor == 1.0) return v;
  return b.binary("multiply", v, b.splat(factor, v.type));
}

// The factor PyTorch applies for `normalization` over `n` signal elements.
double norm_factor(int64_t normalization, double n) {
  if (normalization == 1) return 1.0 / std::sqrt(n);
  if (normalization == 2) return 1.0 / n;
  return 1.0;
}

// One stablehlo.fft of kind `type` over `dims` (at most 3), which end up
// with sizes `out_sizes` (the transform's result sizes there).
Value fft_over(Builder& b, const Value& x, const std::vector<int64_t>& dims, hlo::FftType type,
               const std::vector<int64_t>& fft_length, ElementType out_dtype, const std::vector<int64_t>& out_sizes) {
  std::vector<int64_t> perm = dims_last(dims, x.rank());
  Value t = b.transpose(x, perm);
  Shape shape = t.shape();
  for (size_t i = 0; i < dims.size(); ++i) shape[shape.size() - dims.size() + i] = out_sizes[i];
  Value y = b.fft(t, type, fft_length, {out_dtype, shape});
  return b.transpose(y, inverse(perm));
}

// Unnormalized complex transforms over any number of dims, in groups of 3.
Value c2c_unnormalized(Builder& b, Value x, const std::vector<int64_t>& dims, bool forward) {
  for (size_t start = 0; start < dims.size(); start += kMaxFftRank) {
    std::vector<int64_t> group(dims.begin() + start, dims.begin() + std::min(dims.size(), start + kMaxFftRank));
    std::vector<int64_t> sizes;
    double n = 1;
    for (int64_t d : group) {
      sizes.push_back(x.shape()[d]);
      n *= static_cast<double>(x.shape()[d]);
    }
    x = fft_over(b, x, group, forward ? hlo::FftType::FFT : hlo::FftType::IFFT, sizes, x.dtype(), sizes);
    if (!forward) x = multiply_by(b, x, n);
  }
  return x;
}

bool is_empty(const TensorType& t) { return t.numel() == 0; }

}  // namespace

// conj_physical: complex conjugate materialized; a copy for real dtypes.
std::vector<Value> conj_physical(LowerContext& ctx) {
  Builder& b = ctx.b;
  const Value& x = ctx.tensor(0);
  if (!hlo::is_complex(x.dtype())) return {coerce(b, x, ctx.out_types.at(0))};
  return {b.conjugate(x)};
}

// _fft_c2c(self, dim, normalization, forward)
std::vector<Value> fft_c2c(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (is_empty(out)) return {zeros(b, out)};
  Value x = coerce(b, ctx.tensor(0), {out.dtype, ctx.tensor(0).shape()});
  std::vector<int64_t> dims = wrapped_dims(ctx.ints(1), x.rank());
  const int64_t normalization = ctx.int_arg(2);
  Value y = c2c_unnormalized(b, x, dims, ctx.bool_arg(3));
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.shape()[d]);
  return {multiply_by(b, y, norm_factor(normalization, n))};
}

// _fft_r2c(self, dim, normalization, onesided): onesided keeps the first
// n/2 + 1 outputs of the last dim (RFFT there, complex FFTs elsewhere).
std::vector<Value> fft_r2c(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (is_empty(out)) return {zeros(b, out)};
  // float64 input transforms in complex128, every other float in complex64.
  Value x = b.convert(ctx.tensor(0), hlo::complex_part_type(out.dtype));
  std::vector<int64_t> dims = wrapped_dims(ctx.ints(1), x.rank());
  const int64_t normalization = ctx.int_arg(2);
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.shape()[d]);
  Value y;
  if (ctx.bool_arg(3)) {
    const int64_t last = dims.back();
    const int64_t len = x.shape()[last];
    y = fft_over(b, x, {last}, hlo::FftType::RFFT, {len}, out.dtype, {len / 2 + 1});
    y = c2c_unnormalized(b, y, std::vector<int64_t>(dims.begin(), dims.end() - 1), true);
  } else {
    y = c2c_unnormalized(b, b.convert(x, out.dtype), dims, true);
  }
  return {multiply_by(b, y, norm_factor(normalization, n))};
}

// _fft_c2r(self, dim, normalization, last_dim_size): the inverse of a
// onesided r2c: complex inverse FFTs over all but the last dim, then IRFFT
// producing last_dim_size reals (imaginary parts of the DC and Nyquist
// terms are ignored, as pocketfft does).
std::vector<Value> fft_c2r(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  if (is_empty(out)) return {zeros(b, out)};
  Value x = ctx.tensor(0);
  std::vector<int64_t> dims = wrapped_dims(ctx.ints(1), x.rank());
  const int64_t normalization = ctx.int_arg(2);
  const int64_t last = dims.back(), len = ctx.int_arg(3);
  Value y = c2c_unnormalized(b, x, std::vector<int64_t>(dims.begin(), dims.end() - 1), false);
  // IRFFT reads len / 2 + 1 inputs along the last dim.
  const int64_t need = len / 2 + 1, have = y.shape()[last];
  if (have > need) {
    Shape start(y.rank(), 0), limit = y.shape(), strides(y.rank(), 1);
    limit[last] = need;
    y = b.slice(y, start, limit, strides);
  } else if (have < need) {
    Shape low(y.rank(), 0), high(y.rank(), 0), interior(y.rank(), 0);
    high[last] = need - have;
    y = b.pad(y, b.constant(0, y.dtype()), low, high, interior);
  }
  y = fft_over(b, y, {last}, hlo::FftType::IRFFT, {len}, out.dtype, {len});
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(out.shape[d]);
  return {multiply_by(b, y, static_cast<double>(len) * norm_factor(normalization, n))};
}

// roll(self, shifts, dims): element i moves to (i + shift) mod size; with no
// dims, over the flattened tensor (torch.fft.fftshift rolls by size / 2).
std::vector<Value> roll(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& out = ctx.out_types.at(0);
  Value x = ctx.tensor(0);
  std::vector<int64_t> shifts = ctx.ints(1), dims = ctx.ints(2);
  if (is_empty(out)) return {x};
  const bool flat = dims.empty();
  if (flat) {
    x = b.reshape(x, {x.type.numel()});
    dims = {0};
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = wrap_dim(dims[k], x.rank()), size = x.shape()[d];
    const int64_t s = ((shifts.at(k) % size) + size) % size;
    if (s == 0) continue;
    Shape start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
    start[d] = size - s;
    Value tail = b.slice(x, start, limit, strides);
    start[d] = 0;
    limit[d] = size - s;
    Value head = b.slice(x, start, limit, strides);
    x = b.concatenate({tail, head}, d);
  }
  return {flat ? b.reshape(x, out.shape) : x};
}

}  // namespace torch_tpu::lower
