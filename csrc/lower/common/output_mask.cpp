// Results of a backward op with an output_mask (declared in
// lower/common/output_mask.h).
#include "lower/common/output_mask.h"

#include <stdexcept>
#include <utility>

namespace torch_tpu::lower {

OutputMask::OutputMask(const LowerContext& ctx, size_t mask_arg, std::string op)
    : mask_(ctx.ints(mask_arg)), types_(ctx.out_types), op_(std::move(op)) {}

const TensorType& OutputMask::next_type() const {
  if (!more_defined()) throw std::invalid_argument(op_ + ": more results than the meta kernel's");
  return types_[results_.size()];
}

std::vector<Value> OutputMask::finish() const {
  if (results_.size() != types_.size())
    throw std::invalid_argument(op_ + ": defined results differ from the meta kernel's");
  return results_;
}

}  // namespace torch_tpu::lower
