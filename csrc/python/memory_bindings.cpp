// torch_tpu._C entry points for torch.tpu's memory statistics and history
// (csrc/device/device_allocator.h), in the shapes torch.cuda's bindings use
// so that torch.cuda._memory_viz reads our snapshots.
#include <c10/core/AllocatorConfig.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <algorithm>
#include <string>
#include <vector>

#include "device/device_allocator.h"
#include "runtime/device_runtime.h"

namespace py = pybind11;
namespace dev = torch_tpu::device;
using c10::CachingDeviceAllocator::RecordContext;
using Action = c10::CachingDeviceAllocator::TraceEntry::Action;

namespace {

// Python frames come from threads Python made: torch's bindings release the
// GIL around an op, and the stack takes it back, as CUDA's allocator's does.
// A thread Python never ran (a runtime worker) records none: taking the GIL
// there could wait on a thread that waits on a lock the worker holds.
bool python_stack_available() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  return Py_IsInitialized() && !finalizing && PyGILState_GetThisThreadState() != nullptr;
}

std::shared_ptr<c10::GatheredContext> gather_python_stack() {
  if (!python_stack_available()) return nullptr;
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gather_all_stacks() {
  return torch::CapturedTraceback::gather(/*python=*/python_stack_available(), /*script=*/true, /*cpp=*/true);
}

py::dict stat_dict(const c10::CachingAllocator::Stat& stat) {
  py::dict d;
  d["current"] = stat.current;
  d["peak"] = stat.peak;
  d["allocated"] = stat.allocated;
  d["freed"] = stat.freed;
  return d;
}

py::dict stat_array_dict(const c10::CachingAllocator::StatArray& stats) {
  py::dict d;
  d["all"] = stat_dict(stats[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]);
  d["small_pool"] = stat_dict(stats[static_cast<size_t>(c10::CachingAllocator::StatType::SMALL_POOL)]);
  d["large_pool"] = stat_dict(stats[static_cast<size_t>(c10::CachingAllocator::StatType::LARGE_POOL)]);
  return d;
}

// The nested dict torch.cuda.memory_stats_as_nested_dict returns.
py::dict device_stats(int device) {
  const auto s = dev::allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  py::dict d;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["max_split_size"] = s.max_split_size;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["allocation"] = stat_array_dict(s.allocation);
  d["segment"] = stat_array_dict(s.segment);
  d["active"] = stat_array_dict(s.active);
  d["inactive_split"] = stat_array_dict(s.inactive_split);
  d["allocated_bytes"] = stat_array_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(s.reserved_bytes);
  d["active_bytes"] = stat_array_dict(s.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(s.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(s.requested_bytes);
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  return d;
}

const char* action_name(Action action) {
  switch (action) {
    case Action::ALLOC:
      return "alloc";
    case Action::FREE_REQUESTED:
      return "free_requested";
    case Action::FREE_COMPLETED:
      return "free_completed";
    case Action::SEGMENT_ALLOC:
      return "segment_alloc";
    case Action::SEGMENT_FREE:
      return "segment_free";
    case Action::SEGMENT_MAP:
      return "segment_map";
    case Action::SEGMENT_UNMAP:
      return "segment_unmap";
    case Action::SNAPSHOT:
      return "snapshot";
    case Action::OOM:
      return "oom";
    default:
      return "unknown";
  }
}

// Frames of every recorded stack as torch.cuda's snapshot lists them
// ({"filename", "line", "name"}, innermost first), symbolized together
// (torch::symbolize dedupes shared frames); an unrecorded stack has none.
std::vector<py::list> symbolize(const std::vector<const std::shared_ptr<c10::GatheredContext>*>& contexts) {
  std::vector<torch::CapturedTraceback*> recorded;
  for (const auto* c : contexts) {
    // Only gather_*_stack makes contexts, and they are CapturedTracebacks.
    if (*c) recorded.push_back(static_cast<torch::CapturedTraceback*>(c->get()));
  }
  const torch::SymbolizedTracebacks symbolized = torch::symbolize(recorded);
  std::vector<py::dict> all_frames;
  for (const auto& f : symbolized.all_frames) {
    py::dict d;
    d["filename"] = f.filename;
    d["line"] = f.lineno;
    d["name"] = f.funcname;
    all_frames.push_back(std::move(d));
  }
  std::vector<py::list> out;
  size_t next = 0;
  for (const auto* c : contexts) {
    py::list frames;
    if (*c) {
      for (uint64_t i : symbolized.tracebacks.at(next++)) frames.append(all_frames.at(i));
    }
    out.push_back(std::move(frames));
  }
  return out;
}

// torch.cuda.memory._snapshot()'s dict: one segment per live storage (none
// is cached or split, so each holds one active block), and the recorded
// events per device.
py::dict memory_snapshot() {
  const std::vector<dev::LiveAllocation> live = dev::live_allocations();
  const std::vector<dev::MemoryEvent> events = dev::memory_events();
  std::vector<const std::shared_ptr<c10::GatheredContext>*> contexts;
  for (const auto& l : live) contexts.push_back(&l.context);
  for (const auto& e : events) contexts.push_back(&e.context);
  const std::vector<py::list> frames = symbolize(contexts);

  py::list segments;
  for (size_t i = 0; i < live.size(); ++i) {
    const auto& l = live[i];
    py::dict block;
    block["address"] = l.address;
    block["size"] = l.size;
    block["requested_size"] = l.size;
    block["state"] = "active_allocated";
    block["frames"] = frames[i];
    py::dict segment;
    segment["device"] = l.device;
    segment["address"] = l.address;
    segment["total_size"] = l.size;
    segment["allocated_size"] = l.size;
    segment["active_size"] = l.size;
    segment["requested_size"] = l.size;
    segment["stream"] = 0;
    segment["segment_type"] = l.size <= c10::CachingAllocator::kSmallSize ? "small" : "large";
    segment["segment_pool_id"] = py::make_tuple(0, 0);
    segment["is_expandable"] = false;
    segment["frames"] = frames[i];
    py::list blocks;
    blocks.append(block);
    segment["blocks"] = blocks;
    segments.append(segment);
  }

  int devices = static_cast<int>(torch_tpu::runtime::DeviceRuntime::get().device_count());
  for (const auto& e : events) devices = std::max(devices, e.device + 1);
  std::vector<py::list> traces(static_cast<size_t>(devices));
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    py::dict entry;
    entry["action"] = action_name(e.action);
    entry["addr"] = e.address;
    entry["size"] = e.size;
    entry["stream"] = 0;
    entry["time_us"] = e.time_us;
    entry["frames"] = frames[live.size() + i];
    entry["compile_context"] = "N/A";
    entry["user_metadata"] = "";
    if (e.action == Action::OOM) entry["device_free"] = e.address;
    traces[static_cast<size_t>(e.device)].append(entry);
  }
  py::list device_traces;
  for (auto& t : traces) device_traces.append(t);

  py::dict settings;
  settings["expandable_segments"] = false;
  py::dict snapshot;
  snapshot["segments"] = segments;
  snapshot["device_traces"] = device_traces;
  snapshot["allocator_settings"] = settings;
  snapshot["external_annotations"] = py::list();
  return snapshot;
}

RecordContext record_context(const std::string& name) {
  if (name == "state") return RecordContext::STATE;
  if (name == "alloc") return RecordContext::ALLOC;
  if (name == "all") return RecordContext::ALL;
  return RecordContext::NEVER;
}

}  // namespace

void register_memory_bindings(py::module_& m) {
  m.def("_memory_device_stats", &device_stats);
  m.def("_reset_peak_memory_stats",
        [](int device) { dev::allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(device)); });
  m.def("_reset_accumulated_memory_stats",
        [](int device) { dev::allocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(device)); });
  // `context` and `stacks` as torch.cuda.memory._record_memory_history's,
  // already checked by the caller; `trace` is enabled == "all".
  m.def("_record_memory_history",
        [](const std::string& context, bool trace, size_t max_entries, const std::string& stacks) {
          dev::record_memory_history(record_context(context), trace, max_entries,
                                     stacks == "all" ? &gather_all_stacks : &gather_python_stack);
        });
  m.def("_memory_snapshot", &memory_snapshot);
}
