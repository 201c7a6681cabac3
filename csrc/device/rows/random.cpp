// The rows of the registration table (csrc/device/rows/rows.h) for random
// sampling; their lowerings are in csrc/lower/ (random). Above the rows, the
// checks, argument rewrites and meta kernels only these rows name.
#include "device/rows/rows.h"

#include "device/argument_checks.h"
#include "lower/lowering.h"
#include "lower/random.h"

namespace torch_tpu::device {

namespace {

namespace L = torch_tpu::lower;

// bernoulli(self) reads self as probabilities.
void check_bernoulli_probability_dtype(const c10::FunctionSchema& schema, const Args& args) {
  const at::Tensor* self = tensor_at(args, 0);
  if (schema.overload_name().empty() && self && !at::isFloatingType(self->scalar_type())) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"bernoulli_tensor_p_\" not implemented for '", self->scalar_type(), "'");
  }
}

// multinomial's distribution checks, as PyTorch makes them on every device
// (native/Distributions.cpp): they read reductions of the probabilities back
// to the host, so a call waits for its input like CUDA's does. CUDA checks
// only the no-replacement / single-sample path on the host (the other path
// asserts inside its kernel, which would abort); we check every path and
// raise CPU's RuntimeError.
void check_multinomial_distribution(const c10::FunctionSchema&, const Args& args) {
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& probs = args[0].toTensor();
  if (probs.numel() == 0 || !at::isFloatingType(probs.scalar_type())) return;
  const at::Tensor valid = (probs.max() < INFINITY).logical_and(probs.min() >= 0);
  TORCH_CHECK(valid.item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  const at::Tensor row_sums = probs.dim() == 1 ? probs.sum() : probs.sum(1);
  TORCH_CHECK(!(row_sums == 0).any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
}

// constexpr: constant-initialized, so registration in op_table.cpp may read
// the rows during static initialization whatever the order of files.
constexpr OpSpec kRows[] = {
    OpSpec(L::bernoulli, "bernoulli bernoulli_.float bernoulli_.Tensor").check(check_bernoulli_probability_dtype),
    {L::cauchy, "cauchy_ cauchy cauchy.out"},
    {L::exponential, "exponential_ exponential exponential.out"},
    {L::geometric, "geometric_ geometric geometric.out"},
    {L::log_normal, "log_normal_ log_normal log_normal.out"},
    OpSpec(L::multinomial, "multinomial multinomial.out").check(check_multinomial_distribution).reads_values(),
    {L::native_dropout, "native_dropout"},
    {L::native_dropout_backward, "native_dropout_backward"},
    OpSpec(L::normal, "normal_").gap("normal_kernel_cpu", floating_or_complex),
    {L::normal_tensor,
     "normal.Tensor_Tensor normal.Tensor_Tensor_out normal.Tensor_float normal.Tensor_float_out normal.float_Tensor "
     "normal.float_Tensor_out"},
    {L::random, "random_ random_.from random_.to"},
    {L::randperm, "randperm.generator_out randperm.out"},
    OpSpec(L::uniform, "uniform_").gap("check_uniform_bounds", floating_or_complex),
};

}  // namespace

std::span<const OpSpec> random_rows() { return kRows; }

}  // namespace torch_tpu::device
