// Reading and writing a strided view of a flat storage buffer inside a
// program. PyTorch's sizes/strides/offset describe views over one storage;
// a program reads a view through its layout and writes an in-place result
// back into the flat buffer, so views alias exactly as on CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::runtime {

struct ViewLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // The offset as a program input (a 0-d S64 value), so one program serves
  // the view at every offset (x[t] in a loop over t). `offset` still holds
  // this call's value, for the host's checks.
  std::optional<hlo::Value> dynamic_offset;

  int64_t numel() const;
  // Row-major contiguous (size-1 dims ignored).
  bool is_contiguous() const;
  // Elements from the view's first to one past its last (0 when empty):
  // the window of the storage it reads and writes.
  int64_t extent() const;
};

// The view's elements, shape `layout.sizes`, from a flat (rank-1) value.
hlo::Value read_view(hlo::Builder& b, const hlo::Value& flat, const ViewLayout& layout);
// `flat` with the view's elements replaced by `value` (shape `layout.sizes`,
// same element type as `flat`).
hlo::Value write_view(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& value, const ViewLayout& layout);

// Byte-level views (x.view(dtype)): a storage is bytes, its flat value holds
// them in some element type. `reinterpret_flat` gives the same bytes as
// `dtype` elements: bitcast_convert with the minor dimension split (to a
// smaller type) or merged (to a larger one); floor(bytes / byte_size(dtype))
// elements, trailing bytes that make no whole element left out. complex64
// goes through (real, imag) f32 pairs and bool through u8 (StableHLO bitcasts
// neither), so a bool element read from a byte other than 0 or 1 is true.
hlo::Value reinterpret_flat(hlo::Builder& b, const hlo::Value& flat, hlo::ElementType dtype);
// The storage after a write through a byte-level view: `written` (a flat
// value of the view's type, from its first byte) replaces the leading bytes
// of `before`; bytes it does not cover are kept. The result has the wider
// of the two element types (`written`'s on a tie), so a storage's buffer
// type may change with a write: signatures of captured programs include it.
hlo::Value merge_flat(hlo::Builder& b, const hlo::Value& before, const hlo::Value& written);

}  // namespace torch_tpu::runtime
