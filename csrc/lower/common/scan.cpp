// One log-step (Hillis-Steele) inclusive scan: log2(n) elementwise steps,
// each combining a value with the one 2^k places before it, so any
// associative combiner works and no window grows with n.
#include "lower/common/scan.h"

namespace torch_tpu::lower {

namespace {

// `x` moved `shift` places up along `dim`, the vacated front filled with `fill`.
Value shifted_by(Builder& b, const Value& x, int64_t dim, int64_t shift, const Value& fill) {
  Shape start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1), low(x.rank(), 0), zero(x.rank(), 0);
  limit[dim] -= shift;
  low[dim] = shift;
  return b.pad(b.slice(x, start, limit, strides), fill, low, zero, zero);
}

}  // namespace

std::vector<Value> inclusive_scan(Builder& b, std::vector<Value> xs, int64_t dim, const std::vector<Value>& identity,
                                  const ScanCombine& combine) {
  const int64_t n = xs.at(0).shape().at(dim);
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<Value> earlier;
    for (size_t i = 0; i < xs.size(); ++i) earlier.push_back(shifted_by(b, xs[i], dim, s, identity[i]));
    xs = combine(b, earlier, xs);
  }
  return xs;
}

Value prefix_sum(Builder& b, const Value& x, int64_t dim) {
  auto add = [](Builder& rb, const std::vector<Value>& earlier, const std::vector<Value>& later) {
    return std::vector<Value>{rb.binary("add", earlier[0], later[0])};
  };
  return inclusive_scan(b, {x}, dim, {b.constant(0, x.dtype())}, add)[0];
}

}  // namespace torch_tpu::lower
