// linalg_matrix_exp: PyTorch's optimized Taylor polynomials with scaling and
// squaring.
#include "lower/linalg.h"

#include <cmath>
#include <vector>

#include "lower/common/arith.h"
#include "lower/linalg/common.h"

namespace torch_tpu::lower {

using namespace linalg;  // lower/linalg/common.h and the factorizations' own headers

namespace {

// PyTorch's matrix_exp (aten/src/ATen/native/LinearAlgebra.cpp, after Bader,
// Blanes and Casas 2019): per matrix, the optimized Taylor polynomial T_d of
// the least degree d in {1, 2, 4, 8, 12} whose bound on the 1-norm holds,
// else T_18 of A / 2^s squared s times. Every polynomial is computed for
// every matrix and the norm selects one, so the choice needs no host.
// The bounds are float32's, or float64's for float64 and complex128 (as
// PyTorch's thetas_float and thetas_double).
constexpr double kExpThetasFloat[6] = {1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
                                       5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00};
constexpr double kExpThetasDouble[6] = {2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
                                        4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00};

// sum_j coeffs[j] * powers[j] (PyTorch's _compute_linear_combination), with
// the coefficients rounded to float32 as ATen's float kernels round them.
Value linear_combination(Builder& b, const std::vector<Value>& powers, const std::vector<double>& coeffs) {
  Value acc = zeros(b, powers[0].type);
  for (size_t j = 0; j < coeffs.size(); ++j) {
    acc = b.binary("add", acc, b.binary("multiply", b.splat(coeffs[j], powers[j].type), powers[j]));
  }
  return acc;
}

using math::add;

Value taylor_t1(Builder& b, const Value& i, const Value& a) { return add(b, i, a); }

Value taylor_t2(Builder& b, const Value& i, const Value& a, const Value& a2) {
  return add(b, add(b, i, a), b.binary("divide", a2, b.splat(2, a2.type)));
}

// I + A + A^2 (I / 2 + A / 6 + A^2 / 24)
Value taylor_t4(Builder& b, const Value& i, const Value& a, const Value& a2) {
  Value inner = linear_combination(b, {i, a, a2}, {1 / 2.0, 1 / 6.0, 1 / 24.0});
  return linear_combination(b, {i, a, a2, bmm(b, a2, inner)}, {1.0, 1.0, 0.0, 1.0});
}

Value taylor_t8(Builder& b, const Value& i, const Value& a, const Value& a2) {
  const float sqrt_177 = 0.1330413469565007072504e+2f;
  const float x3 = 2. / 3.;
  const float x1 = x3 * ((1. + sqrt_177) / 88.);
  const float x2 = x3 * ((1. + sqrt_177) / 352.);
  const float x4 = (-271. + 29. * sqrt_177) / (315. * x3);
  const float x5 = (-11. + 11. * sqrt_177) / (1260. * x3);
  const float x6 = (-99. + 11. * sqrt_177) / (5040. * x3);
  const float x7 = (89. - sqrt_177) / (5040. * x3);
  const float y2 = (857. - 58. * sqrt_177) / 630.;
  Value a4 = bmm(b, a2, linear_combination(b, {a, a2}, {x1, x2}));
  Value a8 =
      bmm(b, linear_combination(b, {a2, a4}, {x3, 1.0}), linear_combination(b, {i, a, a2, a4}, {x4, x5, x6, x7}));
  return linear_combination(b, {i, a, a2, a4, a8}, {1.0, 1.0, y2, 0.0, 1.0});
}

Value taylor_t12(Builder& b, const Value& i, const Value& a, const Value& a2, const Value& a3) {
  static const std::vector<std::vector<double>> c = {
      {9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740},
      {5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989},
      {0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230},
      {-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359}};
  std::vector<Value> bs;
  for (const auto& row : c) bs.push_back(linear_combination(b, {i, a, a2, a3}, row));
  Value a6 = add(b, bs[2], bmm(b, bs[3], bs[3]));
  return add(b, bs[0], bmm(b, add(b, bs[1], a6), a6));
}

Value taylor_t18(Builder& b, const Value& i, const Value& a) {
  static const std::vector<std::vector<double>> c = {
      {0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.},
      {0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
       -6.37898194594723280150e-04},
      {-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02, -6.98210122488052056106e-03,
       3.34975017086070470649e-05},
      {-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02, 2.95552570429315521194e-02,
       -1.39180257516060693404e-05},
      {0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05}};
  Value a2 = bmm(b, a, a), a3 = bmm(b, a2, a), a6 = bmm(b, a3, a3);
  std::vector<Value> bs;
  for (const auto& row : c) bs.push_back(linear_combination(b, {i, a, a2, a3, a6}, row));
  Value a9 = add(b, bs[3], bmm(b, bs[0], bs[4]));
  return add(b, bs[1], bmm(b, add(b, bs[2], a9), a9));
}

// T_18 of a / 2^s squared s times, s = max(0, ceil(log2(norm / theta_18)))
// per matrix; the loop runs the largest s and squares each matrix only while
// its own s lasts.
Value scaled_and_squared_t18(Builder& b, const Value& i, const Value& a, const Value& norm, const double* thetas) {
  const Shape& s3 = a.shape();
  const Shape bs{s3[0]};
  Value ratio = b.binary("divide", norm, b.splat(thetas[5], norm.type));
  Value s = b.unary("ceil", b.binary("divide", b.unary("log", ratio), b.splat(std::log(2.0), ratio.type)));
  // log / log 2 may round across an integer: s is the least integer with ratio <= 2^s.
  Value two = b.splat(2, s.type);
  Value one = b.splat(1, s.type);
  s = b.select(cmp(b, ratio, b.binary("power", two, b.binary("subtract", s, one)), CompareDirection::LE),
               b.binary("subtract", s, one), s);
  s = b.select(cmp(b, ratio, b.binary("power", two, s), CompareDirection::GT), b.binary("add", s, one), s);
  s = b.binary("maximum", zeros(b, s.type), s);
  Value scaled = b.binary("divide", a, b.broadcast_in_dim(b.convert(b.binary("power", two, s), a.dtype()), s3, {0}));
  Value steps = b.convert(s, ElementType::S64);
  Value most = b.reduce(steps, reduce_init(b, "maximum", ElementType::S64), {0}, "maximum");
  std::vector<Value> init{b.constant_int(0, ElementType::S64), taylor_t18(b, i, scaled)};
  auto out = b.while_loop(
      init,
      [&](Builder& rb, const std::vector<Value>& st) {
        return std::vector<Value>{rb.compare(st[0], most, CompareDirection::LT)};
      },
      [&](Builder& rb, const std::vector<Value>& st) {
        Value more = cmp(rb, counter(rb, st[0], bs), steps, CompareDirection::LT);
        Value squared = rb.select(bcast_lead(rb, more, s3), bmm(rb, st[1], st[1]), st[1]);
        return std::vector<Value>{next_counter(rb, st[0]), squared};
      });
  return out[1];
}

}  // namespace

// linalg_matrix_exp(A)
std::vector<Value> linalg_matrix_exp(LowerContext& ctx) {
  Builder& b = ctx.b;
  const TensorType& t = ctx.out_types.at(0);
  if (t.numel() == 0) return {zeros(b, t)};
  Value a = flatten_batch(b, ctx.tensor(0), Complex::Computes);
  if (t.shape.back() == 1) return {reshape_as(b, b.unary("exponential", a), t)};
  const Shape& s3 = a.shape();
  const double* thetas = is_double(a) ? kExpThetasDouble : kExpThetasFloat;
  Value i = eye(b, s3, a.dtype());
  Value norm = b.reduce(b.reduce(b.unary("abs", a), b.constant(0, real_type(a)), {1}, "add"),
                        reduce_init(b, "maximum", real_type(a)), {1}, "maximum");
  Value a2 = bmm(b, a, a), a3 = bmm(b, a2, a);
  const std::vector<Value> candidates{taylor_t1(b, i, a), taylor_t2(b, i, a, a2), taylor_t4(b, i, a, a2),
                                      taylor_t8(b, i, a, a2), taylor_t12(b, i, a, a2, a3)};
  // As CPU: norm in (theta_{k-1}, theta_k] takes T_k; norm >= theta_12 T_18.
  Value result = scaled_and_squared_t18(b, i, a, norm, thetas);
  Value large = cmp(b, norm, b.splat(thetas[4], norm.type), CompareDirection::GE);
  for (int k = 4; k >= 0; --k) {
    Value upper = cmp(b, norm, b.splat(thetas[k], norm.type), CompareDirection::LE);
    Value in = k == 0 ? upper : both(b, upper, cmp(b, norm, b.splat(thetas[k - 1], norm.type), CompareDirection::GT));
    in = both(b, in, b.unary("not", large));
    result = b.select(bcast_lead(b, in, s3), candidates[k], result);
  }
  return {reshape_as(b, result, t)};
}

}  // namespace torch_tpu::lower
