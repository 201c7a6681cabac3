// The results of a backward op with an output_mask argument
// (convolution_backward, native_batch_norm_backward,
// native_group_norm_backward): PyTorch returns only the defined ones, and
// its meta kernel gave their types, in order, as the context's out_types.
#pragma once

#include <string>
#include <vector>

#include "lower/lowering.h"

namespace torch_tpu::lower {

class OutputMask {
 public:
  // `mask_arg`: the output_mask argument's index; `op` names the op in errors.
  OutputMask(const LowerContext& ctx, size_t mask_arg, std::string op);

  // Whether result i is asked for (a short mask asks for the rest).
  bool wanted(size_t i) const { return i >= mask_.size() || mask_[i] != 0; }
  // Whether the meta kernel defined one more result (grad_bias is undefined
  // without bias_sizes).
  bool more_defined() const { return results_.size() < types_.size(); }
  // The type of the next result; throws when the meta kernel defined no more.
  const TensorType& next_type() const;
  void push(const Value& v) { results_.push_back(v); }

  // The results so far, as they are.
  const std::vector<Value>& results() const { return results_; }
  // The results, which must be as many as the meta kernel defined.
  std::vector<Value> finish() const;

 private:
  const std::vector<int64_t>& mask_;
  const std::vector<TensorType>& types_;
  std::string op_;
  std::vector<Value> results_;
};

}  // namespace torch_tpu::lower
