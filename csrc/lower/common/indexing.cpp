// Index arithmetic (declared in lower/common/indexing.h).
#include "lower/common/indexing.h"

namespace torch_tpu::lower {

Value as_index(Builder& b, const Value& index) { return b.convert(index, ElementType::S64); }

Value wrap_negative(Builder& b, const Value& index, int64_t size) {
  Value wrapped = b.binary("add", index, b.splat(static_cast<double>(size), index.type));
  return b.select(b.compare(index, zeros(b, index.type), hlo::CompareDirection::LT), wrapped, index);
}

Value rank_at_least_1(Builder& b, const Value& v) { return v.rank() == 0 ? b.reshape(v, {1}) : v; }

Value point_coordinates(Builder& b, const Shape& shape, int64_t dim, const Value& along) {
  Shape column = shape;
  column.push_back(1);
  std::vector<Value> parts;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    Value c = d == dim ? along : b.iota({ElementType::S64, shape}, d);
    parts.push_back(b.reshape(c, column));
  }
  return b.concatenate(parts, static_cast<int64_t>(shape.size()));
}

void check_index_in_dim(LowerContext& ctx, const Value& index, int64_t dim, int64_t size, const std::string& op,
                        bool runtime_error) {
  ctx.check_in_range(
      index, 0, size,
      op + ": index out of bounds for dimension " + std::to_string(dim) + " with size " + std::to_string(size),
      runtime_error);
}

std::optional<ScatterAlongDim> scatter_along_dim(LowerContext& ctx, const Value& src, ElementType t,
                                                 const std::string& op, bool runtime_error) {
  Builder& b = ctx.b;
  const Value& self = ctx.tensor(0);
  Value index = as_index(b, ctx.tensor(2));
  if (index.type.numel() == 0 || ctx.out_types.at(0).numel() == 0) return std::nullopt;
  const int64_t dim = wrap_dim(ctx.int_arg(1), self.rank());
  check_index_in_dim(ctx, index, dim, self.rank() == 0 ? 1 : self.shape()[dim], op, runtime_error);
  ScatterAlongDim s;
  s.operand = rank_at_least_1(b, b.convert(self, t));
  index = rank_at_least_1(b, index);
  s.updates = b.convert(src, t);
  if (s.updates.rank() == 0) {
    s.updates = b.broadcast_to(s.updates, index.shape());
  } else {
    s.updates = b.slice(s.updates, Shape(s.updates.rank(), 0), index.shape(), Shape(s.updates.rank(), 1));
  }
  s.coords = point_coordinates(b, index.shape(), dim, index);
  return s;
}

}  // namespace torch_tpu::lower
