// Special functions, each the algorithm of PyTorch's CPU kernel
// (aten/src/ATen/native/Math.h, derived from Cephes) in float32: loops with a
// bounded trip count are unrolled with masks, so every element follows the
// branch the CPU code takes for it.
#include "lower/special.h"

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "lower/common/arith.h"
#include "lower/common/reduction.h"
#include "lower/common/type_promotion.h"

namespace torch_tpu::lower {

namespace {

using math::Arith;
using math::float_op;
using math::float_unary;

// +inf for -0.0, -inf for +0.0: copysign(inf, -x) at a zero x.
Value pole_at_zero(const Arith& m, const Value& x) {
  return m.select(m.lt(m.div(1.0, x), 0), INFINITY, m.c(-INFINITY, x));
}

// ---- gamma family ------------------------------------------------------------------
// calc_digamma (float): reflection for negative x, the recurrence up to 10,
// then the asymptotic series.
Value digamma_value(const Arith& m, const Value& x0) {
  Value negative = m.lt(x0, 0);
  Value x = m.select(negative, m.sub(1, x0), x0);
  Value result = m.c(0, x);
  for (int i = 0; i < 10; ++i) {  // x >= 0 reaches 10 within ten steps
    Value below = m.lt(x, 10);
    result = m.select(below, m.sub(result, m.div(1.0, x)), result);
    x = m.select(below, m.add(x, 1), x);
  }
  const std::vector<double> A = {8.33333333333333333333E-2,  -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                                 -4.16666666666666666667E-3, 3.96825396825396825397E-3,  -8.33333333333333333333E-3,
                                 8.33333333333333333333E-2};
  Value z = m.div(1.0, m.mul(x, x));
  Value y = m.select(m.lt(x, 1e17), m.mul(z, m.polevl(z, A)), 0.0);
  Value asymptotic = m.sub(m.sub(m.add(result, m.log(x)), m.div(0.5, x)), y);
  Value d = m.select(m.eq(x, 10), m.add(result, 2.25175258906672110764), asymptotic);
  // Reflection: digamma(x) = digamma(1 - x) - pi / tan(pi r), r the fractional part.
  Value r = m.sub(x0, m.trunc(x0));
  Value reflected = m.sub(d, m.div(M_PI, m.b.unary("tan", m.mul(r, M_PI))));
  d = m.select(negative, m.select(m.eq(r, 0), NAN, reflected), d);
  return m.select(m.eq(x0, 0), pole_at_zero(m, x0), d);
}

// trigamma (float): reflection below 0.5, six recurrence steps, asymptotic.
Value trigamma_value(const Arith& m, const Value& x0) {
  Value reflect = m.lt(x0, 0.5);
  Value s = m.sin(m.mul(x0, M_PI));
  Value result = m.select(reflect, m.neg(m.div(M_PI * M_PI, m.mul(s, s))), m.c(0, x0));
  Value x = m.select(reflect, m.sub(1, x0), x0);
  for (int i = 0; i < 6; ++i) {
    result = m.add(result, m.div(1.0, m.mul(x, x)));
    x = m.add(x, 1);
  }
  Value ixx = m.div(1.0, m.mul(x, x));
  Value series = m.sub(1.0 / 6, m.mul(ixx, m.sub(1.0 / 30, m.mul(ixx, 1.0 / 42))));
  result = m.add(result, m.div(m.add(m.add(m.div(1.0, m.mul(x, 2)), 1), m.mul(ixx, series)), x));
  return m.select(reflect, m.neg(result), result);
}

// The Hurwitz zeta function as at::native zeta (Cephes): the direct sum
// until the term is small or a > 9 after at least nine terms (a loop whose
// trip count depends on q), then twelve Euler-Maclaurin terms.
Value zeta_value(const Arith& m, const Value& x, const Value& q) {
  Builder& b = m.b;
  const double machep = 1.11022302462515654042E-16;
  const std::vector<double> A = {12.0,
                                 -720.0,
                                 30240.0,
                                 -1209600.0,
                                 47900160.0,
                                 -1.8924375803183791606e9,
                                 7.47242496e10,
                                 -2.950130727918164224e12,
                                 1.1646782814350067249e14,
                                 -4.5979787224074726105e15,
                                 1.8152105401943546773e17,
                                 -7.1661652561756670113e18};
  // Edge values, decided before the sums.
  Value q_nonpositive = m.le(q, 0);
  Value q_integer = m.eq(q, m.floor(q));
  Value x_integer = m.eq(x, m.floor(x));
  Value edge = m.select(m.both(q_nonpositive, m.negate(x_integer)), NAN, m.c(0, x));
  edge = m.select(m.both(q_nonpositive, q_integer), INFINITY, edge);
  edge = m.select(m.lt(x, 1), NAN, edge);
  edge = m.select(m.eq(x, 1), INFINITY, edge);
  Value is_edge =
      m.either(m.either(m.le(x, 1), m.both(q_nonpositive, q_integer)), m.both(q_nonpositive, m.negate(x_integer)));

  Value neg_x = m.neg(x);
  auto sum = b.while_loop(
      {b.constant(0, ElementType::S32), q, m.c(0, x), m.pow(q, neg_x), is_edge, neg_x},
      [&](Builder& r, const std::vector<Value>& v) {
        Arith k{r};
        Value early = r.compare(v[0], r.constant(9, ElementType::S32), hlo::CompareDirection::LT);
        Value more = k.either(r.broadcast_to(early, v[1].shape()), k.le(v[1], 9));
        return std::vector<Value>{any_true(r, k.both(more, k.negate(v[4])))};
      },
      [&](Builder& r, const std::vector<Value>& v) {
        Arith k{r};
        const Value &i = v[0], &a0 = v[1], &b0 = v[2], &s0 = v[3], &done0 = v[4], &nx = v[5];
        Value early = r.compare(i, r.constant(9, ElementType::S32), hlo::CompareDirection::LT);
        Value active = k.both(k.either(r.broadcast_to(early, a0.shape()), k.le(a0, 9)), k.negate(done0));
        Value a = k.add(a0, 1);
        Value term = k.pow(a, nx);
        Value s = k.add(s0, term);
        Value converged = k.both(k.lt(k.mul(s, -machep), term), k.lt(term, k.mul(s, machep)));
        return std::vector<Value>{r.binary("add", i, r.constant(1, ElementType::S32)),
                                  k.select(active, a, a0),
                                  k.select(active, term, b0),
                                  k.select(active, s, s0),
                                  k.either(done0, k.both(active, converged)),
                                  nx};
      });
  Value a = sum[1], term = sum[2], s = sum[3], done = sum[4];
  // Euler-Maclaurin tail, for elements the sum did not settle.
  Value w = a;
  s = m.select(done, s, m.sub(m.add(s, m.div(m.mul(term, w), m.sub(x, 1))), m.mul(term, 0.5)));
  Value f = m.c(1, x), kk = m.c(0, x);
  for (double Ai : A) {
    f = m.mul(f, m.add(x, kk));
    term = m.div(term, w);
    Value t = m.div(m.mul(f, term), Ai);
    Value next = m.add(s, t);
    s = m.select(done, s, next);
    done = m.either(done, m.lt(m.abs(m.div(t, next)), machep));
    kk = m.add(kk, 1);
    f = m.mul(f, m.add(x, kk));
    term = m.div(term, w);
    kk = m.add(kk, 1);
  }
  return m.select(is_edge, edge, s);
}

// ---- modified Bessel functions of the first kind (Cephes i0e/i1e tables) ----------
const std::vector<double> kI0eA = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16, 1.71539128555513303061E-15,
    -1.16853328779934516808E-14, 7.67618549860493561688E-14, -4.85644678311192946090E-13, 2.95505266312963983461E-12,
    -1.72682629144155570723E-11, 9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,  -2.67079385394061173391E-7,  1.11738753912010371815E-6,
    -4.41673835845875056359E-6,  1.64484480707288970893E-5,  -5.75419501008210370398E-5,  1.88502885095841655729E-4,
    -5.76375574538582365885E-4,  1.63947561694133579842E-3,  -4.32430999505057594430E-3,  1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,  -9.49010970480476444210E-2,  1.71620901522208775349E-1,
    -3.04682672343198398683E-1,  6.76795274409476084995E-1};
const std::vector<double> kI0eB = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,  3.46122286769746109310E-17,
    -2.82762398051658348494E-16, -3.42548561967721913462E-16, 1.77256013305652638360E-15,  3.81168066935262242075E-15,
    -9.55484669882830764870E-15, -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11, -3.14991652796324136454E-11,
    1.18891471078464383424E-11,  4.94060238822496958910E-10,  3.39623202570838634515E-9,   2.26666899049817806459E-8,
    2.04891858946906374183E-7,   2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
// modified_bessel_i1's double tables (Cephes i1).
const std::vector<double> kI1A = {
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16, -1.10559694773538630805e-15,
    7.60068429473540693410e-15, -5.04218550472791168711e-14, 3.22379336594557470981e-13, -1.98397439776494371520e-12,
    1.17361862988909016308e-11, -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
    9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07, -8.56872026469545474066e-07,
    3.47025130813767847674e-06, -1.32731636560394358279e-05, 4.78156510755005422638e-05, -1.61760815825896745588e-04,
    5.12285956168575772895e-04, -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
    2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01, -1.76416518357834055153e-01,
    2.52587186443633654823e-01};
const std::vector<double> kI1B = {
    7.51729631084210481353e-18,  4.41434832307170791151e-18,  -4.65030536848935832153e-17, -3.20952592199342395980e-17,
    2.96262899764595013876e-16,  3.30820231092092828324e-16,  -1.88035477551078244854e-15, -3.81440307243700780478e-15,
    1.04202769841288027642e-14,  4.27244001671195135429e-14,  -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12,  1.41258074366137813316e-11,  3.25260358301548823856e-11,
    -1.89749581235054123450e-11, -5.58974346219658380687e-10, -3.83538038596423702205e-09, -2.63146884688951950684e-08,
    -2.51223623787020892529e-07, -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01};
// The float kernels' shorter i1e tables: the double tables' last terms.
std::vector<double> last_terms(const std::vector<double>& v, size_t n) { return {v.end() - n, v.end()}; }
const std::vector<double> kI1eA = last_terms(kI1A, 17);
const std::vector<double> kI1eB = last_terms(kI1B, 7);

// exp(-|x|) I_k(|x|) from the two Chebyshev expansions (|x| <= 8, > 8); for
// k = 1 without the sign.
Value scaled_bessel_i(const Arith& m, const Value& ax, bool first_order) {
  Value small = m.chbevl(m.sub(m.div(ax, 2.0), 2), first_order ? kI1eA : kI0eA);
  if (first_order) small = m.mul(small, ax);
  Value large = m.div(m.chbevl(m.sub(m.div(32.0, ax), 2), first_order ? kI1eB : kI0eB), m.sqrt(ax));
  return m.select(m.le(ax, 8), small, large);
}

// calc_i0 / calc_i1 scale back by exp(|x|) in each branch, as the CPU does.
// i0, i0e, i1, i1e by the template arguments.
template <bool first_order, bool scaled>
Value bessel_i(const Arith& m, const Value& x) {
  Value ax = m.abs(x);
  Value r = scaled_bessel_i(m, ax, first_order);
  if (!scaled) r = m.mul(m.exp(ax), r);
  if (first_order) r = m.select(m.lt(x, 0), m.neg(r), r);
  return r;
}

// ---- normal distribution ------------------------------------------------------------
// calc_ndtri: the inverse of the standard normal CDF (Cephes ndtri).
Value ndtri_value(const Arith& m, const Value& y0) {
  const std::vector<double> P0 = {-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
                                  1.39312609387279679503E1, -1.23916583867381258016E0};
  const std::vector<double> Q0 = {1.00000000000000000000E0,  1.95448858338141759834E0,  4.67627912898881538453E0,
                                  8.63602421390890590575E1,  -2.25462687854119370527E2, 2.00260212380060660359E2,
                                  -8.20372256168333339912E1, 1.59056225126211695515E1,  -1.18331621121330003142E0};
  const std::vector<double> P1 = {4.05544892305962419923E0,   3.15251094599893866154E1,   5.71628192246421288162E1,
                                  4.40805073893200834700E1,   1.46849561928858024014E1,   2.18663306850790267539E0,
                                  -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
  const std::vector<double> Q1 = {1.00000000000000000000E0,   1.57799883256466749731E1,   4.53907635128879210584E1,
                                  4.13172038254672030440E1,   1.50425385692907503408E1,   2.50464946208309415979E0,
                                  -1.42182922854787788574E-1, -3.80806407691578277194E-2, -9.33259480895457427372E-4};
  const std::vector<double> P2 = {3.23774891776946035970E0,  6.91522889068984211695E0,  3.93881025292474443415E0,
                                  1.33303460815807542389E0,  2.01485389549179081538E-1, 1.23716634817820021358E-2,
                                  3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
  const std::vector<double> Q2 = {1.00000000000000000000E0,  6.02427039364742014255E0,  3.67983563856160859403E0,
                                  1.37702099489081330271E0,  2.16236993594496635890E-1, 1.34204006088543189037E-2,
                                  3.28014464682127739104E-4, 2.89247864745380683936E-6, 6.79019408009981274425E-9};
  const double exp_m2 = 0.13533528323661269189;
  Value upper = m.gt(y0, 1 - exp_m2);
  Value y = m.select(upper, m.sub(1, y0), y0);
  // Central region: |y - 0.5| <= 3/8.
  Value yc = m.sub(y, 0.5);
  Value yc2 = m.mul(yc, yc);
  Value central =
      m.mul(m.add(yc, m.mul(yc, m.div(m.mul(yc2, m.polevl(yc2, P0)), m.polevl(yc2, Q0)))), 2.50662827463100050242E0);
  // Tails: z = sqrt(-2 log y).
  Value x = m.sqrt(m.mul(m.log(y), -2.0));
  Value x0 = m.sub(x, m.div(m.log(x), x));
  Value z = m.div(1.0, x);
  Value x1 = m.select(m.lt(x, 8), m.div(m.mul(z, m.polevl(z, P1)), m.polevl(z, Q1)),
                      m.div(m.mul(z, m.polevl(z, P2)), m.polevl(z, Q2)));
  Value tail = m.sub(x0, x1);
  tail = m.select(upper, tail, m.neg(tail));
  Value r = m.select(m.gt(y, exp_m2), central, tail);
  r = m.select(m.either(m.lt(y0, 0), m.gt(y0, 1)), NAN, r);
  r = m.select(m.eq(y0, 0), -INFINITY, r);
  return m.select(m.eq(y0, 1), INFINITY, r);
}

// x * f(y), 0 where x == 0, NaN where y is NaN (xlogy, xlog1py).
std::vector<Value> x_times_log(LowerContext& ctx, const char* log_op) {
  return float_op(ctx, {0, 1}, [log_op](const Arith& m, const std::vector<Value>& v) {
    const Value &x = v[0], &y = v[1];
    Value r = m.select(m.eq(x, 0), 0.0, m.mul(x, m.b.unary(log_op, y)));
    return m.select(m.isnan(y), NAN, r);
  });
}

}  // namespace

// ---- gamma family --------------------------------------------------------------------
std::vector<Value> lgamma(LowerContext& ctx) {
  return float_unary(ctx, [](const Arith& m, const Value& x) { return m.b.chlo("lgamma", {x}, x.type); });
}

std::vector<Value> digamma(LowerContext& ctx) { return float_unary(ctx, digamma_value); }

// polygamma(n, x): digamma, trigamma, else (-1)^(n+1) n! zeta(n + 1, x).
std::vector<Value> polygamma(LowerContext& ctx) {  // (n, self)
  const int64_t n = ctx.int_arg(0);
  return float_op(ctx, {1}, [n](const Arith& m, const std::vector<Value>& v) {
    const Value& x = v[0];
    if (n == 0) return digamma_value(m, x);
    if (n == 1) return trigamma_value(m, x);
    const double factorial = std::exp(std::lgamma(static_cast<double>(n) + 1));
    return m.mul(zeta_value(m, m.c(static_cast<double>(n + 1), x), x), (n % 2 ? 1.0 : -1.0) * factorial);
  });
}

std::vector<Value> special_zeta(LowerContext& ctx) {  // (self = x, other = q)
  return float_op(ctx, {0, 1}, [](const Arith& m, const std::vector<Value>& v) { return zeta_value(m, v[0], v[1]); });
}

// ---- Bessel ----------------------------------------------------------------------------
std::vector<Value> i0(LowerContext& ctx) { return float_unary(ctx, bessel_i<false, false>); }
std::vector<Value> special_i0e(LowerContext& ctx) { return float_unary(ctx, bessel_i<false, true>); }
std::vector<Value> special_i1(LowerContext& ctx) { return float_unary(ctx, bessel_i<true, false>); }
std::vector<Value> special_i1e(LowerContext& ctx) { return float_unary(ctx, bessel_i<true, true>); }

// ---- normal distribution ---------------------------------------------------------------
std::vector<Value> special_ndtri(LowerContext& ctx) { return float_unary(ctx, ndtri_value); }

// ---- x log y -----------------------------------------------------------------------------
std::vector<Value> xlogy(LowerContext& ctx) { return x_times_log(ctx, "log"); }
std::vector<Value> special_xlog1py(LowerContext& ctx) { return x_times_log(ctx, "log_plus_one"); }

// -x log x for x > 0, 0 at 0, -inf below, NaN stays.
std::vector<Value> special_entr(LowerContext& ctx) {
  return float_unary(ctx, [](const Arith& m, const Value& x) {
    Value r = m.select(m.gt(x, 0), m.neg(m.mul(x, m.log(x))), m.select(m.eq(x, 0), 0.0, m.c(-INFINITY, x)));
    return m.select(m.isnan(x), x, r);
  });
}

// ==== Bessel functions, Airy Ai, orthogonal polynomials, erfcx, log_ndtr ====
namespace {

using LoopFn = std::function<std::vector<Value>(const Arith&, const std::vector<Value>&)>;
using MaskFn = std::function<Value(const Arith&, const std::vector<Value>&)>;

// A per-element loop: while any element's `active` holds, `step` computes
// the next values, which only active elements take (the CPU kernel's loop,
// run for every element at once).
std::vector<Value> masked_loop(Builder& b, const std::vector<Value>& init, const MaskFn& active, const LoopFn& step) {
  return b.while_loop(
      init,
      [&](Builder& r, const std::vector<Value>& v) { return std::vector<Value>{any_true(r, active(Arith{r}, v))}; },
      [&](Builder& r, const std::vector<Value>& v) {
        Arith k{r};
        Value on = active(k, v);
        std::vector<Value> next = step(k, v);
        for (size_t i = 0; i < next.size(); ++i) next[i] = k.select(on, next[i], v[i]);
        return next;
      });
}

// Cephes-style polynomial in y with coefficients highest first, starting
// from 0 (the CPU loops `r = r * y + C[i]` from r = 0).
Value horner(const Arith& m, const Value& y, const std::vector<double>& c) { return m.polevl(y, c); }

// ---- Bessel functions of the first and second kind (bessel_j0_forward ...) ---------
const std::vector<double> kJ0PP = {7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
                                   5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
                                   9.99999999999999997821e-01};
const std::vector<double> kJ0PQ = {9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
                                   5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
                                   1.00000000000000000218e+00};
const std::vector<double> kJ0QP = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01, -9.32060152123768231369e+01,
    -1.77681167980488050595e+02, -1.47077505154951170175e+02, -5.14105326766599330220e+01, -6.05014350600728481186e+00};
const std::vector<double> kJ0QQ = {6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
                                   7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
                                   2.42005740240291393179e+02};
const std::vector<double> kJ1PP = {7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
                                   5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
                                   1.00000000000000000254e+00};
const std::vector<double> kJ1PQ = {5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
                                   5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
                                   9.99999999999999997461e-01};
const std::vector<double> kJ1QP = {5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
                                   3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
                                   2.11688757100572135698e+02, 2.52070205858023719784e+01};
const std::vector<double> kJ1QQ = {7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
                                   9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
                                   3.36093607810698293419e+02};
const double kTwoOverPi = 0.636619772367581343075535053490057448;
const double kSqrtTwoOverPi = 0.797884560802865355879892119868763737;

// The x > 5 asymptotic form shared by j0/y0 (order 0) and j1/y1 (order 1):
// (P cos(x - phase) -/+ 5/x Q sin(x - phase)) sqrt(2/pi) / sqrt(x).
Value bessel_asymptotic(const Arith& m, const Value& x, bool order1, bool second_kind) {
  // Order 0 evaluates in 25 / x^2, order 1 in (5 / x) * (5 / x), as the CPU code.
  Value w = order1 ? m.mul(m.div(5.0, x), m.div(5.0, x)) : m.div(25.0, m.mul(x, x));
  Value pp = horner(m, w, order1 ? kJ1PP : kJ0PP), pq = horner(m, w, order1 ? kJ1PQ : kJ0PQ);
  Value qp = horner(m, w, order1 ? kJ1QP : kJ0QP), qq = horner(m, w, order1 ? kJ1QQ : kJ0QQ);
  Value phase = m.sub(x, order1 ? 2.356194490192344928846982537459627163 : 0.785398163397448309615660845819875721);
  Value p = m.div(pp, pq), q = m.mul(m.div(5.0, x), m.div(qp, qq));
  Value r = second_kind ? m.add(m.mul(p, m.sin(phase)), m.mul(q, m.cos(phase)))
                        : m.sub(m.mul(p, m.cos(phase)), m.mul(q, m.sin(phase)));
  return m.div(m.mul(r, kSqrtTwoOverPi), m.sqrt(x));
}

Value bessel_j0_value(const Arith& m, const Value& x0) {
  const std::vector<double> RP = {-4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
                                  9.70862251047306323952e+15};
  const std::vector<double> RQ = {4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
                                  1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
                                  3.18121955943204943306e+16, 1.71086294081043136091e+18};
  Value x = m.abs(x0);
  Value x2 = m.mul(x, x);
  Value small = m.div(
      m.mul(m.mul(m.sub(x2, 5.78318596294678452118e+00), m.sub(x2, 3.04712623436620863991e+01)), horner(m, x2, RP)),
      horner(m, x2, RQ));
  small = m.select(m.lt(x, 0.00001), m.sub(1, m.div(x2, 4.0)), small);
  return m.select(m.le(x, 5), small, bessel_asymptotic(m, x, false, false));
}

Value bessel_j1_value(const Arith& m, const Value& x0) {
  const std::vector<double> RP = {-8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
                                  3.68295732863852883286e+15};
  const std::vector<double> RQ = {6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
                                  2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
                                  8.95222336184627338078e+16, 5.32278620332680085395e+18};
  Value x = m.abs(x0);  // j1 is odd
  Value x2 = m.mul(x, x);
  Value small =
      m.mul(m.mul(m.mul(m.div(horner(m, x2, RP), horner(m, x2, RQ)), x), m.sub(x2, 1.46819706421238932572e+01)),
            m.sub(x2, 4.92184563216946036703e+01));
  Value r = m.select(m.le(x, 5), small, bessel_asymptotic(m, x, true, false));
  return m.select(m.lt(x0, 0), m.neg(r), r);
}

Value bessel_y0_value(const Arith& m, const Value& x) {
  const std::vector<double> YP = {1.55924367855235737965e+04,  -1.46639295903971606143e+07, 5.43526477051876500413e+09,
                                  -9.82136065717911466409e+11, 8.75906394395366999549e+13,  -3.46628303384729719441e+15,
                                  4.42733268572569800351e+16,  -1.84950800436986690637e+16};
  const std::vector<double> YQ = {1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
                                  8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
                                  2.50596256172653059228e+17};
  Value x2 = m.mul(x, x);
  Value small =
      m.add(m.div(horner(m, x2, YP), horner(m, x2, YQ)), m.mul(m.mul(m.log(x), kTwoOverPi), bessel_j0_value(m, x)));
  small = m.select(m.lt(x, 0), NAN, small);
  small = m.select(m.eq(x, 0), -INFINITY, small);
  return m.select(m.le(x, 5), small, bessel_asymptotic(m, x, false, true));
}

Value bessel_y1_value(const Arith& m, const Value& x) {
  const std::vector<double> YP = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                                  1.14509511541823727583e+14, -8.12770255501325109621e+15,
                                  2.02439475713594898196e+17, -7.78877196265950026825e+17};
  const std::vector<double> YQ = {5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
                                  1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
                                  6.87141087355300489866e+16, 3.97270608116560655612e+18};
  Value x2 = m.mul(x, x);
  Value small = m.add(m.mul(x, m.div(horner(m, x2, YP), horner(m, x2, YQ))),
                      m.mul(m.sub(m.mul(bessel_j1_value(m, x), m.log(x)), m.div(1.0, x)), kTwoOverPi));
  small = m.select(m.le(x, 0), NAN, small);
  small = m.select(m.eq(x, 0), -INFINITY, small);
  return m.select(m.le(x, 5), small, bessel_asymptotic(m, x, true, true));
}

// ---- modified Bessel functions (modified_bessel_*_forward, double tables) ---------
const std::vector<double> kK0A = {1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
                                  1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
                                  1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
                                  -5.35327393233902768720e-01};
const std::vector<double> kK0B = {
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17, -1.67823109680541210385e-16,
    5.51205597852431940784e-16, -1.84859337734377901440e-15, 6.34007647740507060557e-15, -2.22751332699166985548e-14,
    8.03289077536357521100e-14, -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10, -1.69753450938905987466e-09,
    8.57403401741422608519e-09, -4.66048989768794782956e-08, 2.76681363944501510342e-07, -1.83175552271911948767e-06,
    1.39498137188764993662e-05, -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
const std::vector<double> kK1A = {-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
                                  -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
                                  -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
                                  -3.53155960776544875667e-01, 1.52530022733894777053e+00};
const std::vector<double> kK1B = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17, 1.83809354436663880070e-16,
    -6.05704724837331885336e-16, 2.03870316562433424052e-15, -7.01983709041831346144e-15, 2.47715442448130437068e-14,
    -8.97670518232499435011e-14, 3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10, 2.01504975519703286596e-09,
    -1.03457624656780970260e-08, 5.74108412545004946722e-08, -3.50196060308781257119e-07, 2.40648494783721712015e-06,
    -1.93619797416608296024e-05, 1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

Value modified_bessel_i0_value(const Arith& m, const Value& x) {
  Value ax = m.abs(x);
  Value small = m.mul(m.exp(ax), m.chbevl(m.sub(m.div(ax, 2.0), 2), kI0eA));
  Value large = m.div(m.mul(m.exp(ax), m.chbevl(m.sub(m.div(32.0, ax), 2), kI0eB)), m.sqrt(ax));
  return m.select(m.le(ax, 8), small, large);
}

Value modified_bessel_i1_value(const Arith& m, const Value& x) {
  Value ax = m.abs(x);
  Value small = m.mul(m.mul(m.chbevl(m.sub(m.div(ax, 2.0), 2), kI1A), ax), m.exp(ax));
  Value large = m.div(m.mul(m.exp(ax), m.chbevl(m.sub(m.div(32.0, ax), 2), kI1B)), m.sqrt(ax));
  Value r = m.select(m.le(ax, 8), small, large);
  return m.select(m.lt(x, 0), m.neg(r), r);
}

// K0/K1 (scaled: times exp(x)); 0 -> inf, negative -> NaN. The order and the
// scaling are template arguments, one instance per lowering.
template <bool order1, bool scaled>
Value modified_bessel_k(const Arith& m, const Value& x) {
  Value cheb_small = m.chbevl(m.sub(m.mul(x, x), 2), order1 ? kK1A : kK0A);
  Value small = order1 ? m.add(m.mul(m.log(m.mul(x, 0.5)), modified_bessel_i1_value(m, x)), m.div(cheb_small, x))
                       : m.sub(cheb_small, m.mul(m.log(m.mul(x, 0.5)), modified_bessel_i0_value(m, x)));
  Value large = m.div(m.chbevl(m.sub(m.div(8.0, x), 2), order1 ? kK1B : kK0B), m.sqrt(x));
  if (scaled) {
    small = m.mul(small, m.exp(x));
  } else {
    large = m.mul(m.exp(m.neg(x)), large);
  }
  Value r = m.select(m.le(x, 2), small, large);
  r = m.select(m.lt(x, 0), NAN, r);
  return m.select(m.eq(x, 0), INFINITY, r);
}

Value spherical_bessel_j0_value(const Arith& m, const Value& x) {
  Value x2 = m.mul(x, x);
  // 1 + x^2 (-1/6 + x^2 (1/120 + ...)), the CPU's nesting.
  const std::vector<double> c = {-1.0 / 6.0,     1.0 / 120.0,       -1.0 / 5040.0,
                                 1.0 / 362880.0, -1.0 / 39916800.0, 1.0 / 6227020800.0};
  Value series = m.mul(x2, c.back());
  for (int i = static_cast<int>(c.size()) - 2; i >= 0; --i) series = m.mul(x2, m.add(series, c[i]));
  Value r = m.select(m.lt(m.abs(x), 0.5), m.add(series, 1), m.div(m.sin(x), x));
  return m.select(m.isinf(x), 0.0, r);
}

// airy_ai_forward: asymptotic forms for x < -2.09 and x >= 2.09 (exact
// beyond 8.3203353), the power series (a loop until its term is below
// float epsilon) between.
Value airy_ai_value(const Arith& m, const Value& x) {
  const std::vector<double> AN = {3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
                                  1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
                                  1.40264691163389668864e+01, 9.99999999999999995305e-01};
  const std::vector<double> AD = {5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
                                  1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
                                  1.40959135607834029598e+01, 1.00000000000000000470e+00};
  const std::vector<double> AFN = {
      -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
      -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
      -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
  const std::vector<double> AFD = {1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
                                   9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
                                   4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
  const std::vector<double> AGN = {1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
                                   9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
                                   5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
                                   8.11789239554389293311e-08, 3.41551784765923618484e-10};
  const std::vector<double> AGD = {9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
                                   5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
                                   4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
                                   4.91834570062930015649e-09};
  auto from_zero = [&](const Value& y, const std::vector<double>& c) {  // r = r * y + c[i], r = 0 first
    return horner(m, y, c);
  };
  // x < -2.09: oscillating asymptotic form.
  Value neg_root = m.sqrt(m.neg(x));
  Value zeta_neg = m.div(m.mul(m.mul(x, -2.0), neg_root), 3.0);
  Value z = m.div(1.0, zeta_neg);
  Value z2 = m.mul(z, z);
  Value afn = from_zero(z2, AFN), afd = from_zero(z2, AFD), agn = from_zero(z2, AGN), agd = from_zero(z2, AGD);
  Value t = m.add(zeta_neg, 0.25 * M_PI);
  Value oscillating =
      m.mul(m.div(5.64189583547756286948e-01, m.sqrt(neg_root)),
            m.sub(m.mul(m.sin(t), m.add(m.div(m.mul(z2, afn), afd), 1)), m.mul(m.cos(t), m.div(m.mul(z, agn), agd))));
  // x >= 2.09: decaying asymptotic form.
  Value zeta = m.div(m.mul(m.mul(x, 2.0), m.sqrt(x)), 3.0);
  Value inv = m.div(1.0, zeta);
  Value decaying = m.div(m.mul(m.div(from_zero(inv, AN), from_zero(inv, AD)), 5.64189583547756286948e-01),
                         m.mul(m.mul(m.sqrt(m.sqrt(x)), 2.0), m.exp(zeta)));
  // The power series for the rest.
  Value uses_series = m.both(m.ge(x, -2.09), m.negate(m.gt(x, 8.3203353)));
  uses_series = m.both(uses_series, m.negate(m.isinf(x)));
  const double eps = 1.1920928955078125e-07;
  Value one = m.c(1, x);
  Value z3 = m.mul(m.mul(x, x), x);
  auto series = masked_loop(
      m.b, {one, x, one, one, x, m.select(uses_series, 1.0, m.c(0, x)), z3},  // m, n, k, f, g, t, z
      [&](const Arith& a, const std::vector<Value>& v) { return a.gt(v[5], eps); },
      [&](const Arith& a, const std::vector<Value>& v) {
        Value mm = v[0], n = v[1], k = v[2], f = v[3], g = v[4], zz = v[6];
        mm = a.mul(mm, zz);
        k = a.add(k, 1);
        mm = a.div(mm, k);
        n = a.mul(n, zz);
        k = a.add(k, 1);
        n = a.div(n, k);
        mm = a.div(mm, k);
        f = a.add(f, mm);
        k = a.add(k, 1);
        n = a.div(n, k);
        g = a.add(g, n);
        return std::vector<Value>{mm, n, k, f, g, a.abs(a.div(mm, f)), zz};
      });
  Value from_series = m.sub(m.mul(series[3], 0.355028053887817239260), m.mul(series[4], 0.258819403792806798405));
  Value r = m.select(m.ge(x, 2.09), decaying, from_series);
  r = m.select(m.lt(x, -2.09), oscillating, r);
  r = m.select(m.gt(x, 103.892), 0.0, r);
  return m.select(m.isinf(x), NAN, r);
}

// ---- orthogonal polynomials ------------------------------------------------------------
// The three-term recurrence the CPU kernels run: r = step(k, p, q) for k =
// first, first + stride, ... while k <= last (or < last), an element
// stopping early once its q is NaN when `nan_stops`; p = 1 and q = q0 first.
using StepFn = std::function<Value(const Arith&, const Value& k, const Value& p, const Value& q, const Value& x)>;
Value recurrence(const Arith& m, const Value& x, const Value& q0, const Value& last, double first, double stride,
                 bool inclusive, bool nan_stops, const StepFn& step) {
  // x rides along as a loop value: the loop body reads nothing from outside.
  auto loop = masked_loop(
      m.b, {m.c(first, q0), m.c(1, q0), q0, last, x},
      [&](const Arith& a, const std::vector<Value>& v) {
        Value on = inclusive ? a.le(v[0], v[3]) : a.lt(v[0], v[3]);
        return nan_stops ? a.both(on, a.negate(a.isnan(v[2]))) : on;
      },
      [&](const Arith& a, const std::vector<Value>& v) {
        Value r = step(a, v[0], v[1], v[2], v[4]);
        return std::vector<Value>{a.add(v[0], stride), v[2], r, v[3], v[4]};
      });
  return loop[2];
}

// n as the CPU's static_cast<int64_t>(n): truncated.
Value integral_n(const Arith& m, const Value& n) { return m.trunc(n); }
Value is_even(const Arith& m, const Value& n) { return m.eq(m.b.binary("remainder", n, m.c(2, n)), 0); }
Value plus_minus(const Arith& m, const Value& even, const Value& v) { return m.select(even, v, m.neg(v)); }

enum class Chebyshev { T, U, V, W };

// chebyshev_polynomial_{t,u,v,w}_forward and the shifted ones (y = 2x - 1).
Value chebyshev_value(const Arith& m, const Value& x0, const Value& n_in, Chebyshev kind, bool shifted) {
  Value n = integral_n(m, n_in);
  Value y = shifted ? m.sub(m.add(x0, x0), 1) : x0;
  Value even = is_even(m, n);
  Value one = m.c(1, y);
  Value n1 = m.add(n, 1), n2 = m.add(m.add(n, n), 1);
  Value q0 = kind == Chebyshev::T   ? y
             : kind == Chebyshev::U ? m.add(y, y)
             : kind == Chebyshev::V ? m.sub(m.add(y, y), 1)
                                    : m.add(m.add(y, y), 1);
  // Closed forms for |y| < 1 past a degree threshold.
  const int threshold = shifted ? (kind == Chebyshev::W ? 4 : 6) : (kind == Chebyshev::T ? 6 : 8);
  Value theta = m.b.chlo("acos", {y}, y.type);
  Value trig;
  switch (kind) {
    case Chebyshev::T:
      trig = m.cos(m.mul(n, theta));
      break;
    case Chebyshev::U: {
      Value s = m.sin(theta);
      trig = m.select(m.ne(s, 0), m.div(m.sin(m.mul(n1, theta)), s), m.div(m.mul(n1, m.cos(m.mul(n1, theta))), y));
      break;
    }
    case Chebyshev::V:
      trig = m.select(m.ne(m.sin(m.div(theta, 2.0)), 1),
                      m.div(m.cos(m.mul(m.add(n, 0.5), theta)), m.cos(m.div(theta, 2.0))), plus_minus(m, even, n2));
      break;
    case Chebyshev::W: {
      Value fallback = shifted ? plus_minus(m, even, one) : m.select(m.gt(y, 0), n2, plus_minus(m, even, one));
      trig = m.select(m.ne(m.cos(m.div(theta, 2.0)), 1),
                      m.div(m.sin(m.mul(m.add(n, 0.5), theta)), m.sin(m.div(theta, 2.0))), fallback);
      break;
    }
  }
  Value use_trig = m.both(m.gt(n, threshold), m.lt(m.abs(y), 1));
  // Values at the ends: x = +-1 (unshifted), x = 1 or 0 (shifted, y = +-1). At y = 1: T 1, U n+1, V 1, W 2n+1;
  // at y = -1 the magnitudes are T 1, U n+1, V 2n+1, W 1, with the sign (-1)^n.
  const Value at_plus = kind == Chebyshev::U ? n1 : kind == Chebyshev::W ? n2 : one;
  const Value at_minus = plus_minus(m, even, kind == Chebyshev::U ? n1 : kind == Chebyshev::V ? n2 : one);
  Value is_plus = m.eq(x0, 1);
  Value is_minus = shifted ? m.eq(x0, 0) : m.eq(x0, -1);
  Value special = m.either(m.either(is_plus, is_minus), m.either(use_trig, m.le(n, 0)));
  Value r = recurrence(m, y, q0, m.select(special, 0.0, n), 2, 1, true, true,
                       [](const Arith& a, const Value&, const Value& p, const Value& q, const Value& y) {
                         return a.sub(a.mul(a.add(y, y), q), p);
                       });
  r = m.select(m.eq(n, 0), one, r);
  r = m.select(use_trig, trig, r);
  r = m.select(is_minus, at_minus, r);
  r = m.select(is_plus, at_plus, r);
  return m.select(m.lt(n, 0), 0.0, r);
}

Value hermite_h_value(const Arith& m, const Value& x, const Value& n_in, bool probabilists) {
  // hermite_polynomial_h: an infinite or NaN degree counts as -1.
  Value n = m.select(m.either(m.isinf(n_in), m.isnan(n_in)), -1.0, integral_n(m, n_in));
  Value q0 = probabilists ? x : m.add(x, x);
  Value too_large = m.gt(n, 128);
  Value special = m.either(too_large, m.le(n, 1));
  Value r = probabilists ? recurrence(m, x, q0, m.select(special, 0.0, n), 1, 1, false, false,
                                      [](const Arith& a, const Value& k, const Value& p, const Value& q,
                                         const Value& x) { return a.sub(a.mul(x, q), a.mul(k, p)); })
                         : recurrence(m, x, q0, m.select(special, 0.0, m.add(n, n)), 2, 2, false, false,
                                      [](const Arith& a, const Value& k, const Value& p, const Value& q,
                                         const Value& x) { return a.sub(a.mul(a.add(x, x), q), a.mul(k, p)); });
  r = m.select(too_large, NAN, r);
  r = m.select(m.eq(n, 1), q0, r);
  r = m.select(m.eq(n, 0), 1.0, r);
  return m.select(m.lt(n, 0), 0.0, r);
}

Value laguerre_value(const Arith& m, const Value& x, const Value& n_in) {
  Value n = integral_n(m, n_in);
  Value q0 = m.sub(1, x);
  Value special = m.either(m.eq(m.abs(x), 0), m.le(n, 1));
  Value r = recurrence(m, x, q0, m.select(special, 0.0, n), 1, 1, false, true,
                       [](const Arith& a, const Value& k, const Value& p, const Value& q, const Value& x) {
                         return a.div(a.sub(a.mul(a.add(a.add(k, k), a.sub(1, x)), q), a.mul(k, p)), a.add(k, 1));
                       });
  r = m.select(m.eq(n, 1), q0, r);
  r = m.select(m.either(m.eq(n, 0), m.eq(m.abs(x), 0)), 1.0, r);
  return m.select(m.lt(n, 0), 0.0, r);
}

Value legendre_value(const Arith& m, const Value& x, const Value& n_in) {
  Value n = integral_n(m, n_in);
  Value at_one = m.select(m.either(m.gt(x, 0), is_even(m, n)), 1.0, m.c(-1, x));
  Value is_one = m.eq(m.abs(x), 1);
  Value special = m.either(is_one, m.le(n, 1));
  Value r = recurrence(m, x, x, m.select(special, 0.0, n), 1, 1, false, true,
                       [](const Arith& a, const Value& k, const Value& p, const Value& q, const Value& x) {
                         return a.div(a.sub(a.mul(a.mul(a.add(a.add(k, k), 1), x), q), a.mul(k, p)), a.add(k, 1));
                       });
  r = m.select(m.eq(n, 0), 1.0, r);
  r = m.select(is_one, at_one, r);
  return m.select(m.lt(n, 0), 0.0, r);
}

// ---- erfcx and log_ndtr -----------------------------------------------------------------
// exp(x^2) with x^2 split into an exact head and a small tail, so that the
// rounding of x * x does not scale the result.
Value exp_square(const Arith& m, const Value& x) {
  Value head = m.trunc(m.mul(x, 4096.0));
  head = m.div(head, 4096.0);  // 12 significant bits at most for |x| < 8: head^2 exact
  Value tail = m.sub(x, head);
  Value rest = m.add(m.mul(m.mul(head, tail), 2.0), m.mul(tail, tail));
  return m.mul(m.exp(m.mul(head, head)), m.exp(rest));
}

// erfcx(x) = exp(x^2) erfc(x) for x >= 0: the product on [0, 2), the
// continued fraction 1/sqrt(pi) / (x + (1/2) / (x + 1 / (x + ...))) above;
// negative x as the CPU: 2 exp(x^2) - erfcx(-x), inf below -26.7.
Value erfcx_nonnegative(const Arith& m, const Value& x) {
  Value product = m.mul(exp_square(m, m.select(m.lt(x, 2), x, m.c(0, x))), m.b.chlo("erfc", {x}, x.type));
  Value t = x;
  for (int k = 20; k >= 1; --k) t = m.add(x, m.div(m.c(k / 2.0, x), t));
  Value fraction = m.div(0.56418958354775628694807945156, t);
  return m.select(m.lt(x, 2), product, fraction);
}

Value erfcx_value(const Arith& m, const Value& x) {
  Value ax = m.abs(x);
  Value pos = erfcx_nonnegative(m, ax);
  Value two_exp = m.mul(m.exp(m.mul(x, x)), 2.0);
  Value neg = m.select(m.lt(x, -6.1), two_exp, m.sub(two_exp, pos));
  neg = m.select(m.lt(x, -26.7), INFINITY, neg);
  Value r = m.select(m.ge(x, 0), pos, neg);
  return m.select(m.isnan(x), x, r);
}

Value log_ndtr_value(const Arith& m, const Value& x) {
  Value t = m.mul(x, M_SQRT1_2);
  Value lower = m.sub(m.log(m.div(erfcx_value(m, m.neg(t)), 2.0)), m.mul(t, t));
  Value upper = m.log1p(m.neg(m.div(m.b.chlo("erfc", {t}, t.type), 2.0)));
  return m.select(m.lt(x, -1), lower, upper);
}

// ---- regularized incomplete gamma -----------------------------------------------------
// P(a, x) by its power series where x < a + 1, else Q(a, x) by the modified
// Lentz continued fraction (both loop per element until the term is below
// float32 machine epsilon, at most 2000 steps, as the CPU's MAXITER); the
// boundary values are calc_igamma's. Returns {P, Q}.
std::pair<Value, Value> incomplete_gamma(const Arith& m, const Value& a, const Value& x) {
  const double machep = 5.9604644775390625E-8, tiny = 1e-30;
  Value log_prefactor = m.sub(m.sub(m.mul(a, m.log(x)), x), m.b.chlo("lgamma", {a}, a.type));
  Value prefactor = m.exp(log_prefactor);
  Value use_series = m.lt(x, m.add(a, 1));
  Value zero = m.c(0, a);
  // Series: sum_{k>=0} x^k / (a (a+1) ... (a+k)).
  Value first = m.div(1.0, a);
  Value regular = m.both(m.both(m.gt(a, 0), m.gt(x, 0)), m.negate(m.either(m.isinf(a), m.isinf(x))));
  Value run_series = m.both(use_series, regular);
  auto series = masked_loop(
      m.b, {zero, a, m.select(run_series, first, zero), first, x},  // steps, ap, term, sum, x
      [&](const Arith& k, const std::vector<Value>& v) {
        return k.both(k.lt(v[0], 2000), k.ge(k.abs(v[2]), k.mul(k.abs(v[3]), machep)));
      },
      [&](const Arith& k, const std::vector<Value>& v) {
        Value ap = k.add(v[1], 1);
        Value term = k.mul(v[2], k.div(v[4], ap));
        return std::vector<Value>{k.add(v[0], 1), ap, term, k.add(v[3], term), v[4]};
      });
  Value p_series = m.mul(series[3], prefactor);
  // Continued fraction for Q.
  Value b0 = m.sub(m.add(x, 1), a);
  Value d0 = m.div(1.0, m.select(m.lt(m.abs(b0), tiny), tiny, b0));
  auto fraction = masked_loop(
      m.b,
      {m.c(1, a), b0, m.c(1.0 / tiny, a), d0, d0, a,
       m.select(m.both(m.negate(use_series), regular), 1.0, zero)},  // i, b, c, d, h, a, go
      [&](const Arith& k, const std::vector<Value>& v) { return k.both(k.lt(v[0], 2000), k.gt(v[6], 0)); },
      [&](const Arith& k, const std::vector<Value>& v) {
        const Value &i = v[0], &aa = v[5];
        Value an = k.neg(k.mul(i, k.sub(i, aa)));
        Value b = k.add(v[1], 2);
        Value d = k.add(k.mul(an, v[3]), b);
        d = k.div(1.0, k.select(k.lt(k.abs(d), tiny), tiny, d));
        Value c = k.add(b, k.div(an, v[2]));
        c = k.select(k.lt(k.abs(c), tiny), tiny, c);
        Value delta = k.mul(d, c);
        Value go = k.select(k.lt(k.abs(k.sub(delta, 1)), machep), 0.0, k.c(1, aa));
        return std::vector<Value>{k.add(i, 1), b, c, d, k.mul(v[4], delta), aa, go};
      });
  Value q_fraction = m.mul(fraction[4], prefactor);
  Value p = m.select(use_series, p_series, m.sub(1, q_fraction));
  Value q = m.select(use_series, m.sub(1, p_series), q_fraction);
  // Boundary values (calc_igamma / calc_igammac).
  auto edges = [&](Value r, bool lower) {
    r = m.select(m.isinf(x), lower ? 1.0 : 0.0, r);
    r = m.select(m.isinf(a), m.select(m.isinf(x), NAN, m.c(lower ? 0.0 : 1.0, a)), r);
    r = m.select(m.eq(x, 0), lower ? 0.0 : 1.0, r);
    r = m.select(m.eq(a, 0), m.select(m.gt(x, 0), lower ? 1.0 : 0.0, m.c(NAN, a)), r);
    return m.select(m.either(m.lt(x, 0), m.lt(a, 0)), NAN, r);
  };
  return {edges(p, true), edges(q, false)};
}

std::vector<Value> incomplete_gamma_op(LowerContext& ctx, bool upper, const char* name) {
  const ElementType t = result_type(ctx, {0, 1});
  if (!hlo::is_float(t)) not_implemented_for(name, t);
  return float_op(ctx, {0, 1}, [upper](const Arith& m, const std::vector<Value>& v) {
    auto pq = incomplete_gamma(m, v[0], v[1]);
    return upper ? pq.second : pq.first;
  });
}

std::vector<Value> polynomial(LowerContext& ctx,
                              const std::function<Value(const Arith&, const Value&, const Value&)>& fn) {
  return float_op(ctx, {0, 1}, [&](const Arith& m, const std::vector<Value>& v) { return fn(m, v[0], v[1]); });
}

}  // namespace

std::vector<Value> special_bessel_j0(LowerContext& ctx) { return float_unary(ctx, bessel_j0_value); }
std::vector<Value> special_bessel_j1(LowerContext& ctx) { return float_unary(ctx, bessel_j1_value); }
std::vector<Value> special_bessel_y0(LowerContext& ctx) { return float_unary(ctx, bessel_y0_value); }
std::vector<Value> special_bessel_y1(LowerContext& ctx) { return float_unary(ctx, bessel_y1_value); }
std::vector<Value> special_modified_bessel_i0(LowerContext& ctx) { return float_unary(ctx, modified_bessel_i0_value); }
std::vector<Value> special_modified_bessel_i1(LowerContext& ctx) { return float_unary(ctx, modified_bessel_i1_value); }
std::vector<Value> special_modified_bessel_k0(LowerContext& ctx) {
  return float_unary(ctx, modified_bessel_k<false, false>);
}
std::vector<Value> special_modified_bessel_k1(LowerContext& ctx) {
  return float_unary(ctx, modified_bessel_k<true, false>);
}
std::vector<Value> special_scaled_modified_bessel_k0(LowerContext& ctx) {
  return float_unary(ctx, modified_bessel_k<false, true>);
}
std::vector<Value> special_scaled_modified_bessel_k1(LowerContext& ctx) {
  return float_unary(ctx, modified_bessel_k<true, true>);
}
std::vector<Value> special_spherical_bessel_j0(LowerContext& ctx) {
  return float_unary(ctx, spherical_bessel_j0_value);
}
std::vector<Value> special_airy_ai(LowerContext& ctx) { return float_unary(ctx, airy_ai_value); }
std::vector<Value> igamma(LowerContext& ctx) { return incomplete_gamma_op(ctx, false, "igamma_cpu"); }
std::vector<Value> igammac(LowerContext& ctx) { return incomplete_gamma_op(ctx, true, "igammac_cpu"); }
std::vector<Value> special_erfcx(LowerContext& ctx) { return float_unary(ctx, erfcx_value); }
std::vector<Value> special_log_ndtr(LowerContext& ctx) { return float_unary(ctx, log_ndtr_value); }

#define TORCH_TPU_CHEBYSHEV(fn, kind, shifted)                                  \
  std::vector<Value> fn(LowerContext& ctx) {                                    \
    return polynomial(ctx, [](const Arith& m, const Value& x, const Value& n) { \
      return chebyshev_value(m, x, n, Chebyshev::kind, shifted);                \
    });                                                                         \
  }
TORCH_TPU_CHEBYSHEV(special_chebyshev_polynomial_t, T, false)
TORCH_TPU_CHEBYSHEV(special_chebyshev_polynomial_u, U, false)
TORCH_TPU_CHEBYSHEV(special_chebyshev_polynomial_v, V, false)
TORCH_TPU_CHEBYSHEV(special_chebyshev_polynomial_w, W, false)
TORCH_TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_t, T, true)
TORCH_TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_u, U, true)
TORCH_TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_v, V, true)
TORCH_TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_w, W, true)
#undef TORCH_TPU_CHEBYSHEV

std::vector<Value> special_hermite_polynomial_h(LowerContext& ctx) {
  return polynomial(ctx,
                    [](const Arith& m, const Value& x, const Value& n) { return hermite_h_value(m, x, n, false); });
}
std::vector<Value> special_hermite_polynomial_he(LowerContext& ctx) {
  return polynomial(ctx, [](const Arith& m, const Value& x, const Value& n) { return hermite_h_value(m, x, n, true); });
}
std::vector<Value> special_laguerre_polynomial_l(LowerContext& ctx) { return polynomial(ctx, laguerre_value); }
std::vector<Value> special_legendre_polynomial_p(LowerContext& ctx) { return polynomial(ctx, legendre_value); }

}  // namespace torch_tpu::lower
