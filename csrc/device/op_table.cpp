// The one registration table: every ATen overload `tpu` implements, the
// lowering behind it, and every other rule the device applies to it (argument
// and Debug checks, meta corrections, op cache policy: csrc/device/op_spec.h).
// Sorted by lowering name. Composite ops (linear,
// cross_entropy, layer_norm, softmax ...) are not listed: PyTorch decomposes
// them into these before they reach the device, and autograd differentiates
// the decomposition.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <mutex>
#include <set>
#include <sstream>

#include "device/argument_checks.h"
#include "device/core_kernels.h"
#include "device/data_dependent_kernels.h"
#include "device/debug_checks.h"
#include "device/index_arguments.h"
#include "device/jagged_arguments.h"
#include "device/meta_inference.h"
#include "device/missing_meta_kernels.h"
#include "device/op_spec.h"
#include "exec/lowered_kernel.h"
#include "lower/activation.h"
#include "lower/amp.h"
#include "lower/attention.h"
#include "lower/batch_norm.h"
#include "lower/complex_construct.h"
#include "lower/conv.h"
#include "lower/creation.h"
#include "lower/distance.h"
#include "lower/elementwise.h"
#include "lower/fft.h"
#include "lower/foreach.h"
#include "lower/group_norm.h"
#include "lower/im2col.h"
#include "lower/index.h"
#include "lower/index_reduce.h"
#include "lower/jagged.h"
#include "lower/linalg.h"
#include "lower/loss.h"
#include "lower/math.h"
#include "lower/matmul.h"
#include "lower/norm.h"
#include "lower/padding.h"
#include "lower/pointwise_loss.h"
#include "lower/pool.h"
#include "lower/random.h"
#include "lower/reduce.h"
#include "lower/resample.h"
#include "lower/rnn.h"
#include "lower/scan.h"
#include "lower/shape.h"
#include "lower/sort.h"
#include "lower/special.h"
#include "lower/statistics.h"
#include "lower/unfold_backward.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// One row per lowering (csrc/device/op_spec.h): its overloads, then every
// rule the device applies to them besides the lowering.
const OpSpec kLoweredOps[] = {
    {L::abs, "abs abs_ abs.out"},
    {L::acos, "acos acos_ acos.out"},
    {L::acosh, "acosh acosh_ acosh.out"},
    {L::amp_foreach_non_finite_check_and_unscale, "_amp_foreach_non_finite_check_and_unscale_"},
    OpSpec(L::amp_update_scale, "_amp_update_scale_").check(check_amp_update_scale),
    OpSpec(L::adaptive_avg_pool,
           "_adaptive_avg_pool2d _adaptive_avg_pool2d.out _adaptive_avg_pool3d _adaptive_avg_pool3d.out")
        .check(check_adaptive_pool_input),
    {L::adaptive_avg_pool2d_backward, "_adaptive_avg_pool2d_backward _adaptive_avg_pool2d_backward.out"},
    {L::adaptive_avg_pool3d_backward, "_adaptive_avg_pool3d_backward _adaptive_avg_pool3d_backward.out"},
    {L::adaptive_max_pool, "adaptive_max_pool2d adaptive_max_pool2d.out adaptive_max_pool3d adaptive_max_pool3d.out"},
    {L::adaptive_max_pool2d_backward, "adaptive_max_pool2d_backward adaptive_max_pool2d_backward.grad_input"},
    {L::adaptive_max_pool3d_backward, "adaptive_max_pool3d_backward adaptive_max_pool3d_backward.grad_input"},
    OpSpec(L::add, "add.Tensor add_.Tensor add.out add.Scalar add_.Scalar").check(check_inplace_castable).floats_in(),
    {L::addbmm, "addbmm addbmm_ addbmm.out"},
    OpSpec(L::addcdiv, "addcdiv addcdiv_ addcdiv.out")
        .check(check_addcdiv_integer_division)
        .check(check_inplace_castable)
        .floats_in(),
    OpSpec(L::addcmul, "addcmul addcmul_ addcmul.out").check(check_inplace_castable).floats_in(),
    OpSpec(L::addmm, "addmm addmm_ addmm.out").gap_after_checks("addmm", not_bool).check(check_addmm),
    OpSpec(L::addmv, "addmv addmv_ addmv.out").check(check_addmv),
    {L::all, "all all.dim all.dims all.out all.all_out all.dims_out"},
    OpSpec(L::amax, "amax amax.out").check(check_extreme_of_empty).check(check_not_complex),
    OpSpec(L::amin, "amin amin.out").check(check_extreme_of_empty).check(check_not_complex),
    OpSpec(L::aminmax, "aminmax aminmax.out").check(check_extreme_of_empty),
    {L::angle, "angle angle.out"},
    {L::any, "any any.dim any.dims any.out any.all_out any.dims_out"},
    OpSpec(L::arange, "arange.start_out").check(check_arange_bounds),
    OpSpec(L::argmax, "argmax argmax.out").check(check_arg_extreme_dtype).check(check_extreme_of_empty),
    OpSpec(L::argmin, "argmin argmin.out").check(check_arg_extreme_dtype).check(check_extreme_of_empty),
    OpSpec(L::assert_async, "_assert_async _assert_async.msg").check(check_single_value),
    {L::asin, "asin asin_ asin.out"},
    {L::asinh, "asinh asinh_ asinh.out"},
    {L::atan, "atan atan_ atan.out"},
    OpSpec(L::atan2, "atan2 atan2_ atan2.out").check(check_not_complex).check(check_inplace_castable),
    {L::atanh, "atanh atanh_ atanh.out"},
    OpSpec(L::avg_pool, "avg_pool2d avg_pool2d.out").gap("avg_pool2d", floating_or_int64),
    OpSpec(L::avg_pool, "avg_pool3d avg_pool3d.out").gap("avg_pool3d_out_frame", floating_or_int64),
    {L::avg_pool_backward,
     "avg_pool2d_backward avg_pool2d_backward.grad_input avg_pool3d_backward avg_pool3d_backward.grad_input"},
    {L::baddbmm, "baddbmm baddbmm_ baddbmm.out"},
    {L::batch_norm_with_update, "_batch_norm_with_update"},
    OpSpec(L::bernoulli, "bernoulli bernoulli_.float bernoulli_.Tensor").check(check_bernoulli_probability_dtype),
    OpSpec(L::binary_cross_entropy, "binary_cross_entropy binary_cross_entropy.out")
        .gap_after_checks("binary_cross_entropy", floating)
        .check(check_bce_dtypes),
    {L::binary_cross_entropy_backward, "binary_cross_entropy_backward binary_cross_entropy_backward.grad_input"},
    OpSpec(L::bitwise_and, "bitwise_and.Tensor bitwise_and_.Tensor bitwise_and.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    OpSpec(L::bitwise_left_shift,
           "bitwise_left_shift.Tensor bitwise_left_shift_.Tensor bitwise_left_shift.Tensor_out "
           "bitwise_left_shift.Tensor_Scalar bitwise_left_shift_.Tensor_Scalar bitwise_left_shift.Tensor_Scalar_out "
           "bitwise_left_shift.Scalar_Tensor bitwise_left_shift.Scalar_Tensor_out __lshift__.Tensor __lshift__.Scalar "
           "__ilshift__.Tensor __ilshift__.Scalar")
        .gap("lshift", not_floating),
    {L::bitwise_not, "bitwise_not bitwise_not_ bitwise_not.out"},
    OpSpec(L::bitwise_or, "bitwise_or.Tensor bitwise_or_.Tensor bitwise_or.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    OpSpec(L::bitwise_right_shift,
           "bitwise_right_shift.Tensor bitwise_right_shift_.Tensor bitwise_right_shift.Tensor_out "
           "bitwise_right_shift.Tensor_Scalar bitwise_right_shift_.Tensor_Scalar bitwise_right_shift.Tensor_Scalar_out "
           "bitwise_right_shift.Scalar_Tensor bitwise_right_shift.Scalar_Tensor_out __rshift__.Tensor "
           "__rshift__.Scalar __irshift__.Tensor __irshift__.Scalar")
        .gap("rshift", not_floating),
    OpSpec(L::bitwise_xor, "bitwise_xor.Tensor bitwise_xor_.Tensor bitwise_xor.Tensor_out")
        .check(check_not_complex)
        .check(check_inplace_castable),
    {L::bmm, "bmm bmm.out"},
    {L::bucketize, "bucketize.Tensor bucketize.Tensor_out bucketize.Scalar bucketize.Scalar_out"},
    OpSpec(L::cat, "cat cat.out").check(check_cat_inputs).overlap(WriteOverlap::Disjoint),
    {L::cauchy, "cauchy_ cauchy cauchy.out"},
    {L::cdist_backward, "_cdist_backward _cdist_backward.out"},
    {L::cdist_forward, "_cdist_forward _cdist_forward.out"},
    {L::ceil, "ceil ceil_ ceil.out"},
    {L::channel_shuffle, "channel_shuffle channel_shuffle.out"},
    {L::cholesky_inverse, "cholesky_inverse cholesky_inverse.out"},
    {L::cholesky_solve_helper, "_cholesky_solve_helper _cholesky_solve_helper.out"},
    OpSpec(L::clamp, "clamp clamp_ clamp.out clamp.Tensor clamp_.Tensor clamp.Tensor_out")
        .normalize(normalize_clamp_bounds)
        .check(check_clamp_bounds)
        .check(check_inplace_castable),
    OpSpec(L::clamp_max, "clamp_max clamp_max_ clamp_max.out clamp_max.Tensor clamp_max_.Tensor clamp_max.Tensor_out")
        .normalize(normalize_clamp_max_bound)
        .check(check_real_clamp)
        .check(check_inplace_castable),
    OpSpec(L::clamp_min, "clamp_min clamp_min_ clamp_min.out clamp_min.Tensor clamp_min_.Tensor clamp_min.Tensor_out")
        .normalize(normalize_clamp_min_bound)
        .check(check_real_clamp)
        .check(check_inplace_castable),
    {L::col2im, "col2im col2im.out"},
    OpSpec(L::complex, "complex complex.out").check(check_complex_parts),
    {L::conj_physical, "conj_physical.out conj_physical_ _conj_physical _conj_physical.out"},
    // The overrideable twins at::_convolution calls for PrivateUse1 have no meta kernel.
    OpSpec(L::convolution, "convolution convolution.out")
        .check(check_convolution_types)
        .correct(convolution_result_format),
    {L::convolution_backward, "convolution_backward"},
    {L::copysign, "copysign.Tensor copysign_.Tensor copysign.out copysign.Scalar copysign_.Scalar copysign.Scalar_out"},
    {L::cos, "cos cos_ cos.out"},
    {L::cosh, "cosh cosh_ cosh.out"},
    {L::count_nonzero, "count_nonzero.dim_IntList count_nonzero.dim_IntList_out"},
    {L::cummax, "cummax cummax.out"},
    {L::cummin, "cummin cummin.out"},
    OpSpec(L::cumprod, "cumprod cumprod_ cumprod.out").check(check_scan_dtype),
    OpSpec(L::cumsum, "cumsum cumsum_ cumsum.out").check(check_scan_dtype),
    {L::digamma, "digamma digamma_ digamma.out"},
    OpSpec(L::div, "div.Tensor div_.Tensor div.out div.Tensor_mode div_.Tensor_mode div.out_mode")
        .check(check_rounding_division_real)
        .check(check_inplace_division_castable)
        .floats_in(),
    OpSpec(L::dot, "dot dot.out").check(check_dot),
    {L::elu, "elu elu_ elu.out"},
    {L::elu_backward, "elu_backward elu_backward.grad_input"},
    OpSpec(L::embedding_bag, "_embedding_bag _embedding_bag_forward_only").check(check_embedding_bag_rows),
    {L::embedding_bag_backward, "_embedding_bag_backward"},
    {L::embedding_bag_dense_backward, "_embedding_bag_dense_backward"},
    {L::embedding_bag_per_sample_weights_backward, "_embedding_bag_per_sample_weights_backward"},
    {L::embedding_dense_backward, "embedding_dense_backward"},
    {L::embedding_renorm, "embedding_renorm embedding_renorm_ embedding_renorm.out"},
    {L::eq, "eq.Tensor eq_.Tensor eq.Tensor_out eq.Scalar eq_.Scalar eq.Scalar_out"},
    {L::erf, "erf erf_ erf.out"},
    {L::erfc, "erfc erfc_ erfc.out"},
    {L::erfinv, "erfinv erfinv_ erfinv.out"},
    {L::exp, "exp exp_ exp.out"},
    {L::exp2, "exp2 exp2_ exp2.out"},
    {L::expm1, "expm1 expm1_ expm1.out"},
    {L::exponential, "exponential_ exponential exponential.out"},
    {L::eye, "eye.out eye.m_out"},
    {L::fft_c2c, "_fft_c2c _fft_c2c.out"},
    {L::fft_c2r, "_fft_c2r _fft_c2r.out"},
    {L::fft_r2c, "_fft_r2c _fft_r2c.out"},
    // fill_ with a number writes one value; fill_.Tensor writes through copy_ (no expanded self), after ATen's
    // kernel cloned a value that aliases self.
    OpSpec(L::fill, "fill_.Scalar").overlap(WriteOverlap::OneValue).floats_in(),
    OpSpec(L::fill, "fill_.Tensor").overlap(WriteOverlap::InputsCopiedFirst).floats_in(),
    {L::flip, "flip flip.out"},
    {L::floor, "floor floor_ floor.out"},
    OpSpec(L::floor_divide, "floor_divide floor_divide_.Tensor floor_divide.out").gap("div_floor", not_bool),
    OpSpec(L::fmax, "fmax fmax.out").check(check_real_operands),
    OpSpec(L::fmin, "fmin fmin.out").check(check_real_operands),
    OpSpec(L::fmod, "fmod.Tensor fmod_.Tensor fmod.Tensor_out").check(check_inplace_castable),
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
        .foreach_op(),
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
    {L::frac, "frac frac_ frac.out"},
    {L::fractional_max_pool,
     "fractional_max_pool2d fractional_max_pool2d.output fractional_max_pool3d fractional_max_pool3d.output"},
    OpSpec(L::fractional_max_pool_backward,
           "fractional_max_pool2d_backward fractional_max_pool2d_backward.grad_input fractional_max_pool3d_backward "
           "fractional_max_pool3d_backward.grad_input")
        .meta_from(MetaSource::LikeSelf),  // PyTorch has 2d's
    {L::frexp, "frexp.Tensor frexp.Tensor_out"},
    OpSpec(L::fused_adam, "_fused_adam_ _fused_adam_.tensor_lr").meta_from(MetaSource::UpdatesInPlace),
    OpSpec(L::fused_adamw, "_fused_adamw_ _fused_adamw_.tensor_lr").meta_from(MetaSource::UpdatesInPlace),
    OpSpec(L::fused_sgd, "_fused_sgd_ _fused_sgd_.tensor_lr").meta_from(MetaSource::UpdatesInPlace),
    OpSpec(L::gather, "gather gather.out").check(check_gather_dim).debug(check_dim_index_range),
    {L::gcd, "gcd gcd_ gcd.out"},
    OpSpec(L::ge, "ge.Tensor ge_.Tensor ge.Tensor_out ge.Scalar ge_.Scalar ge.Scalar_out").check(check_not_complex),
    {L::gelu, "gelu gelu_ gelu.out"},
    {L::gelu_backward, "gelu_backward gelu_backward.grad_input"},
    {L::geometric, "geometric_ geometric geometric.out"},
    {L::geqrf, "geqrf geqrf.a"},
    {L::glu, "glu glu.out"},
    {L::glu_backward, "glu_backward glu_backward.grad_input"},
    {L::grid_sampler, "grid_sampler_2d grid_sampler_2d.out grid_sampler_3d grid_sampler_3d.out"},
    {L::grid_sampler_backward,
     "grid_sampler_2d_backward grid_sampler_2d_backward.out grid_sampler_3d_backward grid_sampler_3d_backward.out"},
    OpSpec(L::grouped_mm, "_grouped_mm").meta_from(MetaSource::GroupedMm),
    OpSpec(L::gt, "gt.Tensor gt_.Tensor gt.Tensor_out gt.Scalar gt_.Scalar gt.Scalar_out").check(check_not_complex),
    {L::hardshrink, "hardshrink hardshrink.out"},
    {L::hardshrink_backward, "hardshrink_backward hardshrink_backward.grad_input"},
    {L::hardsigmoid, "hardsigmoid hardsigmoid_ hardsigmoid.out"},
    {L::hardsigmoid_backward, "hardsigmoid_backward hardsigmoid_backward.grad_input"},
    {L::hardswish, "hardswish hardswish_ hardswish.out"},
    {L::hardswish_backward, "hardswish_backward hardswish_backward.out"},
    OpSpec(L::hardtanh, "hardtanh hardtanh_ hardtanh.out").check(check_real_clamp),
    {L::hardtanh_backward, "hardtanh_backward hardtanh_backward.grad_input"},
    {L::hash_tensor, "hash_tensor hash_tensor.out"},
    {L::heaviside, "heaviside heaviside_ heaviside.out"},
    OpSpec(L::huber_loss, "huber_loss huber_loss.out").check(check_loss_common_dtype),
    {L::huber_loss_backward, "huber_loss_backward huber_loss_backward.out"},
    {L::histc, "histc histc.out"},
    OpSpec(L::histogram_bin_ct, "histogram.bin_ct").meta_from(MetaSource::Histogram),
    OpSpec(L::histogram_bins_tensor, "histogram.bins_tensor").meta_from(MetaSource::Histogram),
    OpSpec(L::histogramdd_bin_edges, "_histogramdd_bin_edges").meta_from(MetaSource::Histogram),
    OpSpec(L::histogramdd_from_bin_cts, "_histogramdd_from_bin_cts").meta_from(MetaSource::Histogram),
    OpSpec(L::histogramdd_from_bin_tensors, "_histogramdd_from_bin_tensors").meta_from(MetaSource::Histogram),
    {L::hypot, "hypot hypot_ hypot.out"},
    {L::i0, "i0 i0_ i0.out"},
    {L::igamma, "igamma igamma_ igamma.out"},
    {L::igammac, "igammac igammac_ igammac.out"},
    {L::im2col, "im2col im2col.out"},
    OpSpec(L::index, "index.Tensor index.Tensor_out")
        .normalize(normalize_index_arguments)
        .check(check_index_dtypes)
        .check(check_advanced_index_shapes)
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
        .check(check_advanced_index_shapes)
        .debug(check_advanced_index_ranges),
    {L::index_reduce, "index_reduce index_reduce_ index_reduce.out"},
    OpSpec(L::index_select, "index_select index_select.out")
        .check(check_index_select_dtype)
        .check(check_index_select_dim)
        .debug(check_dim_index_range_index_error),
    {L::isin,
     "isin.Tensor_Tensor isin.Tensor_Tensor_out isin.Tensor_Scalar isin.Tensor_Scalar_out isin.Scalar_Tensor "
     "isin.Scalar_Tensor_out"},
    {L::isinf, "isinf"},
    {L::isnan, "isnan"},
    {L::isneginf, "isneginf isneginf.out"},
    {L::isposinf, "isposinf isposinf.out"},
    OpSpec(L::kthvalue, "kthvalue kthvalue.values")
        .gap_unless_empty("kthvalue_cpu", real_not_bool)
        .check(check_kthvalue_dim),
    {L::lcm, "lcm lcm_ lcm.out"},
    OpSpec(L::le, "le.Tensor le_.Tensor le.Tensor_out le.Scalar le_.Scalar le.Scalar_out").check(check_not_complex),
    {L::leaky_relu, "leaky_relu leaky_relu_ leaky_relu.out"},
    {L::leaky_relu_backward, "leaky_relu_backward leaky_relu_backward.grad_input"},
    OpSpec(L::lerp, "lerp.Scalar lerp_.Scalar lerp.Scalar_out lerp.Tensor lerp_.Tensor lerp.Tensor_out")
        .gap_after_checks("lerp", floating_or_complex)
        .check(check_lerp_dtypes)
        .check(check_inplace_castable)
        .floats_in(),
    {L::lgamma, "lgamma lgamma_ lgamma.out"},
    {L::linalg_cholesky_ex, "linalg_cholesky_ex linalg_cholesky_ex.L"},
    OpSpec(L::linalg_cross, "linalg_cross linalg_cross.out").gap("cross", not_bool),
    {L::linalg_det, "_linalg_det _linalg_det.result"},
    {L::linalg_eigh, "_linalg_eigh _linalg_eigh.eigenvalues"},
    {L::linalg_householder_product, "linalg_householder_product linalg_householder_product.out"},
    {L::linalg_inv_ex, "linalg_inv_ex linalg_inv_ex.inverse"},
    {L::linalg_ldl_factor_ex, "linalg_ldl_factor_ex linalg_ldl_factor_ex.out"},
    OpSpec(L::linalg_ldl_solve, "linalg_ldl_solve linalg_ldl_solve.out").check(check_ldl_solve),
    {L::linalg_lu, "linalg_lu linalg_lu.out"},
    {L::linalg_lu_factor_ex, "linalg_lu_factor_ex linalg_lu_factor_ex.out"},
    {L::linalg_lu_solve, "linalg_lu_solve linalg_lu_solve.out"},
    OpSpec(L::linalg_matrix_exp, "linalg_matrix_exp linalg_matrix_exp.out").check(check_matrix_exp),
    {L::linalg_qr, "linalg_qr linalg_qr.out"},
    {L::linalg_slogdet, "_linalg_slogdet _linalg_slogdet.sign"},
    {L::linalg_solve_ex, "_linalg_solve_ex _linalg_solve_ex.result"},
    {L::linalg_solve_triangular, "linalg_solve_triangular linalg_solve_triangular.out"},
    {L::linalg_svd, "_linalg_svd _linalg_svd.U"},
    {L::linalg_vector_norm, "linalg_vector_norm linalg_vector_norm.out"},
    {L::linspace, "linspace.out"},
    {L::log, "log log_ log.out"},
    {L::log10, "log10 log10_ log10.out"},
    {L::log1p, "log1p log1p_ log1p.out"},
    {L::log2, "log2 log2_ log2.out"},
    {L::log_normal, "log_normal_ log_normal log_normal.out"},
    {L::log_sigmoid_backward, "log_sigmoid_backward log_sigmoid_backward.grad_input"},
    {L::log_sigmoid_forward, "log_sigmoid_forward log_sigmoid_forward.output"},
    OpSpec(L::log_softmax, "_log_softmax _log_softmax.out").gap_unless_empty("log_softmax", floating),
    {L::log_softmax_backward, "_log_softmax_backward_data _log_softmax_backward_data.out"},
    {L::logaddexp, "logaddexp logaddexp.out"},
    {L::logaddexp2, "logaddexp2 logaddexp2.out"},
    OpSpec(L::logcumsumexp, "logcumsumexp logcumsumexp.out").gap("logcumsumexp", floating_or_complex),
    {L::logical_and, "logical_and logical_and_ logical_and.out"},
    {L::logical_not, "logical_not logical_not_ logical_not.out"},
    {L::logical_or, "logical_or logical_or_ logical_or.out"},
    {L::logical_xor, "logical_xor logical_xor_ logical_xor.out"},
    {L::logit, "logit logit_ logit.out"},
    {L::logit_backward, "logit_backward logit_backward.grad_input"},
    {L::logspace, "logspace.out"},
    {L::logsumexp, "logsumexp logsumexp.out"},
    OpSpec(L::lt, "lt.Tensor lt_.Tensor lt.Tensor_out lt.Scalar lt_.Scalar lt.Scalar_out").check(check_not_complex),
    {L::lu_unpack, "lu_unpack lu_unpack.out"},
    OpSpec(L::masked_fill, "masked_fill.Scalar masked_fill_.Scalar masked_fill.Tensor masked_fill_.Tensor")
        .check(check_masked_fill_mask)
        .overlap(WriteOverlap::OneValue),
    {L::masked_scatter, "masked_scatter masked_scatter_ masked_scatter.out"},
    {L::max_all, "max max.unary_out"},
    OpSpec(L::max_dim, "max.dim max.dim_max").check(check_not_complex),
    {L::max_pool_with_indices,
     "max_pool2d_with_indices max_pool2d_with_indices.out max_pool3d_with_indices max_pool3d_with_indices.out"},
    {L::max_pool_with_indices_backward,
     "max_pool2d_with_indices_backward max_pool2d_with_indices_backward.grad_input max_pool3d_with_indices_backward "
     "max_pool3d_with_indices_backward.grad_input"},
    {L::max_unpool, "max_unpool2d max_unpool2d.out max_unpool3d max_unpool3d.out"},
    OpSpec(L::maximum, "maximum maximum.out").check(check_real_operands),
    {L::mean, "mean mean.dim mean.out"},
    {L::median_all, "median"},
    {L::median_dim, "median.dim median.dim_values"},
    {L::min_all, "min min.unary_out"},
    OpSpec(L::min_dim, "min.dim min.dim_min").check(check_not_complex),
    OpSpec(L::minimum, "minimum minimum.out").check(check_real_operands),
    {L::mish, "mish mish_ mish.out"},
    {L::mish_backward, "mish_backward"},
    OpSpec(L::mm, "mm mm.out").gap("mm", not_bool).check(check_mm),
    {L::mode, "mode mode.values"},
    OpSpec(L::mse_loss, "mse_loss mse_loss.out").check(check_loss_common_dtype),
    {L::mse_loss_backward, "mse_loss_backward mse_loss_backward.grad_input"},
    OpSpec(L::mul, "mul.Tensor mul_.Tensor mul.out mul.Scalar mul_.Scalar").check(check_inplace_castable).floats_in(),
    {L::multi_margin_loss, "multi_margin_loss multi_margin_loss.out"},
    OpSpec(L::multi_margin_loss_backward, "multi_margin_loss_backward multi_margin_loss_backward.grad_input")
        .meta_from(MetaSource::LikeSelf),
    OpSpec(L::multilabel_margin_loss_backward,
           "multilabel_margin_loss_backward multilabel_margin_loss_backward.grad_input")
        .meta_from(MetaSource::LikeSelf),
    {L::multilabel_margin_loss_forward, "multilabel_margin_loss_forward multilabel_margin_loss_forward.output"},
    OpSpec(L::multinomial, "multinomial multinomial.out").check(check_multinomial_distribution).reads_values(),
    {L::nan_to_num, "nan_to_num nan_to_num_ nan_to_num.out"},
    {L::nanmedian_all, "nanmedian"},
    {L::nanmedian_dim, "nanmedian.dim nanmedian.dim_values"},
    {L::nansum, "nansum nansum.out"},
    OpSpec(L::native_batch_norm, "native_batch_norm _native_batch_norm_legit")
        .gap_unless_empty("batch_norm", floating)
        .check(check_norm_parameter_dtypes)
        .writes({3, 4})
        .correct(empty_statistics_in_evaluation),
    {L::native_batch_norm_backward, "native_batch_norm_backward batch_norm_backward"},
    OpSpec(L::native_batch_norm_no_stats, "_native_batch_norm_legit.no_stats").gap_unless_empty("batch_norm", floating),
    OpSpec(L::native_batch_norm_no_training, "_native_batch_norm_legit_no_training")
        .gap_unless_empty("batch_norm", floating)
        .check(check_norm_parameter_dtypes),
    {L::native_dropout, "native_dropout"},
    {L::native_dropout_backward, "native_dropout_backward"},
    // Replaces the composite math_group_norm PyTorch would run on PrivateUse1.
    OpSpec(L::native_group_norm, "native_group_norm").check(check_norm_parameter_dtypes),
    {L::native_group_norm_backward, "native_group_norm_backward"},
    OpSpec(L::native_layer_norm, "native_layer_norm")
        .gap_after_checks("LayerNormKernelImpl", floating)
        .check(check_layer_norm_parameters),
    {L::native_layer_norm_backward, "native_layer_norm_backward"},
    {L::weight_norm_interface, "_weight_norm_interface"},
    {L::weight_norm_interface_backward, "_weight_norm_interface_backward"},
    {L::ne, "ne.Tensor ne_.Tensor ne.Tensor_out ne.Scalar ne_.Scalar ne.Scalar_out"},
    {L::neg, "neg neg_ neg.out"},
    {L::nextafter, "nextafter nextafter_ nextafter.out"},
    {L::nll_loss_backward,
     "nll_loss_backward nll_loss_backward.grad_input nll_loss2d_backward nll_loss2d_backward.grad_input"},
    OpSpec(L::nll_loss_forward, "nll_loss_forward nll_loss_forward.output")
        .gap("nll_loss_out_frame", floating)
        .check(check_nll_loss_shapes)
        .check(check_nll_target_type),
    OpSpec(L::nll_loss_forward, "nll_loss2d_forward nll_loss2d_forward.output")
        .gap("nll_loss2d_forward_out_frame", floating)
        .check(check_nll_target_type),
    {L::nonzero_static, "nonzero_static nonzero_static.out"},
    {L::norm,
     "norm.Scalar norm.Scalar_out norm.ScalarOpt_dim norm.out norm.ScalarOpt_dim_dtype norm.dtype_out "
     "norm.ScalarOpt_dtype norm.ScalarOpt_dtype_out"},
    OpSpec(L::normal, "normal_").gap("normal_kernel_cpu", floating_or_complex),
    {L::normal_tensor,
     "normal.Tensor_Tensor normal.Tensor_Tensor_out normal.Tensor_float normal.Tensor_float_out normal.float_Tensor "
     "normal.float_Tensor_out"},
    {L::pdist_backward, "_pdist_backward _pdist_backward.out"},
    {L::pdist_forward, "_pdist_forward _pdist_forward.out"},
    {L::polar, "polar polar.out"},
    {L::polygamma, "polygamma polygamma.out"},
    OpSpec(L::pow,
           "pow.Tensor_Tensor pow_.Tensor pow.Tensor_Tensor_out pow.Tensor_Scalar pow_.Scalar pow.Tensor_Scalar_out "
           "pow.Scalar pow.Scalar_out")
        .check(check_inplace_castable),
    {L::prelu_kernel, "_prelu_kernel"},
    {L::prelu_kernel_backward, "_prelu_kernel_backward"},
    {L::prod, "prod prod.dim_int prod.int_out"},
    OpSpec(L::put, "put put_ put.out").check(check_put_types),
    {L::random, "random_ random_.from random_.to"},
    {L::randperm, "randperm.generator_out randperm.out"},
    {L::reciprocal, "reciprocal reciprocal_ reciprocal.out"},
    OpSpec(L::reflection_pad,
           "reflection_pad1d reflection_pad1d.out reflection_pad2d reflection_pad2d.out reflection_pad3d "
           "reflection_pad3d.out")
        .check(check_pad_not_bool),
    {L::reflection_pad_backward,
     "reflection_pad1d_backward reflection_pad1d_backward.grad_input reflection_pad2d_backward "
     "reflection_pad2d_backward.grad_input reflection_pad3d_backward reflection_pad3d_backward.grad_input"},
    OpSpec(L::relu, "relu relu_").check(check_real_clamp).check(check_relu_of_bool),
    OpSpec(L::remainder, "remainder.Tensor remainder_.Tensor remainder.Tensor_out remainder.Scalar_Tensor")
        .check(check_inplace_castable),
    {L::renorm, "renorm renorm_ renorm.out"},
    OpSpec(L::replication_pad,
           "replication_pad1d replication_pad1d.out replication_pad2d replication_pad2d.out replication_pad3d "
           "replication_pad3d.out")
        .check(check_replication_pad_sizes)
        .check(check_pad_not_bool),
    {L::replication_pad_backward,
     "replication_pad1d_backward replication_pad1d_backward.grad_input replication_pad2d_backward "
     "replication_pad2d_backward.grad_input replication_pad3d_backward replication_pad3d_backward.grad_input"},
    {L::roll, "roll roll.out"},
    {L::round, "round round_ round.out"},
    {L::round_decimals, "round.decimals round_.decimals round.decimals_out"},
    {L::rrelu_with_noise, "rrelu_with_noise rrelu_with_noise_ rrelu_with_noise.out"},
    {L::rrelu_with_noise_backward, "rrelu_with_noise_backward rrelu_with_noise_backward.out"},
    {L::rsqrt, "rsqrt rsqrt_ rsqrt.out"},
    OpSpec(L::rsub, "rsub.Tensor").check(check_subtraction_operands).floats_in(),
    {L::scaled_dot_product_fused_attention, "_scaled_dot_product_fused_attention_overrideable"},
    OpSpec(L::scaled_dot_product_fused_attention_backward, "_scaled_dot_product_fused_attention_overrideable_backward")
        .meta_from(MetaSource::FusedAttentionBackward),
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
    OpSpec(L::searchsorted, "searchsorted.Tensor searchsorted.Tensor_out searchsorted.Scalar searchsorted.Scalar_out")
        .check(check_not_complex),
    {L::segment_reduce, "segment_reduce segment_reduce.out"},
    {L::segment_reduce_backward, "_segment_reduce_backward _segment_reduce_backward.out"},
    {L::sigmoid, "sigmoid sigmoid_ sigmoid.out"},
    {L::sigmoid_backward, "sigmoid_backward sigmoid_backward.grad_input"},
    // sgn == sign for real dtypes; only sgn takes complex numbers.
    OpSpec(L::sign, "sign sign_ sign.out").check(check_not_complex),
    {L::sign, "sgn sgn_ sgn.out"},
    {L::signbit, "signbit signbit.out"},
    {L::silu, "silu silu_ silu.out"},
    {L::silu_backward, "silu_backward silu_backward.grad_input"},
    {L::sin, "sin sin_ sin.out"},
    {L::sinc, "sinc sinc_ sinc.out"},
    {L::sinh, "sinh sinh_ sinh.out"},
    OpSpec(L::smooth_l1_loss, "smooth_l1_loss smooth_l1_loss.out").check(check_loss_common_dtype),
    {L::smooth_l1_loss_backward, "smooth_l1_loss_backward smooth_l1_loss_backward.grad_input"},
    OpSpec(L::softmax, "_softmax _softmax.out").gap_unless_empty("softmax", floating).check(check_dim_of_self),
    {L::softmax_backward, "_softmax_backward_data _softmax_backward_data.out"},
    {L::softplus, "softplus softplus.out"},
    {L::softplus_backward, "softplus_backward softplus_backward.grad_input"},
    {L::softshrink, "softshrink softshrink.out"},
    {L::softshrink_backward, "softshrink_backward softshrink_backward.grad_input"},
    OpSpec(L::sort, "sort sort.values sort.stable sort.values_stable").check(check_dim_of_self).check(check_sortable),
    {L::special_airy_ai, "special_airy_ai special_airy_ai.out"},
    {L::special_bessel_j0, "special_bessel_j0 special_bessel_j0.out"},
    {L::special_bessel_j1, "special_bessel_j1 special_bessel_j1.out"},
    {L::special_bessel_y0, "special_bessel_y0 special_bessel_y0.out"},
    {L::special_bessel_y1, "special_bessel_y1 special_bessel_y1.out"},
    {L::special_chebyshev_polynomial_t,
     "special_chebyshev_polynomial_t special_chebyshev_polynomial_t.out special_chebyshev_polynomial_t.x_scalar "
     "special_chebyshev_polynomial_t.x_scalar_out special_chebyshev_polynomial_t.n_scalar "
     "special_chebyshev_polynomial_t.n_scalar_out"},
    {L::special_chebyshev_polynomial_u,
     "special_chebyshev_polynomial_u special_chebyshev_polynomial_u.out special_chebyshev_polynomial_u.x_scalar "
     "special_chebyshev_polynomial_u.x_scalar_out special_chebyshev_polynomial_u.n_scalar "
     "special_chebyshev_polynomial_u.n_scalar_out"},
    {L::special_chebyshev_polynomial_v,
     "special_chebyshev_polynomial_v special_chebyshev_polynomial_v.out special_chebyshev_polynomial_v.x_scalar "
     "special_chebyshev_polynomial_v.x_scalar_out special_chebyshev_polynomial_v.n_scalar "
     "special_chebyshev_polynomial_v.n_scalar_out"},
    {L::special_chebyshev_polynomial_w,
     "special_chebyshev_polynomial_w special_chebyshev_polynomial_w.out special_chebyshev_polynomial_w.x_scalar "
     "special_chebyshev_polynomial_w.x_scalar_out special_chebyshev_polynomial_w.n_scalar "
     "special_chebyshev_polynomial_w.n_scalar_out"},
    {L::special_entr, "special_entr special_entr.out"},
    {L::special_erfcx, "special_erfcx special_erfcx.out"},
    {L::special_hermite_polynomial_h,
     "special_hermite_polynomial_h special_hermite_polynomial_h.out special_hermite_polynomial_h.x_scalar "
     "special_hermite_polynomial_h.x_scalar_out special_hermite_polynomial_h.n_scalar "
     "special_hermite_polynomial_h.n_scalar_out"},
    {L::special_hermite_polynomial_he,
     "special_hermite_polynomial_he special_hermite_polynomial_he.out special_hermite_polynomial_he.x_scalar "
     "special_hermite_polynomial_he.x_scalar_out special_hermite_polynomial_he.n_scalar "
     "special_hermite_polynomial_he.n_scalar_out"},
    {L::special_i0e, "special_i0e special_i0e.out"},
    {L::special_i1, "special_i1 special_i1.out"},
    {L::special_i1e, "special_i1e special_i1e.out"},
    {L::special_laguerre_polynomial_l,
     "special_laguerre_polynomial_l special_laguerre_polynomial_l.out special_laguerre_polynomial_l.x_scalar "
     "special_laguerre_polynomial_l.x_scalar_out special_laguerre_polynomial_l.n_scalar "
     "special_laguerre_polynomial_l.n_scalar_out"},
    {L::special_legendre_polynomial_p,
     "special_legendre_polynomial_p special_legendre_polynomial_p.out special_legendre_polynomial_p.x_scalar "
     "special_legendre_polynomial_p.x_scalar_out special_legendre_polynomial_p.n_scalar "
     "special_legendre_polynomial_p.n_scalar_out"},
    {L::special_log_ndtr, "special_log_ndtr special_log_ndtr.out"},
    {L::special_modified_bessel_i0, "special_modified_bessel_i0 special_modified_bessel_i0.out"},
    {L::special_modified_bessel_i1, "special_modified_bessel_i1 special_modified_bessel_i1.out"},
    {L::special_modified_bessel_k0, "special_modified_bessel_k0 special_modified_bessel_k0.out"},
    {L::special_modified_bessel_k1, "special_modified_bessel_k1 special_modified_bessel_k1.out"},
    {L::special_ndtri, "special_ndtri special_ndtri.out"},
    {L::special_scaled_modified_bessel_k0, "special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k0.out"},
    {L::special_scaled_modified_bessel_k1, "special_scaled_modified_bessel_k1 special_scaled_modified_bessel_k1.out"},
    {L::special_shifted_chebyshev_polynomial_t,
     "special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_t.out "
     "special_shifted_chebyshev_polynomial_t.x_scalar special_shifted_chebyshev_polynomial_t.x_scalar_out "
     "special_shifted_chebyshev_polynomial_t.n_scalar special_shifted_chebyshev_polynomial_t.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_u,
     "special_shifted_chebyshev_polynomial_u special_shifted_chebyshev_polynomial_u.out "
     "special_shifted_chebyshev_polynomial_u.x_scalar special_shifted_chebyshev_polynomial_u.x_scalar_out "
     "special_shifted_chebyshev_polynomial_u.n_scalar special_shifted_chebyshev_polynomial_u.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_v,
     "special_shifted_chebyshev_polynomial_v special_shifted_chebyshev_polynomial_v.out "
     "special_shifted_chebyshev_polynomial_v.x_scalar special_shifted_chebyshev_polynomial_v.x_scalar_out "
     "special_shifted_chebyshev_polynomial_v.n_scalar special_shifted_chebyshev_polynomial_v.n_scalar_out"},
    {L::special_shifted_chebyshev_polynomial_w,
     "special_shifted_chebyshev_polynomial_w special_shifted_chebyshev_polynomial_w.out "
     "special_shifted_chebyshev_polynomial_w.x_scalar special_shifted_chebyshev_polynomial_w.x_scalar_out "
     "special_shifted_chebyshev_polynomial_w.n_scalar special_shifted_chebyshev_polynomial_w.n_scalar_out"},
    {L::special_spherical_bessel_j0, "special_spherical_bessel_j0 special_spherical_bessel_j0.out"},
    {L::special_xlog1py,
     "special_xlog1py special_xlog1py.out special_xlog1py.other_scalar special_xlog1py.other_scalar_out "
     "special_xlog1py.self_scalar special_xlog1py.self_scalar_out"},
    {L::special_zeta,
     "special_zeta special_zeta.out special_zeta.other_scalar special_zeta.other_scalar_out special_zeta.self_scalar "
     "special_zeta.self_scalar_out"},
    {L::sqrt, "sqrt sqrt_ sqrt.out"},
    OpSpec(L::std, "std.correction std.correction_out").check(check_std_var_dtype),
    OpSpec(L::std_mean, "std_mean.correction std_mean.correction_out").check(check_std_var_dtype),
    OpSpec(L::sub, "sub.Tensor sub_.Tensor sub.out")
        .check(check_subtraction_operands)
        .check(check_inplace_castable)
        .floats_in(),
    {L::sum, "sum sum.dim_IntList sum.IntList_out"},
    OpSpec(L::take, "take take.out").overlap(WriteOverlap::Disjoint),
    {L::tan, "tan tan_ tan.out"},
    {L::tanh, "tanh tanh_ tanh.out"},
    {L::tanh_backward, "tanh_backward tanh_backward.grad_input"},
    OpSpec(L::thnn_fused_gru_cell, "_thnn_fused_gru_cell").meta_from(MetaSource::GruCell),
    OpSpec(L::thnn_fused_gru_cell_backward, "_thnn_fused_gru_cell_backward").meta_from(MetaSource::GruCellBackward),
    OpSpec(L::thnn_fused_lstm_cell, "_thnn_fused_lstm_cell").meta_from(MetaSource::LstmCell),
    {L::thnn_fused_lstm_cell_backward_impl, "_thnn_fused_lstm_cell_backward_impl"},
    {L::threshold, "threshold threshold_ threshold.out"},
    {L::threshold_backward, "threshold_backward threshold_backward.grad_input"},
    OpSpec(L::topk, "topk topk.values").check(check_sortable).check(check_topk_k),
    {L::trace, "trace trace.out"},
    {L::triangular_solve, "triangular_solve triangular_solve.X"},
    {L::tril, "tril tril_ tril.out"},
    {L::triu, "triu triu_ triu.out"},
    {L::trunc, "trunc trunc_ trunc.out"},
    {L::unfold_backward, "unfold_backward unfold_backward.out"},
    OpSpec(L::uniform, "uniform_").gap("check_uniform_bounds", floating_or_complex),
    OpSpec(L::upsample_bicubic, "upsample_bicubic2d upsample_bicubic2d.out").check(check_upsample_sizes),
    OpSpec(L::upsample_bicubic_aa, "_upsample_bicubic2d_aa _upsample_bicubic2d_aa.out").check(check_upsample_sizes),
    {L::upsample_bicubic_aa_backward, "_upsample_bicubic2d_aa_backward _upsample_bicubic2d_aa_backward.grad_input"},
    {L::upsample_bicubic_backward, "upsample_bicubic2d_backward upsample_bicubic2d_backward.grad_input"},
    OpSpec(L::upsample_bilinear_aa, "_upsample_bilinear2d_aa _upsample_bilinear2d_aa.out").check(check_upsample_sizes),
    {L::upsample_bilinear_aa_backward, "_upsample_bilinear2d_aa_backward _upsample_bilinear2d_aa_backward.grad_input"},
    OpSpec(L::upsample_linear,
           "upsample_linear1d upsample_linear1d.out upsample_bilinear2d upsample_bilinear2d.out upsample_trilinear3d "
           "upsample_trilinear3d.out")
        .check(check_upsample_sizes),
    {L::upsample_linear_backward,
     "upsample_linear1d_backward upsample_linear1d_backward.grad_input upsample_bilinear2d_backward "
     "upsample_bilinear2d_backward.grad_input upsample_trilinear3d_backward upsample_trilinear3d_backward.grad_input"},
    OpSpec(L::upsample_nearest,
           "upsample_nearest1d upsample_nearest1d.out upsample_nearest2d upsample_nearest2d.out upsample_nearest3d "
           "upsample_nearest3d.out")
        .check(check_upsample_sizes)
        .check(check_upsample_nearest_dtype)
        .meta_from(MetaSource::UpsampleNearest),
    {L::upsample_nearest_backward,
     "upsample_nearest1d_backward upsample_nearest1d_backward.grad_input upsample_nearest2d_backward "
     "upsample_nearest2d_backward.grad_input upsample_nearest3d_backward upsample_nearest3d_backward.grad_input"},
    OpSpec(L::upsample_nearest_exact,
           "_upsample_nearest_exact1d _upsample_nearest_exact1d.out _upsample_nearest_exact2d "
           "_upsample_nearest_exact2d.out _upsample_nearest_exact3d _upsample_nearest_exact3d.out")
        .check(check_upsample_sizes)
        .check(check_upsample_nearest_dtype)
        .meta_from(MetaSource::UpsampleNearest),
    {L::upsample_nearest_exact_backward,
     "_upsample_nearest_exact1d_backward _upsample_nearest_exact1d_backward.grad_input "
     "_upsample_nearest_exact2d_backward _upsample_nearest_exact2d_backward.grad_input "
     "_upsample_nearest_exact3d_backward _upsample_nearest_exact3d_backward.grad_input"},
    OpSpec(L::var, "var.correction var.correction_out").check(check_std_var_dtype),
    OpSpec(L::var_mean, "var_mean.correction var_mean.correction_out").check(check_std_var_dtype),
    OpSpec(L::vdot, "vdot vdot.out").check(check_dot),
    OpSpec(L::where, "where.self where.self_out").normalize(normalize_where_condition).check(check_where_condition),
    {L::xlogy,
     "xlogy.Tensor xlogy_.Tensor xlogy.OutTensor xlogy.Scalar_Other xlogy_.Scalar_Other xlogy.OutScalar_Other "
     "xlogy.Scalar_Self xlogy.OutScalar_Self"},
    OpSpec(L::zero, "zero_").overlap(WriteOverlap::OneValue),
};

// Other libraries' operators, rows like ATen's but named with their
// namespace, registered when the library is imported (register_library_ops,
// called from torch_tpu/integrations/): their meta kernels are the
// library's own. fbgemm_gpu's jagged operators, which TorchRec's
// KeyedJaggedTensor and embedding modules call (csrc/lower/jagged.h).
const OpSpec kLibraryOps[] = {
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

std::mutex library_ops_mutex;
std::vector<std::string> registered_library_ops;  // guarded by library_ops_mutex

}  // namespace

std::vector<std::string> lowered_op_names() {
  std::vector<std::string> names;
  for (const auto& entry : kLoweredOps) {
    std::istringstream in(entry.overloads);
    for (std::string name; in >> name;) names.push_back("aten::" + name);
  }
  std::lock_guard<std::mutex> lock(library_ops_mutex);
  names.insert(names.end(), registered_library_ops.begin(), registered_library_ops.end());
  return names;
}

void register_library_ops(const std::string& ns) {
  std::lock_guard<std::mutex> lock(library_ops_mutex);
  static std::set<std::string> registered;
  if (!registered.insert(ns).second) return;
  // Lives as long as the process: the library's kernels stay registered.
  auto* library = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  const std::string prefix = ns + "::";
  for (const auto& entry : kLibraryOps) {
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
  for (const auto& entry : kLoweredOps) {
    if (entry.meta == MetaSource::PyTorch) continue;
    std::istringstream in(entry.overloads);
    for (std::string name; in >> name;) {
      const size_t dot = name.find('.');
      auto op = c10::Dispatcher::singleton().findOp(
          {"aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)});
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::Meta)) continue;
      if (!library)
        library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
      library->impl(name.c_str(), missing_meta_kernel(entry.meta));
    }
  }
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

  for (const auto& entry : kLoweredOps) {
    std::istringstream in(entry.overloads);
    for (std::string name; in >> name;) {
      m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredKernel>(&entry)));
    }
  }
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
