// torch_tpu._C entry points for torch.compile's captured graph programs
// (csrc/exec/graph_capture.h). With custom_kernel_bindings.cpp, the only
// translation units that convert Python objects to tensors.
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include <atomic>

#include "device/meta_inference.h"
#include "exec/graph_capture.h"
#include "exec/op_cache.h"
#include "runtime/metrics.h"

namespace py = pybind11;
using torch_tpu::device::CapturedProgram;

namespace {

c10::IValue to_ivalue(const py::handle& obj) {
  if (THPVariable_Check(obj.ptr())) return THPVariable_Unpack(obj.ptr());
  if (obj.is_none()) return c10::IValue();
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) return obj.cast<int64_t>();
  if (py::isinstance<py::float_>(obj)) return obj.cast<double>();
  // SymInts and other objects: a value no replay matches (strings compare
  // by value, so each gets its own).
  static std::atomic<uint64_t> unmatched{0};
  return c10::IValue("<unmatched python object " + std::to_string(unmatched++) + ">");
}

std::vector<c10::IValue> to_ivalues(const py::sequence& seq) {
  std::vector<c10::IValue> out;
  out.reserve(seq.size());
  for (const py::handle& h : seq) out.push_back(to_ivalue(h));
  return out;
}

py::list to_python(const std::vector<c10::IValue>& values) {
  py::list out;
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor())));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

}  // namespace

void register_graph_bindings(py::module_& m) {
  py::class_<CapturedProgram, std::shared_ptr<CapturedProgram>>(m, "_CapturedProgram")
      .def("replay",
           [](CapturedProgram& g, const py::sequence& inputs) -> py::object {
             std::vector<c10::IValue> values = to_ivalues(inputs);
             std::optional<std::vector<c10::IValue>> out;
             {
               py::gil_scoped_release release;
               out = g.replay(values);
             }
             if (!out) return py::none();
             torch_tpu::runtime::metrics().graph_replays++;
             return to_python(*out);
           })
      .def_property_readonly("mismatch", &CapturedProgram::mismatch);
  m.def("_clear_op_cache", []() { torch_tpu::device::op_cache_clear(); });
  // The format of the fake convolution results torch.compile traces with
  // (torch_tpu/memory_format.py): eager's rule, by name of torch's constant.
  m.def("_convolution_memory_format", [](const py::handle& input, const py::handle& weight) {
    switch (torch_tpu::device::convolution_memory_format(THPVariable_Unpack(input.ptr()),
                                                         THPVariable_Unpack(weight.ptr()))) {
      case at::MemoryFormat::ChannelsLast:
        return "channels_last";
      case at::MemoryFormat::ChannelsLast3d:
        return "channels_last_3d";
      default:
        return "contiguous_format";
    }
  });
  m.def("_capture_begin", [](int device) { torch_tpu::device::begin_capture(device); });
  // Both run the recorded program, without the GIL: a program holding
  // collectives waits for the other ranks' replicas, and ranks that are
  // threads of this process get there in Python.
  m.def("_capture_abort", []() {
    py::gil_scoped_release release;
    torch_tpu::device::abort_capture();
  });
  m.def("_capture_end", [](int device, const py::sequence& inputs, const py::sequence& outputs) {
    std::string why;
    std::vector<c10::IValue> input_values = to_ivalues(inputs), output_values = to_ivalues(outputs);
    std::shared_ptr<torch_tpu::device::CapturedProgram> cap;
    {
      py::gil_scoped_release release;
      cap = torch_tpu::device::end_capture(device, input_values, output_values, &why);
    }
    return py::make_tuple(cap ? py::cast(cap) : py::none(), why);
  });
}
