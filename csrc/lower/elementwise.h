// Every lowering, by op family. Each is registered for its ATen overloads in
// csrc/device/op_table.cpp. Argument indices follow the ATen schema.
#pragma once

#include "lower/lowering.h"

#ifndef TORCH_TPU_LOWERING
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);
#endif

namespace torch_tpu::lower {

// elementwise.cpp
TORCH_TPU_LOWERING(abs)
TORCH_TPU_LOWERING(add)
TORCH_TPU_LOWERING(addcdiv)
TORCH_TPU_LOWERING(addcmul)
TORCH_TPU_LOWERING(atan2)
TORCH_TPU_LOWERING(bitwise_and)
TORCH_TPU_LOWERING(bitwise_not)
TORCH_TPU_LOWERING(bitwise_or)
TORCH_TPU_LOWERING(bitwise_xor)
TORCH_TPU_LOWERING(ceil)
TORCH_TPU_LOWERING(clamp)
TORCH_TPU_LOWERING(clamp_max)
TORCH_TPU_LOWERING(clamp_min)
TORCH_TPU_LOWERING(cos)
TORCH_TPU_LOWERING(div)
TORCH_TPU_LOWERING(eq)
TORCH_TPU_LOWERING(erf)
TORCH_TPU_LOWERING(exp)
TORCH_TPU_LOWERING(expm1)
TORCH_TPU_LOWERING(fill)
TORCH_TPU_LOWERING(floor)
TORCH_TPU_LOWERING(floor_divide)
TORCH_TPU_LOWERING(fmod)
TORCH_TPU_LOWERING(ge)
TORCH_TPU_LOWERING(gelu)
TORCH_TPU_LOWERING(gelu_backward)
TORCH_TPU_LOWERING(gt)
TORCH_TPU_LOWERING(isinf)
TORCH_TPU_LOWERING(isnan)
TORCH_TPU_LOWERING(isneginf)
TORCH_TPU_LOWERING(isposinf)
TORCH_TPU_LOWERING(le)
TORCH_TPU_LOWERING(lerp)
TORCH_TPU_LOWERING(log)
TORCH_TPU_LOWERING(log1p)
TORCH_TPU_LOWERING(log2)
TORCH_TPU_LOWERING(logical_and)
TORCH_TPU_LOWERING(logical_not)
TORCH_TPU_LOWERING(logical_or)
TORCH_TPU_LOWERING(logical_xor)
TORCH_TPU_LOWERING(lt)
TORCH_TPU_LOWERING(masked_fill)
TORCH_TPU_LOWERING(maximum)
TORCH_TPU_LOWERING(minimum)
TORCH_TPU_LOWERING(mul)
TORCH_TPU_LOWERING(ne)
TORCH_TPU_LOWERING(neg)
TORCH_TPU_LOWERING(pow)
TORCH_TPU_LOWERING(reciprocal)
TORCH_TPU_LOWERING(relu)
TORCH_TPU_LOWERING(remainder)
TORCH_TPU_LOWERING(round)
TORCH_TPU_LOWERING(rsqrt)
TORCH_TPU_LOWERING(rsub)
TORCH_TPU_LOWERING(sigmoid)
TORCH_TPU_LOWERING(sigmoid_backward)
TORCH_TPU_LOWERING(sign)
TORCH_TPU_LOWERING(silu)
TORCH_TPU_LOWERING(silu_backward)
TORCH_TPU_LOWERING(sin)
TORCH_TPU_LOWERING(sqrt)
TORCH_TPU_LOWERING(sub)
TORCH_TPU_LOWERING(tan)
TORCH_TPU_LOWERING(tanh)
TORCH_TPU_LOWERING(tanh_backward)
TORCH_TPU_LOWERING(threshold_backward)
TORCH_TPU_LOWERING(trunc)
TORCH_TPU_LOWERING(where)
TORCH_TPU_LOWERING(zero)

// reduce.cpp
TORCH_TPU_LOWERING(all)
TORCH_TPU_LOWERING(amax)
TORCH_TPU_LOWERING(amin)
TORCH_TPU_LOWERING(any)
TORCH_TPU_LOWERING(argmax)
TORCH_TPU_LOWERING(argmin)
TORCH_TPU_LOWERING(cumsum)
TORCH_TPU_LOWERING(linalg_vector_norm)
TORCH_TPU_LOWERING(log_softmax)
TORCH_TPU_LOWERING(log_softmax_backward)
TORCH_TPU_LOWERING(logsumexp)
TORCH_TPU_LOWERING(max_all)
TORCH_TPU_LOWERING(max_dim)
TORCH_TPU_LOWERING(mean)
TORCH_TPU_LOWERING(min_all)
TORCH_TPU_LOWERING(min_dim)
TORCH_TPU_LOWERING(prod)
TORCH_TPU_LOWERING(softmax)
TORCH_TPU_LOWERING(softmax_backward)
TORCH_TPU_LOWERING(std)
TORCH_TPU_LOWERING(sum)
TORCH_TPU_LOWERING(var)

// attention.cpp
TORCH_TPU_LOWERING(scaled_dot_product_fused_attention)
TORCH_TPU_LOWERING(scaled_dot_product_fused_attention_backward)

// matmul.cpp
TORCH_TPU_LOWERING(addmm)
TORCH_TPU_LOWERING(addmv)
TORCH_TPU_LOWERING(baddbmm)
TORCH_TPU_LOWERING(bmm)
TORCH_TPU_LOWERING(dot)
TORCH_TPU_LOWERING(mm)

// norm.cpp
TORCH_TPU_LOWERING(native_layer_norm)
TORCH_TPU_LOWERING(native_layer_norm_backward)

// conv.cpp
TORCH_TPU_LOWERING(convolution)
TORCH_TPU_LOWERING(convolution_backward)

// pool.cpp
TORCH_TPU_LOWERING(adaptive_avg_pool)
TORCH_TPU_LOWERING(adaptive_avg_pool2d_backward)
TORCH_TPU_LOWERING(adaptive_avg_pool3d_backward)
TORCH_TPU_LOWERING(avg_pool)
TORCH_TPU_LOWERING(avg_pool_backward)
TORCH_TPU_LOWERING(max_pool_with_indices)
TORCH_TPU_LOWERING(max_pool_with_indices_backward)

// batch_norm.cpp
TORCH_TPU_LOWERING(native_batch_norm)
TORCH_TPU_LOWERING(native_batch_norm_backward)
TORCH_TPU_LOWERING(native_batch_norm_no_training)

// group_norm.cpp
TORCH_TPU_LOWERING(native_group_norm)
TORCH_TPU_LOWERING(native_group_norm_backward)

// loss.cpp
TORCH_TPU_LOWERING(nll_loss_backward)
TORCH_TPU_LOWERING(nll_loss_forward)

// index.cpp
TORCH_TPU_LOWERING(embedding_dense_backward)
TORCH_TPU_LOWERING(gather)
TORCH_TPU_LOWERING(index)
TORCH_TPU_LOWERING(index_add)
TORCH_TPU_LOWERING(index_put)
TORCH_TPU_LOWERING(index_select)
TORCH_TPU_LOWERING(scatter)
TORCH_TPU_LOWERING(scatter_add)

// shape.cpp
TORCH_TPU_LOWERING(cat)
TORCH_TPU_LOWERING(flip)
TORCH_TPU_LOWERING(tril)
TORCH_TPU_LOWERING(triu)

// random.cpp
TORCH_TPU_LOWERING(bernoulli)
TORCH_TPU_LOWERING(native_dropout)
TORCH_TPU_LOWERING(native_dropout_backward)
TORCH_TPU_LOWERING(normal)
TORCH_TPU_LOWERING(random)
TORCH_TPU_LOWERING(uniform)

// creation.cpp
TORCH_TPU_LOWERING(arange)
TORCH_TPU_LOWERING(eye)
TORCH_TPU_LOWERING(linspace)

}  // namespace torch_tpu::lower
