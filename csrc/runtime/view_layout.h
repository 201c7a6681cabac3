// Reading and writing a strided view of a flat storage buffer inside a
// program. PyTorch's sizes/strides/offset describe views over one storage;
// a program reads a view through its layout and writes an in-place result
// back into the flat buffer, so views alias exactly as on CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::runtime {

struct ViewLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  int64_t numel() const;
  // Row-major contiguous (size-1 dims ignored).
  bool is_contiguous() const;
};

// The view's elements, shape `layout.sizes`, from a flat (rank-1) value.
hlo::Value read_view(hlo::Builder& b, const hlo::Value& flat, const ViewLayout& layout);
// `flat` with the view's elements replaced by `value` (shape `layout.sizes`,
// same element type as `flat`).
hlo::Value write_view(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& value, const ViewLayout& layout);

}  // namespace torch_tpu::runtime
