// The rows of the registration table (csrc/device/rows/rows.h) for the
// _foreach_ ops optimizers call and GradScaler's _amp_ ops; their lowerings
// are in csrc/lower/ (foreach and amp). Above the rows, the checks, argument
// rewrites and meta kernels only these rows name.
#include "device/rows/rows.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "device/argument_checks.h"
#include "device/missing_meta_kernels.h"
#include "lower/amp.h"
#include "lower/foreach.h"
#include "lower/lowering.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// GradScaler's kernels take one-element float32 scale and found_inf tensors
// and an int32 growth tracker (AmpGradScalerKernels.cpp's messages).
void check_amp_update_scale(const c10::FunctionSchema&, const Args& args) {
  const at::Tensor *scale = tensor_at(args, 0), *tracker = tensor_at(args, 1), *found_inf = tensor_at(args, 2);
  if (!scale || !tracker || !found_inf) return;
  TORCH_CHECK(scale->numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(tracker->numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(found_inf->numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(tracker->scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(scale->scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf->scalar_type() == at::kFloat, "found_inf must be a float tensor.");
}

// Fused optimizer steps: in place, returning nothing.
// Fused optimizer steps: in place on their arguments, returning nothing, so
// there are no result shapes to infer.
void updates_in_place_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    {L::amp_foreach_non_finite_check_and_unscale, "_amp_foreach_non_finite_check_and_unscale_"},
    OpSpec(L::amp_update_scale, "_amp_update_scale_").check(check_amp_update_scale),
    OpSpec(L::foreach_abs, "_foreach_abs _foreach_abs_").foreach_op(),
    OpSpec(L::foreach_add,
           "_foreach_add.Scalar _foreach_add_.Scalar _foreach_add.List _foreach_add_.List _foreach_add.ScalarList "
           "_foreach_add_.ScalarList _foreach_add.Tensor _foreach_add_.Tensor")
        .foreach_op(),
    OpSpec(L::foreach_addcdiv,
           "_foreach_addcdiv.Scalar _foreach_addcdiv_.Scalar _foreach_addcdiv.ScalarList _foreach_addcdiv_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_addcmul,
           "_foreach_addcmul.Scalar _foreach_addcmul_.Scalar _foreach_addcmul.ScalarList _foreach_addcmul_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_ceil, "_foreach_ceil _foreach_ceil_").foreach_op(),
    OpSpec(L::foreach_clamp_max,
           "_foreach_clamp_max.Scalar _foreach_clamp_max_.Scalar _foreach_clamp_max.List _foreach_clamp_max_.List "
           "_foreach_clamp_max.ScalarList _foreach_clamp_max_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_clamp_min,
           "_foreach_clamp_min.Scalar _foreach_clamp_min_.Scalar _foreach_clamp_min.List _foreach_clamp_min_.List "
           "_foreach_clamp_min.ScalarList _foreach_clamp_min_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_clone, "_foreach_clone").foreach_op(),
    OpSpec(L::foreach_copy, "_foreach_copy _foreach_copy_").foreach_op(),
    OpSpec(L::foreach_cos, "_foreach_cos _foreach_cos_").foreach_op(),
    OpSpec(L::foreach_div,
           "_foreach_div.Scalar _foreach_div_.Scalar _foreach_div.List _foreach_div_.List _foreach_div.ScalarList "
           "_foreach_div_.ScalarList _foreach_div.Tensor _foreach_div_.Tensor")
        .foreach_op(),
    OpSpec(L::foreach_erf, "_foreach_erf _foreach_erf_").foreach_op(),
    OpSpec(L::foreach_exp, "_foreach_exp _foreach_exp_").foreach_op(),
    OpSpec(L::foreach_expm1, "_foreach_expm1 _foreach_expm1_").foreach_op(),
    OpSpec(L::foreach_floor, "_foreach_floor _foreach_floor_").foreach_op(),
    OpSpec(L::foreach_lerp,
           "_foreach_lerp.List _foreach_lerp_.List _foreach_lerp.Scalar _foreach_lerp_.Scalar _foreach_lerp.ScalarList "
           "_foreach_lerp_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_log, "_foreach_log _foreach_log_").foreach_op(),
    OpSpec(L::foreach_log1p, "_foreach_log1p _foreach_log1p_").foreach_op(),
    OpSpec(L::foreach_log2, "_foreach_log2 _foreach_log2_").foreach_op(),
    OpSpec(L::foreach_max, "_foreach_max").foreach_op(),
    OpSpec(L::foreach_maximum,
           "_foreach_maximum.Scalar _foreach_maximum_.Scalar _foreach_maximum.List _foreach_maximum_.List "
           "_foreach_maximum.ScalarList _foreach_maximum_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_minimum,
           "_foreach_minimum.Scalar _foreach_minimum_.Scalar _foreach_minimum.List _foreach_minimum_.List "
           "_foreach_minimum.ScalarList _foreach_minimum_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_mul,
           "_foreach_mul.Scalar _foreach_mul_.Scalar _foreach_mul.List _foreach_mul_.List _foreach_mul.ScalarList "
           "_foreach_mul_.ScalarList _foreach_mul.Tensor _foreach_mul_.Tensor")
        .foreach_op(),
    OpSpec(L::foreach_neg, "_foreach_neg _foreach_neg_").foreach_op(),
    OpSpec(L::foreach_norm, "_foreach_norm.Scalar").foreach_op(),
    OpSpec(L::foreach_pow,
           "_foreach_pow.List _foreach_pow_.List _foreach_pow.Scalar _foreach_pow_.Scalar _foreach_pow.ScalarList "
           "_foreach_pow_.ScalarList _foreach_pow.ScalarAndTensor")
        // Not floats_in(): an exponent picks pow's formula (x * x for 2,
        // sqrt for 0.5, ones for 0), so a program serves only its own, as
        // pow's row bakes them. Optimizers pass constant bases and exponents.
        .meta_ignores_numbers(),
    OpSpec(L::foreach_reciprocal, "_foreach_reciprocal _foreach_reciprocal_").foreach_op(),
    OpSpec(L::foreach_round, "_foreach_round _foreach_round_").foreach_op(),
    OpSpec(L::foreach_rsqrt, "_foreach_rsqrt _foreach_rsqrt_").foreach_op(),
    OpSpec(L::foreach_sigmoid, "_foreach_sigmoid _foreach_sigmoid_").foreach_op(),
    OpSpec(L::foreach_sign, "_foreach_sign _foreach_sign_").foreach_op(),
    OpSpec(L::foreach_sin, "_foreach_sin _foreach_sin_").foreach_op(),
    OpSpec(L::foreach_sqrt, "_foreach_sqrt _foreach_sqrt_").foreach_op(),
    OpSpec(L::foreach_sub,
           "_foreach_sub.Scalar _foreach_sub_.Scalar _foreach_sub.List _foreach_sub_.List _foreach_sub.ScalarList "
           "_foreach_sub_.ScalarList")
        .foreach_op(),
    OpSpec(L::foreach_tan, "_foreach_tan _foreach_tan_").foreach_op(),
    OpSpec(L::foreach_tanh, "_foreach_tanh _foreach_tanh_").foreach_op(),
    OpSpec(L::foreach_trunc, "_foreach_trunc _foreach_trunc_").foreach_op(),
    OpSpec(L::foreach_zero, "_foreach_zero _foreach_zero_").foreach_op(),
    OpSpec(L::fused_adam, "_fused_adam_ _fused_adam_.tensor_lr").meta_from(updates_in_place_meta),
    OpSpec(L::fused_adamw, "_fused_adamw_ _fused_adamw_.tensor_lr").meta_from(updates_in_place_meta),
    OpSpec(L::fused_sgd, "_fused_sgd_ _fused_sgd_.tensor_lr").meta_from(updates_in_place_meta),
};

}  // namespace

std::span<const OpSpec> optimizer_rows() { return kRows; }

}  // namespace torch_tpu::device
