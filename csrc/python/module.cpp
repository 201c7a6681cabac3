// torch_tpu._C: the few entry points the Python face needs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>

#include "device/cpu_fallback.h"
#include "device/generator.h"
#include "device/host_memory.h"
#include "device/registration.h"
#include "device/storage_buffer.h"
#include "device/sync_debug.h"
#include "exec/tensor_program.h"
#include "pjrt/launch_queue.h"
#include "runtime/device_runtime.h"
#include "runtime/eager_mode.h"
#include "runtime/metrics.h"

namespace py = pybind11;
using torch_tpu::runtime::DeviceRuntime;

void register_graph_bindings(py::module_& m);          // graph_bindings.cpp
void register_custom_kernel_bindings(py::module_& m);  // custom_kernel_bindings.cpp
void register_memory_bindings(py::module_& m);         // memory_bindings.cpp
void register_op_table_bindings(py::module_& m);       // op_table_bindings.cpp
void register_profiler_bindings(py::module_& m);       // profiler_bindings.cpp

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native core";
  torch_tpu::device::register_hooks();
  torch_tpu::device::register_missing_meta_kernels();
  register_graph_bindings(m);
  register_custom_kernel_bindings(m);
  register_memory_bindings(m);
  register_op_table_bindings(m);
  register_profiler_bindings(m);

  m.def("_configure", [](const std::string& plugin_path, int num_devices, const std::string& error) {
    DeviceRuntime::get().configure(plugin_path, num_devices, error);
  });
  // As torch.cuda.is_initialized: false in a child forked after the parent started the plugin.
  m.def("_initialized", []() { return !DeviceRuntime::in_bad_fork() && DeviceRuntime::get().initialized(); });
  m.def("_is_in_bad_fork", &DeviceRuntime::in_bad_fork);
  m.def("_wait_in_flight", []() {
    py::gil_scoped_release release;
    DeviceRuntime::get().wait_in_flight();
  });
  m.def("_device_count", []() {
    py::gil_scoped_release release;
    return DeviceRuntime::get().device_count();
  });
  // torch.Event.elapsed_time takes a torch.Event of exactly that type;
  // torch.tpu.Event is a subclass (isinstance(e, torch.tpu.Event) holds).
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK_TYPE(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()), "expected a torch.Event object");
    return reinterpret_cast<THPEvent*>(start.ptr())->event.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
  });
  m.def("_synchronize", [](int device) {
    py::gil_scoped_release release;
    DeviceRuntime::get().synchronize(device);
  });
  m.def("_metrics", []() { return torch_tpu::runtime::metrics().snapshot(); });
  m.def("_reset_metrics", []() { torch_tpu::runtime::metrics().reset(); });
  m.def("_set_cpu_fallback", &torch_tpu::device::set_cpu_fallback);
  m.def("_cpu_fallback_enabled", &torch_tpu::device::cpu_fallback_enabled);
  m.def("_lowered_ops", &torch_tpu::device::lowered_op_names);
  m.def("_nested_tensor_ops", &torch_tpu::device::nested_tensor_op_names);
  m.def("_register_library_ops", &torch_tpu::device::register_library_ops);
  m.def("_set_matmul_precision", &torch_tpu::runtime::set_matmul_precision);
  m.def("_get_matmul_precision", &torch_tpu::runtime::matmul_precision_torch_name);
  // What the calling thread's float32 matmuls use now (its override, else
  // the process setting), as StableHLO names it: DEFAULT, HIGH or HIGHEST.
  m.def("_matmul_precision", &torch_tpu::runtime::matmul_precision);
  m.def("_set_eager_mode", [](const std::string& name) {
    torch_tpu::runtime::set_eager_mode(torch_tpu::runtime::eager_mode_from_name(name));
  });
  m.def("_get_eager_mode",
        []() { return std::string(torch_tpu::runtime::eager_mode_name(torch_tpu::runtime::eager_mode())); });
  m.def("_flush", [](const std::string& reason) {
    py::gil_scoped_release release;
    torch_tpu::device::flush_deferred(reason.c_str());
  });
  m.def("_set_thread_matmul_precision", &torch_tpu::runtime::set_thread_matmul_precision);
  m.def("_inject_fault", &torch_tpu::device::inject_fault);
  // The launch queue (csrc/pjrt/launch_queue.h): whether ops' programs go
  // through it, how many launches it holds, and a hold for tests.
  m.def("_launches_queued", &DeviceRuntime::launches_queued);
  m.def("_launch_queue_depth", []() { return torch_tpu::pjrt::LaunchQueue::get().depth(); });
  m.def("_launch_queue_hold", []() { torch_tpu::pjrt::LaunchQueue::get().hold_for_test(); });
  m.def("_launch_queue_release", []() { torch_tpu::pjrt::LaunchQueue::get().release_for_test(); });
  m.def("_set_check_nans", &torch_tpu::runtime::set_check_nans);
  m.def("_check_nans", &torch_tpu::runtime::check_nans);
  m.def("_set_device", &torch_tpu::device::set_current_device);
  m.def("_current_device", &torch_tpu::device::get_current_device);
  m.def("_manual_seed", &torch_tpu::device::manual_seed);
  m.def("_initial_seed", &torch_tpu::device::initial_seed);
  m.def("_get_rng_state", [](int device) { return py::bytes(torch_tpu::device::get_rng_state(device)); });
  m.def("_set_rng_state", &torch_tpu::device::set_rng_state);
  m.def("_set_sync_debug_mode", &torch_tpu::device::set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &torch_tpu::device::sync_debug_mode);
  // A new Python object for the device's own generator, as PyTorch makes
  // torch.cuda.default_generators (torch.tpu builds that tuple once).
  m.def("_default_generator", [](int device) {
    PyObject* generator =
        THPGenerator_initDefaultGenerator(torch_tpu::device::default_generator(static_cast<c10::DeviceIndex>(device)));
    if (generator == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(generator);
  });
  m.def("_compiled_programs", []() { return DeviceRuntime::get().cache().size(); });
  m.def("_cache_stats", []() {
    auto& cache = DeviceRuntime::get().cache();
    auto s = cache.stats();
    py::dict memory, disk, modules, d;
    memory["hits"] = s.memory_hits;
    memory["misses"] = s.memory_misses;
    memory["evictions"] = s.memory_evictions;
    memory["entries"] = cache.size();
    disk["hits"] = s.disk_hits;
    disk["misses"] = s.disk_misses;
    disk["writes"] = s.disk_writes;
    disk["corrupt"] = s.disk_corrupt;
    disk["evictions"] = s.disk_evictions;
    disk["scans"] = s.disk_scans;
    disk["directory"] = cache.directory();
    modules["hits"] = s.module_hits;
    modules["misses"] = s.module_misses;
    modules["writes"] = s.module_writes;
    d["memory"] = memory;
    d["disk"] = disk;
    d["modules"] = modules;
    d["compiles"] = s.compiles;
    d["compile_seconds"] = s.compile_seconds;
    return d;
  });
  m.def("_reset_cache_stats", []() { DeviceRuntime::get().cache().reset_stats(); });
  m.def("_clear_memory_cache", []() { DeviceRuntime::get().cache().clear_memory(); });
  m.def("_plugin_info", []() {
    auto& client = DeviceRuntime::get().client();
    const auto& plugin = client.plugin();
    py::dict info;
    info["path"] = plugin->path();
    info["pjrt_api_version"] = std::to_string(plugin->api_major()) + "." + std::to_string(plugin->api_minor());
    info["pjrt_api_version_built"] = std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR);
    info["platform_name"] = client.platform_name();
    info["platform_version"] = client.platform_version();
    info["attributes"] = plugin->attributes();
    std::vector<std::string> kinds;
    for (size_t i = 0; i < client.devices().size(); ++i) kinds.push_back(client.device_kind(i));
    info["device_kinds"] = kinds;
    return info;
  });
  m.def("_learn_storage_slice_deleter", [](const py::handle& over_cpu_slice) {
    torch_tpu::device::learn_storage_slice_deleter(THPVariable_Unpack(over_cpu_slice.ptr()));
  });
  m.def("_mem_get_info", [](int device) { return torch_tpu::device::device_memory_info(device); });
  m.def("_return_free_malloc_pages", []() { return torch_tpu::device::return_free_malloc_pages(); });
  m.def("_set_memory_fraction",
        [](int device, double fraction) { torch_tpu::device::set_memory_fraction(device, fraction); });
  m.def("_get_memory_fraction", [](int device) { return torch_tpu::device::get_memory_fraction(device); });
  m.def("_memory_stats", [](int device) {
    auto stats = DeviceRuntime::get().client().memory_stats(device);
    py::dict d;
    d["available"] = stats.available;
    d["bytes_in_use"] = stats.bytes_in_use;
    d["peak_bytes_in_use"] = stats.peak_bytes_in_use;
    d["bytes_limit"] = stats.bytes_limit;
    return d;
  });
}
