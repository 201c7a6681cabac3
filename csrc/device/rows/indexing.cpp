// The rows of the registration table (csrc/device/rows/rows.h) for indexing,
// gather/scatter, index_* and put, shapes, padding and creation; their
// lowerings are in csrc/lower/ (index, index_reduce, shape, padding and
// creation). Above the rows, the checks, argument rewrites and meta kernels
// only these rows name.
#include "device/rows/rows.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "device/argument_checks.h"
#include "device/debug_checks.h"
#include "device/storage_buffer.h"
#include "lower/creation.h"
#include "lower/index.h"
#include "lower/index_reduce.h"
#include "lower/lowering.h"
#include "lower/padding.h"
#include "lower/shape.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// Whether an index tensor is a mask (bool, or the deprecated byte masks),
// which selects where it is true over as many dims as it has.
bool is_mask_index(const at::Tensor& index) {
  return index.scalar_type() == at::kBool || index.scalar_type() == at::kByte;
}

// Advanced indexing: PyTorch raises IndexError for float indices (the Python
// meta kernel raises RuntimeError, CUDA and CPU IndexError).
void check_index_dtypes(const c10::FunctionSchema&, const Args& args) {
  std::vector<at::Tensor> indices;
  if (args.size() > 1) collect_tensors(args[1], indices);
  for (const at::Tensor& idx : indices) {
    if (!idx.defined()) continue;
    at::ScalarType t = idx.scalar_type();
    TORCH_CHECK_INDEX(t == at::kLong || t == at::kInt || t == at::kByte || t == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
  }
}

void check_index_select_dtype(const c10::FunctionSchema&, const Args& args) {
  if (args.size() < 3 || !args[2].isTensor()) return;
  at::ScalarType t = args[2].toTensor().scalar_type();
  TORCH_CHECK(t == at::kLong || t == at::kInt, "index_select(): Expected dtype int32 or int64 for index");
}

// cat of 0-d tensors: CPU raises RuntimeError (the Python meta kernel IndexError).
void check_cat_inputs(const c10::FunctionSchema&, const Args& args) {
  if (args.empty()) return;
  std::vector<at::Tensor> inputs;
  collect_tensors(args[0], inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(!inputs[i].defined() || inputs[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
  }
}

// arange's bounds, checked and converted as CPU's kernel does
// (native/RangeFactories.cpp): an infinite or NaN range first, then start
// and step to the accumulation type, end too for int64 results (other
// dtypes count their elements in double). A bound that overflows raises
// c10's error; PyTorch's Python meta kernel fails inside prims::iota instead.
void check_arange_bounds(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* out = tensor_at(args, 3);
  if (!out) return;
  const double start = args[0].toScalar().toDouble(), end = args[1].toScalar().toDouble();
  TORCH_CHECK(std::isfinite(start) && std::isfinite(end), "unsupported range: ", start, " -> ", end);
  auto convert = [&](auto accumulation) {
    using T = decltype(accumulation);
    args[0].toScalar().to<T>();
    args[2].toScalar().to<T>();
    if (out->scalar_type() == at::kLong) args[1].toScalar().to<T>();
  };
  const at::ScalarType t = out->scalar_type();
  if (t == at::kHalf || t == at::kBFloat16) {
    convert(float{});
  } else if (at::isFloatingType(t)) {
    convert(double{});
  } else if (at::isIntegralType(t, /*includeBool=*/false)) {
    convert(int64_t{});
  }
}

// index_add's meta function (index_func_meta_impl, native/TensorAdvancedIndexing.cpp):
// PyTorch's Python meta kernel checks none of it, and a zero-size self
// reaches no lowering that could.
void check_index_add_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2), *source = tensor_at(args, 3);
  if (!self || !index || !source || !args[1].isInt()) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK_INDEX(index->dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index->scalar_type() == at::kLong || index->scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index->scalar_type());
  TORCH_CHECK(self->scalar_type() == source->scalar_type(), "index_add_(): self (", self->scalar_type(),
              ") and source (", source->scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source->dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source->dim());
  TORCH_CHECK(index->numel() == (source->dim() == 0 ? 1 : source->size(dim)), "index_add_(): Number of indices (",
              index->numel(), ") should be equal to source.size(dim) (", source->dim() == 0 ? 1 : source->size(dim),
              ")");
  std::vector<int64_t> self_sizes = self->sizes().vec(), source_sizes = source->sizes().vec();
  if (source->dim() != 0 && self->dim() != 0) {
    self_sizes.erase(self_sizes.begin() + dim);
    source_sizes.erase(source_sizes.begin() + dim);
  }
  TORCH_CHECK(self_sizes == source_sizes,
              "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = ",
              self->sizes(), " source.shape = ", source->sizes());
}

// Whether _index_put_impl_ runs as masked_fill_(mask, value.item()) on CPU
// and CUDA (canDispatchToMaskedFill): one boolean mask, one value, no
// accumulation. The value then converts to self's dtype like any number.
bool index_put_is_masked_fill(const Args& args) {
  const at::Tensor* values = tensor_at(args, 2);
  if (!values || values->numel() != 1 || args.size() < 4 || !args[3].isBool() || args[3].toBool()) return false;
  std::vector<at::Tensor> indices;
  collect_tensors(args[1], indices);
  int64_t defined = 0;
  bool mask = false;
  for (const at::Tensor& idx : indices) {
    if (!idx.defined()) continue;
    ++defined;
    mask = idx.scalar_type() == at::kBool;
  }
  return defined == 1 && mask;
}

// index_put's iterator (make_index_put_iterator).
void check_index_put_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *values = tensor_at(args, 2);
  if (!self || !values || index_put_is_masked_fill(args)) return;
  TORCH_CHECK(values->scalar_type() == self->scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self->scalar_type(),
              " for the destination and ", values->scalar_type(), " for the source.");
}

void check_index_put(const c10::FunctionSchema& schema, const Args& args) {
  check_index_dtypes(schema, args);  // make_info, before the iterator
  check_index_put_types(schema, args);
}

// put_ (native/TensorAdvancedIndexing.cpp).
void check_put_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *source = tensor_at(args, 2);
  if (!self || !source) return;
  TORCH_CHECK(self->scalar_type() == source->scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ", self->scalar_type(),
              " and source.dtype = ", source->scalar_type());
}

// Advanced indexing (AdvancedIndex, native/TensorAdvancedIndexing.cpp): the
// index tensors broadcast together, and an empty indexed dim admits no
// index; both are known from shapes, so they raise at the call on CUDA too.
// `values` (index_put's, else nullptr) must broadcast to the selection.

void check_advanced_index_shapes(const Args& args, const at::Tensor* values) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isList()) return;
  auto list = args[1].toList();
  std::vector<at::Tensor> indices;
  std::vector<int64_t> dims;  // the dim of self each index tensor indexes
  int64_t dim = 0;
  bool has_mask = false;
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined()) {
      ++dim;
      continue;
    }
    const at::Tensor& idx = e.toTensor();
    const bool mask = is_mask_index(idx);
    has_mask = has_mask || mask;
    if (!mask) {
      indices.push_back(idx);
      dims.push_back(dim);
    }
    dim += mask ? idx.dim() : 1;
  }
  if (has_mask || indices.empty()) return;  // a lone mask (index_put_) selects within its own shape
  std::vector<int64_t> shape;               // the broadcast shape so far, trailing dims aligned
  for (const at::Tensor& idx : indices) {
    const auto sizes = idx.sizes();
    if (sizes.size() > shape.size()) shape.insert(shape.begin(), sizes.size() - shape.size(), 1);
    for (size_t k = 0; k < sizes.size(); ++k) {
      int64_t& have = shape[shape.size() - sizes.size() + k];
      if (have == 1) {
        have = sizes[k];
      } else if (sizes[k] != 1 && sizes[k] != have) {
        std::string shapes;
        for (size_t j = 0; j < indices.size(); ++j) shapes += (j ? ", " : "") + c10::str(indices[j].sizes());
        TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                          shapes);
      }
    }
  }
  const int64_t selected = c10::multiply_integers(shape);
  for (int64_t d : dims) {
    TORCH_CHECK_INDEX(d >= self->dim() || self->size(d) != 0 || selected == 0,
                      "index is out of bounds for dimension with size 0");
  }
  // index_put's values broadcast to the indexing result: the indices' shape
  // where the indexed dims were (first, when they are not adjacent), with the
  // dims no index tensor takes.
  if (!values || dim > self->dim()) return;
  bool adjacent = true;
  for (size_t i = 1; i < dims.size(); ++i) adjacent = adjacent && dims[i] == dims[i - 1] + 1;
  std::vector<int64_t> result;
  for (int64_t d = 0; d < self->dim(); ++d) {
    const bool indexed = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (indexed && d == dims[0] && adjacent) result.insert(result.end(), shape.begin(), shape.end());
    if (!indexed) result.push_back(self->size(d));
  }
  if (!adjacent) result.insert(result.begin(), shape.begin(), shape.end());
  bool fits = values->dim() <= static_cast<int64_t>(result.size());
  for (int64_t k = 0; fits && k < values->dim(); ++k) {
    const int64_t v = values->size(values->dim() - 1 - k), r = result[result.size() - 1 - k];
    fits = v == 1 || v == r;
  }
  TORCH_CHECK(fits, "shape mismatch: value tensor of shape ", values->sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(result));
}

void check_index_shapes(const c10::FunctionSchema&, const Args& args) { check_advanced_index_shapes(args, nullptr); }

// (self, indices, values, accumulate, unsafe)
void check_index_put_shapes(const c10::FunctionSchema&, const Args& args) {
  check_advanced_index_shapes(args, tensor_at(args, 2));
}

// index_select and gather over an empty dim: no index can be in range, and
// CPU and CUDA say so from the shapes.
void check_index_select_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK_INDEX(index->dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index_select(): self indexing axis dim should be positive");
}

void check_gather_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index is out of bounds for dimension ", dim, " with size 0");
}

// scatter, scatter_add, scatter_reduce into an empty dim: no index can be in
// range, and CPU says so at the call.
void check_scatter_dim(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!self || !index || !args[1].isInt() || self->dim() == 0) return;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
  TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index is out of bounds for dimension ", dim, " with size 0");
}

// _embedding_bag's kernels (CPU's and CUDA's) first bring indices and offsets
// to their promoted type (promoteIndicesAndOffsets): uint8 indices beside
// int64 offsets are int64 indices. PyTorch's Python meta kernel checks the
// dtypes as they came, so the promotion happens before it.
void normalize_embedding_bag_indices(std::vector<c10::IValue>& args) {
  const at::Tensor *indices = tensor_at(args, 1), *offsets = tensor_at(args, 2);
  if (!indices || !offsets || indices->scalar_type() == offsets->scalar_type()) return;
  const at::ScalarType common = at::promoteTypes(indices->scalar_type(), offsets->scalar_type());
  if (indices->scalar_type() != common) args[1] = indices->to(common);
  if (offsets->scalar_type() != common) args[2] = offsets->to(common);
}

// _embedding_bag over a weight of no rows: no index is in its range, and
// CPU says so at the call (XLA refuses the gather of an empty table).
void check_embedding_bag_rows(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *weight = tensor_at(args, 0), *indices = tensor_at(args, 1);
  if (!weight || !indices || weight->dim() == 0) return;
  TORCH_CHECK(indices->numel() == 0 || weight->size(0) > 0,
              "Index 0 of input is not in the valid range [0, 0): the weight has no rows");
}

// reflection_pad and replication_pad of every rank: no kernel for bool.
void check_pad_not_bool(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  TORCH_CHECK_NOT_IMPLEMENTED(!self || self->scalar_type() != at::kBool, "\"", schema.name().substr(6),
                              "\" not implemented for 'Bool'");
}

// replication_pad{1,2,3}d (native/ReplicationPadding.cpp): every padded
// size at least 1, added in int64 as CPU adds it (wrapping); PyTorch's
// Python meta kernel overflows Python's int into new_empty (TypeError).
void check_replication_pad_sizes(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (!self || args.size() < 2 || !args[1].isIntList()) return;
  const std::vector<int64_t> pad = args[1].toIntVector();
  static const char* const kNames[] = {"W", "H", "D"};
  for (size_t i = 0; i < pad.size() / 2 && i < 3 && static_cast<int64_t>(i) < self->dim(); ++i) {
    const int64_t in = self->size(self->dim() - 1 - static_cast<int64_t>(i));
    const int64_t out = static_cast<int64_t>(static_cast<uint64_t>(in) + static_cast<uint64_t>(pad[2 * i]) +
                                             static_cast<uint64_t>(pad[2 * i + 1]));
    TORCH_CHECK(out >= 1, "input (", kNames[i], ": ", in, ") is too small. Calculated output ", kNames[i], ": ", out);
  }
}

// index_copy's and index_fill's meta functions.
void check_index_copy_types(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2), *source = tensor_at(args, 3);
  if (!self || !source) return;
  // index_copy's meta function's order (native/TensorAdvancedIndexing.cpp).
  TORCH_CHECK_INDEX(!index || index->dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ",
                    index ? index->dim() : 0, ")");
  TORCH_CHECK_INDEX(source->dim() == self->dim() || source->dim() == 0 || self->dim() == 0,
                    "index_copy_(): When source and destination are not scalars, their dimensionality must match. ",
                    "Source dimensionality (", source->dim(), "), destination dimensionality (", self->dim(), ")");
  TORCH_CHECK(!index || index->scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index->scalar_type());
  if (index && source->dim() > 0 && args[1].isInt()) {
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), source->dim());
    TORCH_CHECK_INDEX(index->numel() == source->size(dim), "index_copy_(): Number of indices (", index->numel(),
                      ") should be equal to source.size(dim) (", source->size(dim), ")");
  }
  TORCH_CHECK(self->scalar_type() == source->scalar_type(),
              "index_copy_(): self and source expected to have the same dtype, but got (self) ", self->scalar_type(),
              " and (source) ", source->scalar_type());
}

void check_index_fill_index(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *self = tensor_at(args, 0), *index = tensor_at(args, 2);
  if (!index) return;
  TORCH_CHECK_INDEX(index->scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  // No index is in range of an empty dim (CPU fails restriding self for it).
  if (self && self->dim() > 0 && args[1].isInt()) {
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self->dim());
    TORCH_CHECK(index->numel() == 0 || self->size(dim) > 0, "index_fill_(): index out of range for dimension ", dim,
                " with size 0");
  }
}

// [min, max] of an index tensor, read on the host.
std::pair<int64_t, int64_t> index_extent(const at::Tensor& index) {
  at::Tensor host = index.cpu().to(at::kLong);
  return {host.min().item<int64_t>(), host.max().item<int64_t>()};
}

// gather, scatter, scatter_add, index_add, index_select: (self, dim, index, ...).
// `index_error`: CPU raises IndexError, worded as index_select's and
// index_add's kernels word it; otherwise RuntimeError.
void check_dim_index(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, bool index_error) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = args[2].toTensor();
  if (index.numel() == 0) return;
  const int64_t dim = at::maybe_wrap_dim(args[1].toInt(), self.dim());
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  auto [lo, hi] = index_extent(index);
  const int64_t bad = lo < 0 ? lo : hi;
  if (lo >= 0 && hi < size) return;
  if (index_error) {
    TORCH_CHECK_INDEX(false, "index out of range in self (", schema.name(), ": index ", bad, " with size ", size, ")");
  }
  TORCH_CHECK(false, schema.name(), ": index ", bad, " is out of bounds for dimension ", dim, " with size ", size);
}

// Index ranges (OpSpec::debug_check, Debug mode): each raises the error CPU
// raises for the first out-of-range index.
// (self, dim, index, ...): gather, scatter, scatter_add.
void check_dim_index_range(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  check_dim_index(schema, args, /*index_error=*/false);
}

// (self, dim, index, ...) with IndexError: index_select, index_add.
void check_dim_index_range_index_error(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  check_dim_index(schema, args, /*index_error=*/true);
}

// (self, indices, ...), one index tensor per leading dim: index, index_put.
void check_advanced_index_ranges(const c10::FunctionSchema&, const std::vector<c10::IValue>& args) {
  const at::Tensor& self = args[0].toTensor();
  auto list = args[1].toList();
  int64_t dim = 0;
  for (size_t i = 0; i < list.size(); ++i, ++dim) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined() || e.toTensor().numel() == 0) continue;
    const at::Tensor& index = e.toTensor();
    if (is_mask_index(index)) {
      dim += index.dim() - 1;  // a mask covers as many dims as it has
      continue;
    }
    const int64_t size = self.size(dim);
    auto [lo, hi] = index_extent(index);
    const int64_t bad = lo < -size ? lo : hi;
    TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", bad, " is out of bounds for dimension ", dim, " with size ",
                      size);
  }
}

// Advanced indexing's arguments as CUDA accepts them (OpSpec::
// normalize_arguments of index and index_put): index tensors may live on the
// CPU, and index's boolean masks become the coordinates of their true
// elements.

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

// Whether index_put's `values` broadcast to self[mask]'s shape,
// self.shape[:p] + [count] + self.shape[p + mask.dim():], whatever the count
// of true elements is: one value written without accumulating (CPU and
// CUDA masked_fill with it, whatever its shape), or values right-aligned
// against that shape that are 1 or absent along the masked axis and fit
// every other dim (a row per selected element: T5Gemma 2's image embedding
// written at its image tokens).
bool values_fit_any_count(const at::Tensor& self, const at::Tensor& mask, int64_t p, const at::Tensor& values,
                          bool accumulate) {
  if (values.numel() == 1 && !accumulate) return true;
  if (p + mask.dim() > self.dim()) return false;
  std::vector<int64_t> result(self.sizes().begin(), self.sizes().begin() + p);
  result.push_back(1);  // the masked axis: only a 1 fits every count
  result.insert(result.end(), self.sizes().begin() + p + mask.dim(), self.sizes().end());
  if (values.dim() > static_cast<int64_t>(result.size())) return false;
  const int64_t shift = static_cast<int64_t>(result.size()) - values.dim();
  for (int64_t j = 0; j < values.dim(); ++j) {
    const int64_t v = values.size(j), r = result[shift + j];
    if (v != 1 && (v != r || shift + j == p)) return false;
  }
  return true;
}

// `is_index`: masks become coordinates (index). index_put keeps a lone mask
// (its lowering writes through it with no host round trip); a mask among
// other index tensors becomes coordinates too, as ATen expands it for CPU
// and CUDA (expandTensors), since the other indices broadcast against them.
void normalize_advanced_indices(std::vector<c10::IValue>& args, bool is_index) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isList()) return;
  const at::Tensor& self = args[0].toTensor();
  if (!is_tpu(self)) return;
  auto list = args[1].toList();
  int64_t index_tensors = 0, lone = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined()) continue;
    ++index_tensors;
    lone = static_cast<int64_t>(i);  // the dim it starts at when it is the only index
  }
  // A lone mask whose values need the count of its true elements to
  // broadcast (a row per element) becomes coordinates too: that count is on
  // the device (CUDA reads it on the host as well).
  bool fits = false;
  if (!is_index && index_tensors == 1 && args.size() > 2 && args[2].isTensor()) {
    const at::Tensor mask = list.get(lone).toTensor();
    const bool accumulate = args.size() > 3 && args[3].isBool() && args[3].toBool();
    fits = is_mask_index(mask) && values_fit_any_count(self, mask, lone, args[2].toTensor(), accumulate);
  }
  const bool masks_to_coordinates = is_index || index_tensors > 1 || !fits;
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
    const bool is_mask = is_mask_index(idx);
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

void normalize_index_arguments(std::vector<c10::IValue>& args) { normalize_advanced_indices(args, /*is_index=*/true); }

// _index_put_impl_ with one value, no accumulation and one mask on self's
// device runs as masked_fill_ on CPU and CUDA (canDispatchToMaskedFill),
// which refuses a uint8 mask: x[mask_u8] = 0 raises there. (PyTorch makes a
// Python number assigned to a CUDA tensor a CPU tensor, so it takes that
// path; ours is a tpu tensor, and counts as one value the same.) Before
// normalize_advanced_indices moves a CPU mask to the device.
void check_uint8_mask_fill(const std::vector<c10::IValue>& args) {
  const at::Tensor *self = tensor_at(args, 0), *values = tensor_at(args, 2);
  const bool accumulate = args.size() > 3 && args[3].isBool() && args[3].toBool();
  if (!self || !values || values->numel() != 1 || accumulate || !args[1].isList()) return;
  std::vector<at::Tensor> indices;
  collect_tensors(args[1], indices);
  const at::Tensor* mask = nullptr;
  for (const at::Tensor& idx : indices) {
    if (!idx.defined()) continue;
    if (mask || !is_mask_index(idx) || idx.device() != self->device()) return;
    mask = &idx;
  }
  TORCH_CHECK(!mask || mask->scalar_type() != at::kByte,
              "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char");
}

// linspace's and logspace's steps, checked before their dtype as CPU's
// linspace_out and logspace_out do.
void check_space_steps(const c10::FunctionSchema&, const Args& args) {
  TORCH_CHECK(args.size() < 3 || !args[2].isInt() || args[2].toInt() >= 0, "number of steps must be non-negative");
}

void normalize_index_put_arguments(std::vector<c10::IValue>& args) {
  check_uint8_mask_fill(args);
  // Run as masked_fill_(mask, value.item()) on CPU and CUDA: the value
  // converts checked to self's dtype (a replayed call checks too).
  const at::Tensor *self = tensor_at(args, 0), *values = tensor_at(args, 2);
  if (self && values && index_put_is_masked_fill(args)) check_value_fits(*values, self->scalar_type());
  normalize_advanced_indices(args, /*is_index=*/false);
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    // CPU's kernels dispatch on the result's dtype: arange before its bounds
    // checks, linspace and logspace after their steps check.
    OpSpec(L::arange, "arange.start_out")
        .gap_of_out("arange_cpu", all_types_and_half, DtypeGap::When::BeforeChecks)
        .check(check_arange_bounds),
    OpSpec(L::cat, "cat cat.out").check(check_cat_inputs).overlap(WriteOverlap::Disjoint),
    OpSpec(L::embedding_bag, "_embedding_bag _embedding_bag_forward_only")
        .check(check_embedding_bag_rows)
        .normalize(normalize_embedding_bag_indices),
    {L::embedding_bag_backward, "_embedding_bag_backward"},
    {L::embedding_bag_dense_backward, "_embedding_bag_dense_backward"},
    {L::embedding_bag_per_sample_weights_backward, "_embedding_bag_per_sample_weights_backward"},
    {L::embedding_dense_backward, "embedding_dense_backward"},
    {L::embedding_renorm, "embedding_renorm embedding_renorm_ embedding_renorm.out"},
    {L::eye, "eye.out eye.m_out"},
    {L::flip, "flip flip.out"},
    OpSpec(L::gather, "gather gather.out").check(check_gather_dim).debug(check_dim_index_range),
    OpSpec(L::index, "index.Tensor index.Tensor_out")
        .normalize(normalize_index_arguments)
        .check(check_index_dtypes)
        .check(check_index_shapes)
        .debug(check_advanced_index_ranges),
    OpSpec(L::index_add, "index_add index_add_ index_add.out")
        .check(check_index_add_types)
        .debug(check_dim_index_range_index_error),
    OpSpec(L::index_copy, "index_copy index_copy_ index_copy.out").check(check_index_copy_types),
    OpSpec(L::index_fill,
           "index_fill.int_Scalar index_fill_.int_Scalar index_fill.int_Scalar_out index_fill.int_Tensor "
           "index_fill_.int_Tensor index_fill.int_Tensor_out")
        .check(check_index_fill_index),
    OpSpec(L::index_put, "_index_put_impl_")
        .normalize(normalize_index_put_arguments)
        .check(check_index_put)
        .check(check_index_put_shapes)
        .debug(check_advanced_index_ranges),
    {L::index_reduce, "index_reduce index_reduce_ index_reduce.out"},
    OpSpec(L::index_select, "index_select index_select.out")
        .check(check_index_select_dtype)
        .check(check_index_select_dim)
        .debug(check_dim_index_range_index_error),
    OpSpec(L::linspace, "linspace.out")
        .check(check_space_steps)
        .gap_of_out("linspace_cpu", all_types_complex_and_half, DtypeGap::When::AfterChecks),
    OpSpec(L::logspace, "logspace.out")
        .check(check_space_steps)
        .gap_of_out("logspace_cpu", all_types_complex_and_half, DtypeGap::When::AfterChecks),
    {L::masked_scatter, "masked_scatter masked_scatter_ masked_scatter.out"},
    {L::nonzero_static, "nonzero_static nonzero_static.out"},
    OpSpec(L::put, "put put_ put.out").check(check_put_types),
    OpSpec(L::reflection_pad,
           "reflection_pad1d reflection_pad1d.out reflection_pad2d reflection_pad2d.out reflection_pad3d "
           "reflection_pad3d.out")
        .check(check_pad_not_bool),
    {L::reflection_pad_backward,
     "reflection_pad1d_backward reflection_pad1d_backward.grad_input reflection_pad2d_backward "
     "reflection_pad2d_backward.grad_input reflection_pad3d_backward reflection_pad3d_backward.grad_input"},
    OpSpec(L::replication_pad,
           "replication_pad1d replication_pad1d.out replication_pad2d replication_pad2d.out replication_pad3d "
           "replication_pad3d.out")
        .check(check_replication_pad_sizes)
        .check(check_pad_not_bool),
    {L::replication_pad_backward,
     "replication_pad1d_backward replication_pad1d_backward.grad_input replication_pad2d_backward "
     "replication_pad2d_backward.grad_input replication_pad3d_backward replication_pad3d_backward.grad_input"},
    OpSpec(L::scatter, "scatter.src scatter_.src scatter.src_out scatter.value scatter_.value scatter.value_out")
        .check(check_scatter_dim)
        .debug(check_dim_index_range),
    OpSpec(L::scatter_add, "scatter_add scatter_add_ scatter_add.out")
        .check(check_scatter_dim)
        .debug(check_dim_index_range),
    OpSpec(L::scatter_reduce, "scatter_reduce.two scatter_reduce_.two scatter_reduce.two_out").check(check_scatter_dim),
    OpSpec(L::scatter_with_reduce,
           "scatter.reduce scatter_.reduce scatter.reduce_out scatter.value_reduce scatter_.value_reduce "
           "scatter.value_reduce_out")
        .debug(check_dim_index_range),
    {L::segment_reduce, "segment_reduce segment_reduce.out"},
    {L::segment_reduce_backward, "_segment_reduce_backward _segment_reduce_backward.out"},
    OpSpec(L::take, "take take.out").overlap(WriteOverlap::Disjoint),
    {L::tril, "tril tril_ tril.out"},
    {L::triu, "triu triu_ triu.out"},
};

}  // namespace

std::span<const OpSpec> indexing_rows() { return kRows; }

}  // namespace torch_tpu::device
