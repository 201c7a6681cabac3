// torch_tpu._C entry point for custom kernels (csrc/device/custom_kernel.h);
// torch_tpu/pallas/ checks the call's arguments before it gets here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include "device/custom_kernel.h"
#include "runtime/device_runtime.h"

namespace py = pybind11;

void register_custom_kernel_bindings(py::module_& m) {
  // The exporter's modules in the compilation cache's disk tier (None: not there).
  m.def("_cache_load_module", [](const std::string& identity) -> py::object {
    std::optional<std::string> text = torch_tpu::runtime::DeviceRuntime::get().cache().load_module(identity);
    if (!text) return py::none();
    return py::str(*text);
  });
  m.def("_cache_store_module", [](const std::string& identity, const std::string& text) {
    torch_tpu::runtime::DeviceRuntime::get().cache().store_module(identity, text);
  });
  // results: (dtype, sizes, donor argument or -1) per result of the module's entry.
  m.def("_run_custom_kernel", [](const std::string& op, const std::string& module_text, const py::sequence& args,
                                 const py::sequence& results) {
    std::vector<at::Tensor> tensors;
    for (const py::handle& h : args) {
      if (!THPVariable_Check(h.ptr())) throw py::type_error("internal: _run_custom_kernel takes tensors");
      tensors.push_back(THPVariable_Unpack(h.ptr()));
    }
    std::vector<torch_tpu::device::CustomKernelResult> specs;
    for (const py::handle& h : results) {
      auto r = h.cast<py::tuple>();
      if (!THPDtype_Check(r[0].ptr())) throw py::type_error("internal: a result's dtype is not a torch.dtype");
      specs.push_back(
          {reinterpret_cast<THPDtype*>(r[0].ptr())->scalar_type, r[1].cast<std::vector<int64_t>>(), r[2].cast<int>()});
    }
    std::vector<at::Tensor> out;
    {
      py::gil_scoped_release release;
      out = torch_tpu::device::run_custom_kernel(op, module_text, tensors, specs);
    }
    py::list list;
    for (const at::Tensor& t : out) list.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(t)));
    return list;
  });
}
