#include "device/index_arguments.h"

#include "device/storage_buffer.h"

namespace torch_tpu::device {

namespace {

// A mask's sizes must be those of the dims it indexes (ATen's expandTensors,
// for CPU and CUDA alike): IndexError otherwise, even where the mask would
// select fewer elements. `first_dim`: the first dim of self it indexes; a
// mask reaching past self's dims raises self.size's IndexError, as there.
void check_mask_shape(const at::Tensor& self, const at::Tensor& mask, int64_t first_dim) {
  for (int64_t j = 0; j < mask.dim(); ++j) {
    const int64_t dim = first_dim + j;
    TORCH_CHECK_INDEX(mask.size(j) == self.size(dim), "The shape of the mask ", mask.sizes(), " at index ", j,
                      " does not match the shape of the indexed tensor ", self.sizes(), " at index ", dim);
  }
}

// `is_index`: masks become coordinates (index). index_put keeps a lone mask
// (its lowering writes through it with no host round trip); a mask among
// other index tensors becomes coordinates too, as ATen expands it for CPU
// and CUDA (expandTensors), since the other indices broadcast against them.
void normalize(std::vector<c10::IValue>& args, bool is_index) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isList()) return;
  const at::Tensor& self = args[0].toTensor();
  if (!is_tpu(self)) return;
  auto list = args[1].toList();
  int64_t index_tensors = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    index_tensors += !e.isNone() && e.toTensor().defined();
  }
  // A lone mask with more than one value to write becomes coordinates too:
  // the values must broadcast to the selection, whose size only the mask's
  // true elements give (CUDA reads them on the host as well).
  const bool one_value = args.size() > 2 && args[2].isTensor() && args[2].toTensor().numel() == 1;
  const bool masks_to_coordinates = is_index || index_tensors > 1 || !one_value;
  c10::List<std::optional<at::Tensor>> normalized;
  bool changed = false;
  int64_t indexed_dim = 0;  // the dim of self the next index applies to
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined()) {
      normalized.push_back(std::nullopt);
      ++indexed_dim;
      continue;
    }
    at::Tensor idx = e.toTensor();
    const bool is_mask = idx.scalar_type() == at::kBool || idx.scalar_type() == at::kByte;
    if (is_mask) check_mask_shape(self, idx, indexed_dim);
    indexed_dim += is_mask ? idx.dim() : 1;
    if (masks_to_coordinates && is_mask) {
      at::Tensor coords = idx.cpu().nonzero();  // [n, mask.dim()]
      for (int64_t d = 0; d < idx.dim(); ++d) normalized.push_back(coords.select(1, d).to(self.device()));
      changed = true;
      continue;
    }
    if (!is_tpu(idx) && idx.dim() > 0) {
      idx = idx.to(self.device());
      changed = true;
    }
    normalized.push_back(idx);
  }
  if (changed) args[1] = normalized;
}

}  // namespace

void normalize_index_arguments(std::vector<c10::IValue>& args) { normalize(args, /*is_index=*/true); }

void normalize_index_put_arguments(std::vector<c10::IValue>& args) { normalize(args, /*is_index=*/false); }

}  // namespace torch_tpu::device
