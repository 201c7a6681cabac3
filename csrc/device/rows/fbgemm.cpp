// The rows of the registration table (csrc/device/rows/rows.h) for fbgemm's
// jagged operators (TorchRec), named with their namespace and registered when
// fbgemm_gpu is imported; their lowerings are in csrc/lower/ (jagged). Above
// the rows, the checks, argument rewrites and meta kernels only these rows
// name.
#include "device/rows/rows.h"

#include "lower/jagged.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// fbgemm's jagged operators that may leave out the number their result's
// size is (OpSpec::normalize_arguments of their rows): the host waits for it,
// as fbgemm's CUDA kernels do, and the call goes on with it filled in, so the
// meta kernel and the lowering see a fixed size (csrc/lower/jagged.h).
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

// Other libraries' operators, rows like ATen's but named with their
// namespace, registered when the library is imported (register_library_ops in
// op_table.cpp, called from torch_tpu/integrations/): their meta kernels are
// the library's own. fbgemm_gpu's jagged operators, which TorchRec's
// KeyedJaggedTensor and embedding modules call (csrc/lower/jagged.h).
constexpr OpSpec kRows[] = {
    {L::asynchronous_complete_cumsum, "fbgemm::asynchronous_complete_cumsum"},
    {L::asynchronous_exclusive_cumsum, "fbgemm::asynchronous_exclusive_cumsum"},
    {L::asynchronous_inclusive_cumsum, "fbgemm::asynchronous_inclusive_cumsum"},
    OpSpec(L::dense_to_jagged_forward, "fbgemm::dense_to_jagged_forward").normalize(fill_jagged_total_length),
    {L::jagged_1d_to_dense, "fbgemm::jagged_1d_to_dense"},
    {L::jagged_2d_to_dense, "fbgemm::jagged_2d_to_dense"},
    {L::jagged_to_padded_dense_backward, "fbgemm::jagged_to_padded_dense_backward"},
    {L::jagged_to_padded_dense_forward, "fbgemm::jagged_to_padded_dense_forward"},
    {L::offsets_range, "fbgemm::offsets_range"},
    OpSpec(L::permute_1D_sparse_data, "fbgemm::permute_1D_sparse_data").normalize(fill_permuted_lengths_sum),
    OpSpec(L::permute_2D_sparse_data, "fbgemm::permute_2D_sparse_data").normalize(fill_permuted_lengths_sum),
    {L::permute_pooled_embs, "fbgemm::permute_pooled_embs fbgemm::permute_pooled_embs_auto_grad"},
    {L::segment_sum_csr, "fbgemm::segment_sum_csr"},
};

}  // namespace

std::span<const OpSpec> library_rows() { return kRows; }

}  // namespace torch_tpu::device
