// torch_tpu.distributed._C: the tpu_dist backend class for Python.
//
// A separate extension module: c10d's Python types (the Backend base class
// and its intrusive_ptr holder) come from torch._C, so this module is
// loaded only when torch.distributed is.
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/process_group_tpu.h"

namespace py = pybind11;
using torch_tpu::distributed::ProcessGroupTpu;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu c10d backend (tpu_dist)";
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupTpu, c10d::Backend, c10::intrusive_ptr<ProcessGroupTpu>>(m, "ProcessGroupTpu")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& host, int rank, int size,
                       std::vector<int64_t> program_devices) {
             return c10::make_intrusive<ProcessGroupTpu>(host, rank, size, std::move(program_devices));
           }),
           py::arg("host"), py::arg("rank"), py::arg("size"), py::arg("program_devices") = std::vector<int64_t>{})
      .def_property_readonly("host", &ProcessGroupTpu::host)
      // dist.split_group deep-copies this for the new groups; split() reads
      // only the timeout of what c10d then passes, so there is nothing to copy.
      .def_property_readonly("options", [](const ProcessGroupTpu&) { return py::none(); })
      .def(
          "_set_split_factory",
          [](ProcessGroupTpu& self, py::function factory, int64_t timeout_ms) {
            // Held with the GIL: the factory is a Python callable, and the
            // backend may be destroyed on any thread.
            auto held = std::shared_ptr<py::function>(new py::function(std::move(factory)), [](py::function* f) {
              py::gil_scoped_acquire gil;
              delete f;
            });
            self.set_split_factory(
                [held](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
                  py::gil_scoped_acquire gil;
                  py::object group = (*held)(store, rank, size, static_cast<int64_t>(timeout.count()));
                  return group.cast<c10::intrusive_ptr<c10d::Backend>>();
                },
                std::chrono::milliseconds(timeout_ms));
          },
          py::arg("factory"), py::arg("timeout_ms"))
      .def_property_readonly("program_devices", &ProcessGroupTpu::program_devices);
}
