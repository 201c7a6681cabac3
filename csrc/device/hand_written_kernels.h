// Kernels written in C++ from other device ops or on the host, not lowered
// to one program: each makes the function the op table's row of hand-written
// overloads registers (op_table.cpp: kHandWrittenOps), so the table names
// every PrivateUse1 overload the device implements and lowered_ops() lists
// them.
#pragma once

#include <torch/library.h>

namespace torch_tpu::device {

using HandWrittenKernel = torch::CppFunction (*)();

// linalg_kernels.cpp: on the host where XLA has no kernel (eig), with CPU's
// checks on the device's results.
torch::CppFunction linalg_eig_kernel();
torch::CppFunction linalg_eig_out_kernel();
torch::CppFunction linalg_eigvals_kernel();
torch::CppFunction linalg_eigvals_out_kernel();
torch::CppFunction ormqr_kernel();
torch::CppFunction ormqr_out_kernel();
torch::CppFunction cholesky_kernel();
torch::CppFunction cholesky_out_kernel();
torch::CppFunction linalg_lstsq_out_kernel();

// transformer_kernels.cpp: nn.Transformer's and nn.MultiheadAttention's fast
// paths.
torch::CppFunction addmm_activation_kernel();
torch::CppFunction addmm_activation_out_kernel();
torch::CppFunction masked_softmax_kernel();
torch::CppFunction native_multi_head_attention_kernel();
torch::CppFunction nested_tensor_from_mask_kernel();
torch::CppFunction nested_tensor_from_mask_left_aligned_kernel();
torch::CppFunction transform_bias_rescale_qkv_kernel();
torch::CppFunction transformer_encoder_layer_fwd_kernel();
// For nested tensors on tpu (NestedTensorPrivateUse1): the encoder layer of
// a padded batch the fast path packed, and its unpacking.
torch::CppFunction nested_transformer_encoder_layer_fwd_kernel();
torch::CppFunction nested_to_padded_tensor_kernel();

// ctc_loss_kernels.cpp
torch::CppFunction ctc_loss_kernel();
torch::CppFunction ctc_loss_tensor_kernel();
torch::CppFunction ctc_loss_backward_kernel();
torch::CppFunction ctc_loss_backward_tensor_kernel();

// attention_choice.cpp: which kernel scaled_dot_product_attention runs.
torch::CppFunction fused_sdp_choice_kernel();

}  // namespace torch_tpu::device
