// Argument checks PyTorch's CPU and CUDA kernels make before they compute
// and its meta kernels skip (or make with another exception type). Every
// lowered op runs its row's checks first (csrc/device/op_spec.h), so bad
// input raises the exception a CUDA user would see, at the call that made it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>

#include <vector>

#include "device/op_spec.h"

namespace torch_tpu::device {

// The op's checks: what its written tensors may overlap, its dtype gap, then
// its row's checks.
void check_arguments(const OpSpec& spec, const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// The tensors of an argument (a Tensor, Tensor[] or Tensor?[]).
void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out);

// Whether the schema marks the argument as written (in-place self, out=).
bool writes_argument(const c10::Argument& a);

// ---- the checks rows name (OpSpec::checks); each says what it follows ----
void check_inplace_castable(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_inplace_division_castable(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_subtraction_operands(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_rounding_division_real(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_dtypes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_select_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_extreme_of_empty(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_cat_inputs(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_complex_parts(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_clamp_bounds(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_mm(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_addmm(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_addmv(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_dot(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_matrix_exp(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_ldl_solve(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_dim_of_self(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_convolution_types(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_arange_bounds(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_add_types(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_put(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_put_types(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_nll_target_type(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_nll_loss_shapes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_real_operands(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_upsample_sizes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_real_clamp(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_relu_of_bool(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_sortable(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_bce_dtypes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_loss_common_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_kthvalue_dim(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_advanced_index_shapes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_select_dim(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_gather_dim(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_not_complex(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_norm_parameter_dtypes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_scatter_dim(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_embedding_bag_rows(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_arg_extreme_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_replication_pad_sizes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_pad_not_bool(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_adaptive_pool_input(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_copy_types(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_index_fill_index(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_topk_k(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_scan_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_upsample_nearest_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_bernoulli_probability_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_addcdiv_integer_division(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_std_var_dtype(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_layer_norm_parameters(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_masked_fill_mask(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_single_value(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_where_condition(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void normalize_where_condition(std::vector<c10::IValue>& args);
void normalize_clamp_bounds(std::vector<c10::IValue>& args);
void normalize_clamp_min_bound(std::vector<c10::IValue>& args);
void normalize_clamp_max_bound(std::vector<c10::IValue>& args);
void check_lerp_dtypes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_multinomial_distribution(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
void check_amp_update_scale(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// Dtype gaps' predicates (OpSpec::dtype_gap): of the first argument's dtype.
bool floating(at::ScalarType t);
bool floating_or_complex(at::ScalarType t);
bool not_bool(at::ScalarType t);
bool real_not_bool(at::ScalarType t);
bool floating_or_int64(at::ScalarType t);
bool not_floating(at::ScalarType t);

}  // namespace torch_tpu::device
