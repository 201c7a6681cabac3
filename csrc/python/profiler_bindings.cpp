// torch_tpu._C entry points for torch_tpu/profiler.py: whether torch.profiler
// records tpu programs (device/program_profiler.h) and the compile log
// (exec/compile_log.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "device/program_profiler.h"
#include "exec/compile_log.h"

namespace py = pybind11;

namespace {

// A graph input as the log compares it: tensors and numbers; anything else
// (a SymInt) by its text.
c10::IValue logged_value(const py::handle& obj) {
  if (THPVariable_Check(obj.ptr())) return THPVariable_Unpack(obj.ptr());
  if (obj.is_none()) return c10::IValue();
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) return obj.cast<int64_t>();
  if (py::isinstance<py::float_>(obj)) return obj.cast<double>();
  return c10::IValue(std::string(py::str(obj)));
}

}  // namespace

void register_profiler_bindings(py::module_& m) {
  m.def("_programs_profiled", &torch_tpu::device::programs_profiled);
  m.def("_name_next_graph", &torch_tpu::device::name_next_graph);
  m.def("_set_compile_log", &torch_tpu::device::set_compile_log);
  m.def("_compile_log", []() {
    return py::make_tuple(torch_tpu::device::compile_log_on(), torch_tpu::device::compile_variants_warning());
  });
  // A compiled graph's new program (torch_tpu/compile.py): returns the line
  // printed ("" for a site's first variant).
  m.def("_log_graph_compile", [](const std::string& site, const std::string& what, const std::string& how,
                                 const py::sequence& inputs, const std::vector<std::string>& names) {
    const torch::PyWarningHandler warnings;  // the variants warning becomes a Python warning
    std::vector<c10::IValue> values;
    for (const py::handle& h : inputs) values.push_back(logged_value(h));
    // A graph compiles once per input signature: its second program is a recompile.
    return torch_tpu::device::log_compile(site, what, how.c_str(), torch_tpu::device::logged_signature(values, names),
                                          /*warm=*/true);
  });
}
