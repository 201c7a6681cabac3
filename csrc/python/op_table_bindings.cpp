// torch_tpu._C entry points for the op table's rules that Python applies:
// torch.compile's fake tensors take their shapes from a row's C++ meta
// kernel (torch_tpu/fake_kernels.py), not from a second copy in Python.
#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <optional>
#include <string>

#include "device/missing_meta_kernels.h"

namespace py = pybind11;

void register_op_table_bindings(py::module_& m) {
  m.def("_fake_tensor_rule_ops", &torch_tpu::device::fake_tensor_rule_ops);
  // Called within FakeTensorMode's in_kernel_invocation_manager, so the
  // fake tensors reach the kernel as the meta tensors they hold, and its
  // results are meta tensors the caller wraps.
  m.def("_row_meta", [](const std::string& name, const std::string& overload, py::args args, py::kwargs kwargs) {
    const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    const torch_tpu::device::BoxedMetaKernel kernel = torch_tpu::device::fake_tensor_meta_kernel(op);
    TORCH_CHECK(kernel, "internal: ", name, ".", overload, "'s row has no meta kernel for fake tensors");
    torch::jit::Stack stack = torch::jit::createStackForSchema(op.schema(), args, kwargs, std::nullopt);
    kernel(op, &stack);
    return torch::jit::createPyObjectForStack(std::move(stack));
  });
}
