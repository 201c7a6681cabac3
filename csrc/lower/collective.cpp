#include "lower/collective.h"

#include <functional>
#include <stdexcept>
#include <string>

namespace torch_tpu::lower {
namespace {

hlo::ReplicaGroups whole_group(int64_t ranks) {
  std::vector<int64_t> group;
  for (int64_t r = 0; r < ranks; ++r) group.push_back(r);
  return {group};
}

// The StableHLO combiner of `op`. XLA:CPU's all_reduce combines with add,
// multiply, minimum and maximum only: bool runs as u8 (its sum and max are
// "any", its product and min "all"), and the bitwise ops are refused
// (check_collective_reduce), so tpu_dist sends them to its host transport.
std::string combiner(CollectiveReduce op) {
  switch (op) {
    case CollectiveReduce::Sum:
    case CollectiveReduce::Avg:
    case CollectiveReduce::PremulSum:
      return "add";
    case CollectiveReduce::Product:
      return "multiply";
    case CollectiveReduce::Min:
      return "minimum";
    case CollectiveReduce::Max:
      return "maximum";
    default:
      throw std::invalid_argument("reduce op not supported in programs");
  }
}

std::string bool_combiner(CollectiveReduce op) {
  return op == CollectiveReduce::Product || op == CollectiveReduce::Min ? "minimum" : "maximum";
}

// `reduce` over x; a bool x as u8 0/1.
Value reduce_values(Builder& b, const Value& x, CollectiveReduce op,
                    const std::function<Value(const Value&, const std::string&)>& reduce) {
  if (x.dtype() != ElementType::Pred) return reduce(x, combiner(op));
  const Value r = reduce(b.convert(x, ElementType::U8), bool_combiner(op));
  return b.compare(r, b.broadcast_to(b.constant_int(0, ElementType::U8), r.shape()), hlo::CompareDirection::NE);
}

// What each rank contributes: PREMUL_SUM's factor applied first.
Value contribution(Builder& b, const Value& x, CollectiveReduce op, double factor) {
  if (op != CollectiveReduce::PremulSum) return x;
  return b.binary("multiply", x, b.broadcast_to(b.constant(factor, x.dtype()), x.shape()));
}

// AVG: the sum divided by the number of ranks (integer division truncates).
Value finish(Builder& b, const Value& reduced, CollectiveReduce op, int64_t ranks) {
  if (op != CollectiveReduce::Avg) return reduced;
  return b.binary("divide", reduced, b.broadcast_to(b.constant_int(ranks, reduced.dtype()), reduced.shape()));
}

// The unsigned integer type of `dtype`'s width, for moving its bits.
ElementType bits_type(ElementType dtype) {
  switch (hlo::byte_size(dtype)) {
    case 1:
      return ElementType::U8;
    case 2:
      return ElementType::U16;
    case 4:
      return ElementType::U32;
    default:
      return ElementType::U64;
  }
}

}  // namespace

void check_collective_reduce(CollectiveReduce op, ElementType dtype) {
  if (op == CollectiveReduce::BitwiseAnd || op == CollectiveReduce::BitwiseOr || op == CollectiveReduce::BitwiseXor)
    throw std::invalid_argument("ReduceOp.BAND/BOR/BXOR are not supported in programs");
  if (op == CollectiveReduce::Avg && dtype == ElementType::Pred)
    throw std::invalid_argument("Cannot use ReduceOp.AVG with boolean inputs");
  if (op == CollectiveReduce::PremulSum && !hlo::is_float(dtype))
    throw std::invalid_argument("Cannot use ReduceOp.PREMUL_SUM with a non-floating point tensor");
}

Value lower_all_reduce(Builder& b, const Value& x, CollectiveReduce op, double factor, int64_t ranks, int64_t channel) {
  check_collective_reduce(op, x.dtype());
  Value reduced = reduce_values(b, contribution(b, x, op, factor), op, [&](const Value& v, const std::string& c) {
    return hlo::all_reduce(b, v, whole_group(ranks), c, channel);
  });
  return finish(b, reduced, op, ranks);
}

Value lower_reduce_scatter(Builder& b, const Value& x, CollectiveReduce op, double factor, int64_t ranks,
                           int64_t channel) {
  check_collective_reduce(op, x.dtype());
  Value reduced = reduce_values(b, contribution(b, x, op, factor), op, [&](const Value& v, const std::string& c) {
    return hlo::reduce_scatter(b, v, 0, whole_group(ranks), c, channel);
  });
  return finish(b, reduced, op, ranks);
}

Value lower_all_gather(Builder& b, const Value& x, int64_t ranks, int64_t channel) {
  return hlo::all_gather(b, x, 0, whole_group(ranks), channel);
}

Value lower_all_to_all(Builder& b, const Value& x, int64_t ranks, int64_t channel) {
  return hlo::all_to_all(b, x, 0, 0, whole_group(ranks), channel);
}

Value lower_broadcast(Builder& b, const Value& x, int64_t root, int64_t ranks, int64_t channel) {
  // XLA:CPU has no collective_broadcast; a sum of the bits as unsigned
  // integers, every rank but the root contributing zeros, moves the root's
  // bits exactly (-0.0 and NaN payloads included) in one all_reduce.
  const bool pred = x.dtype() == ElementType::Pred;
  const TensorType bits{pred ? ElementType::U8 : bits_type(x.dtype()), x.shape()};
  const Value own = pred ? b.convert(x, ElementType::U8) : b.bitcast_convert(x, bits);
  const Value is_root =
      b.compare(hlo::replica_id(b), b.constant_int(root, ElementType::U32), hlo::CompareDirection::EQ);
  const Value sent = b.select(b.broadcast_to(is_root, x.shape()), own, b.splat(0, bits));
  const Value received = hlo::all_reduce(b, sent, whole_group(ranks), "add", channel);
  if (pred) return b.compare(received, b.splat(0, bits), hlo::CompareDirection::NE);
  return b.bitcast_convert(received, x.type);
}

}  // namespace torch_tpu::lower
