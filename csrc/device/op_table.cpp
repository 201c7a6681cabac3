// The registration table: every overload `tpu` implements and the kernel
// behind it. Lowered ops have a row (csrc/device/op_spec.h) holding the
// lowering and every other rule the device applies to them (argument and
// Debug checks, meta kernels and corrections, op cache policy); the rows
// live by op family in csrc/device/rows/, each beside the rules only its
// family names. Here: registering them, the overloads whose kernels are
// written by hand, and the metadata ops. Composite ops (linear,
// cross_entropy, layer_norm, softmax ...) are not listed: PyTorch decomposes
// them into these before they reach the device, and autograd differentiates
// the decomposition.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "device/core_kernels.h"
#include "device/data_dependent_kernels.h"
#include "device/hand_written_kernels.h"
#include "device/missing_meta_kernels.h"
#include "device/op_spec.h"
#include "device/rows/rows.h"
#include "exec/lowered_kernel.h"

namespace torch_tpu::device {

namespace {

// Every family's rows (csrc/device/rows/), in one list for registration.
const std::span<const OpSpec> kRowFamilies[] = {pointwise_rows(),      reduction_rows(), indexing_rows(),
                                                linear_algebra_rows(), nn_rows(),        optimizer_rows(),
                                                random_rows()};

// Overloads whose kernel is written in C++ from other device ops, or runs
// on the host, instead of being lowered to one program
// (csrc/device/hand_written_kernels.h): named here with the rest, so that
// lowered_ops() and the coverage ledger see every overload the device
// implements. Their checks are their kernels' own.
struct HandWrittenOp {
  const char* overload;
  HandWrittenKernel kernel;
};
const HandWrittenOp kHandWrittenOps[] = {
    {"_addmm_activation", addmm_activation_kernel},
    {"_addmm_activation.out", addmm_activation_out_kernel},
    {"_ctc_loss", ctc_loss_kernel},
    {"_ctc_loss.Tensor", ctc_loss_tensor_kernel},
    {"_ctc_loss_backward", ctc_loss_backward_kernel},
    {"_ctc_loss_backward.Tensor", ctc_loss_backward_tensor_kernel},
    {"_fused_sdp_choice", fused_sdp_choice_kernel},
    {"_linalg_eigvals", linalg_eigvals_kernel},
    {"_masked_softmax", masked_softmax_kernel},
    {"_native_multi_head_attention", native_multi_head_attention_kernel},
    {"_nested_tensor_from_mask", nested_tensor_from_mask_kernel},
    {"_nested_tensor_from_mask_left_aligned", nested_tensor_from_mask_left_aligned_kernel},
    {"_transform_bias_rescale_qkv", transform_bias_rescale_qkv_kernel},
    {"_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd_kernel},
    {"cholesky", cholesky_kernel},
    {"cholesky.out", cholesky_out_kernel},
    {"linalg_eig", linalg_eig_kernel},
    {"linalg_eig.out", linalg_eig_out_kernel},
    {"linalg_eigvals.out", linalg_eigvals_out_kernel},
    {"linalg_lstsq.out", linalg_lstsq_out_kernel},
    {"ormqr", ormqr_kernel},
    {"ormqr.out", ormqr_out_kernel},
};

// The same for nested tensors on tpu (the key NestedTensorPrivateUse1):
// nn.TransformerEncoder's fast path packs a padded batch into one.
const HandWrittenOp kNestedTensorOps[] = {
    {"_transformer_encoder_layer_fwd", nested_transformer_encoder_layer_fwd_kernel},
    {"to_padded_tensor", nested_to_padded_tensor_kernel},
};

std::mutex library_ops_mutex;
std::vector<std::string> registered_library_ops;  // guarded by library_ops_mutex

// Calls visit(row, overload) for every overload ("add.Tensor") of every
// family's rows.
template <typename Visit>
void for_each_row_overload(Visit&& visit) {
  for (const auto& family : kRowFamilies) {
    for (const OpSpec& row : family) {
      std::istringstream in(row.overloads);
      for (std::string name; in >> name;) visit(row, name);
    }
  }
}

// "add.Tensor" as aten's operator name.
c10::OperatorName aten_operator(const std::string& overload) {
  const size_t dot = overload.find('.');
  return {"aten::" + overload.substr(0, dot), dot == std::string::npos ? "" : overload.substr(dot + 1)};
}

}  // namespace

std::vector<std::string> lowered_op_names() {
  std::vector<std::string> names;
  for_each_row_overload([&](const OpSpec&, const std::string& name) { names.push_back("aten::" + name); });
  for (const auto& entry : kHandWrittenOps) names.push_back(std::string("aten::") + entry.overload);
  std::lock_guard<std::mutex> lock(library_ops_mutex);
  names.insert(names.end(), registered_library_ops.begin(), registered_library_ops.end());
  return names;
}

std::vector<std::string> nested_tensor_op_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNestedTensorOps) names.push_back(std::string("aten::") + entry.overload);
  return names;
}

std::vector<std::string> fake_tensor_rule_ops() {
  std::vector<std::string> names;
  for_each_row_overload([&](const OpSpec& row, const std::string& name) {
    if (row.meta.serves_fake_tensors) names.push_back("aten::" + name);
  });
  return names;
}

BoxedMetaKernel fake_tensor_meta_kernel(const c10::OperatorHandle& op) {
  // Asked on every traced call of such an op: the few rows found once.
  static const auto* const served = [] {
    auto* rows = new std::vector<std::pair<c10::OperatorName, BoxedMetaKernel>>();
    for_each_row_overload([&](const OpSpec& row, const std::string& name) {
      if (row.meta.serves_fake_tensors) rows->emplace_back(aten_operator(name), row.meta.kernel);
    });
    return rows;
  }();
  for (const auto& [name, kernel] : *served) {
    if (name == op.operator_name()) return kernel;
  }
  return nullptr;
}

void register_library_ops(const std::string& ns) {
  std::lock_guard<std::mutex> lock(library_ops_mutex);
  static std::set<std::string> registered;
  if (!registered.insert(ns).second) return;
  // Lives as long as the process: the library's kernels stay registered.
  auto* library = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  const std::string prefix = ns + "::";
  for (const auto& entry : library_rows()) {
    std::istringstream in(entry.overloads);
    for (std::string name; in >> name;) {
      if (name.rfind(prefix, 0) != 0) continue;
      library->impl(name.substr(prefix.size()).c_str(),
                    torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredKernel>(&entry)));
      registered_library_ops.push_back(name);
    }
  }
}

void register_missing_meta_kernels() {
  // Registered now, at import, not statically: whether PyTorch has a Meta
  // kernel is known only once its Python meta registrations have run.
  static torch::Library* library = nullptr;
  for_each_row_overload([&](const OpSpec& row, const std::string& name) {
    if (!row.meta.kernel) return;
    auto op = c10::Dispatcher::singleton().findOp(aten_operator(name));
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::Meta)) return;
    if (!library)
      library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    library->impl(name.c_str(), missing_meta_kernel(row.meta.kernel));
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Creation, views, copies: metadata or transfers, no lowering; ops whose
  // result size depends on values (nonzero, masked_select) sync first.
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("_unique", TORCH_FN(unique));
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("bincount", TORCH_FN(bincount));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("equal", TORCH_FN(equal));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tensor));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("tril_indices", TORCH_FN(tril_indices));
  m.impl("triu_indices", TORCH_FN(triu_indices));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive));
  m.impl("unique_dim", TORCH_FN(unique_dim));
  m.impl("view", TORCH_FN(view));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
  m.impl("view_as_real", TORCH_FN(view_as_real));

  for_each_row_overload([&](const OpSpec& row, const std::string& name) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredKernel>(&row)));
  });
  for (const auto& entry : kHandWrittenOps) m.impl(entry.overload, entry.kernel());
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  for (const auto& entry : kNestedTensorOps) m.impl(entry.overload, entry.kernel());
}

// Conjugate and negative views reach _copy_from as they are: PyTorch's
// generic fallback for those bits would materialize them through clone,
// which copies through _copy_from again, forever (a stack overflow).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_tpu::device
