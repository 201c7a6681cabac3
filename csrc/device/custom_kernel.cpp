#include "device/custom_kernel.h"

#include <c10/util/strides.h>

#include <stdexcept>

#include "exec/mode_executor.h"
#include "exec/tensor_program.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

std::vector<at::Tensor> run_custom_kernel(const std::string& op, const std::string& module_text,
                                          const std::vector<at::Tensor>& args,
                                          const std::vector<CustomKernelResult>& results) {
  for (const at::Tensor& t : args) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "internal: ", op, " got a ", t.device(), " tensor");
  }
  const int device = args.empty() ? current_device() : args.front().device().index();
  runtime::metrics().ops_dispatched++;
  TensorProgram prog(device);
  std::vector<hlo::Value> operands;
  operands.reserve(args.size());
  for (const at::Tensor& t : args) operands.push_back(prog.read(t));
  std::vector<hlo::Value> outs;
  try {
    outs = prog.builder().call_foreign(module_text, operands);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK(false, op, ": ", e.what());
  }
  // The module was exported for these shapes; its results must be what the
  // fake kernel told PyTorch they are, or tensors would lie about their data.
  TORCH_CHECK(outs.size() == results.size(), op, ": the JAX function's StableHLO returns ", outs.size(),
              " results, its fake kernel ", results.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const hlo::TensorType expected{element_type(results[i].dtype), results[i].sizes};
    TORCH_CHECK(outs[i].type == expected, op, ": result ", i, " of the JAX function's StableHLO is ",
                outs[i].type.str(), ", its fake kernel says ", expected.str());
  }
  std::vector<at::Tensor> fresh;
  for (size_t i = 0; i < outs.size(); ++i) {
    const CustomKernelResult& r = results[i];
    if (r.donor >= 0) {
      prog.write(args.at(r.donor), outs[i]);
    } else {
      fresh.push_back(prog.produce(outs[i], r.sizes, c10::contiguous_strides(r.sizes), r.dtype));
    }
  }
  prog.run(op);
  // Debug waits here, so errors surface at this op as at any op.
  current_mode_executor().after_launch(c10::OperatorName(op, ""), device,
                                       std::vector<c10::IValue>(fresh.begin(), fresh.end()));
  return fresh;
}

}  // namespace torch_tpu::device
