#include "device/jagged_arguments.h"

namespace torch_tpu::device {

void fill_permuted_lengths_sum(std::vector<c10::IValue>& args) {
  if (args.size() < 5 || !args[4].isNone()) return;
  const at::Tensor permute = args[0].toTensor(), lengths = args[1].toTensor();
  // Every row `permute` names, repeated ones as often as named.
  const int64_t sum =
      permute.numel() == 0 || lengths.numel() == 0 ? 0 : lengths.index_select(0, permute).sum().item<int64_t>();
  args[4] = c10::IValue(sum);
}

void fill_jagged_total_length(std::vector<c10::IValue>& args) {
  if (args.size() < 3 || !args[2].isNone()) return;
  const std::vector<at::Tensor> offsets = args[1].toTensorVector();
  TORCH_CHECK(!offsets.empty() && offsets.back().numel() > 0, "dense_to_jagged: x_offsets must not be empty");
  args[2] = c10::IValue(offsets.back().reshape({-1})[-1].item<int64_t>());
}

}  // namespace torch_tpu::device
