// Custom kernels (torch_tpu.pallas.jax_op): a foreign StableHLO module (a
// JAX or Pallas function's export) run as one op on tpu tensors. Its call
// joins the program like any lowering, so Strict runs it as its own program,
// DeferAndFuse fuses it with its neighbours, and a compiled graph captures
// it with the rest of the graph.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace torch_tpu::device {

// One result of the module's entry, as the op's fake kernel promised it.
struct CustomKernelResult {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  // The argument this result is the new value of (a donated argument: its
  // storage takes the result, as an in-place op's does), or -1: a new tensor.
  int donor = -1;
};

// Runs the module's entry on `args` (tpu tensors of one device, which the
// caller checked) and returns its results that are not written into a
// donor, in order. `op` names it in errors.
std::vector<at::Tensor> run_custom_kernel(const std::string& op, const std::string& module_text,
                                          const std::vector<at::Tensor>& args,
                                          const std::vector<CustomKernelResult>& results);

}  // namespace torch_tpu::device
