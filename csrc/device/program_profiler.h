// tpu programs in torch.profiler: each launch (an eager op's program, a
// DeferAndFuse flush, a compiled graph) is a device event with its name,
// its device time, bytes in and out, and whether it compiled.
//
// Route: PyTorch 2.13's PrivateUse1 activity profiler
// (torch/csrc/profiler/standalone/privateuse1_profiler.h): a Kineto child
// profiler that torch.profiler starts with ProfilerActivity.PrivateUse1
// and whose activities it merges into its own trace. Kernel activities of a
// renamed PrivateUse1 backend become events of device type tpu, so
// key_averages() counts their time in the "Self tpu"/"tpu total" columns and
// export_chrome_trace() writes them on the device's own row, linked to the
// host op that launched them. The older route, ProfilerStubs
// (registerPrivateUse1Methods), only times host ranges between two device
// markers on the legacy autograd profiler; it cannot name a fused program
// that runs after the ops that recorded it.
//
// Device time comes from runtime/program_timeline.h (PJRT completion events).
#pragma once

#include <string>
#include <vector>

#include "runtime/device_runtime.h"

namespace torch_tpu::device {

// Whether a profiler session records tpu programs (a relaxed load).
bool programs_profiled();

// How a launch got its executable, as the trace shows it.
enum class ProgramOrigin { Compiled, DiskCache, CacheHit, Replayed };

// Tells how an executable lookup found its program, from the compilation
// cache's counters around it (another thread's lookup at the same moment
// may count too: the profile's word, not the cache's).
class ExecutableLookup {
 public:
  ExecutableLookup();
  ProgramOrigin origin() const;

 private:
  int64_t compiles_, misses_;
};

// Records one launch (called by exec/program_launch.cpp while profiled).
// `ops`: the op names it ran, for the event's args (may be null).
void profile_launch(const std::string& name, ProgramOrigin origin, const std::vector<std::string>* ops, int device,
                    int64_t launched_ns, int64_t bytes_in, const std::vector<runtime::BufferPtr>& results);

// The name of the next graph this thread captures (its function, forward
// or backward; torch_tpu/compile.py), taken by the capture ("" when none).
void name_next_graph(std::string name);
std::string take_graph_name();

// The reason of the DeferAndFuse flush running on this thread, for the
// fused program's name (set by pending_work.cpp around a flush).
class FlushReasonScope {
 public:
  explicit FlushReasonScope(const char* reason);
  ~FlushReasonScope();

 private:
  const char* previous_;
};
const char* current_flush_reason();  // null outside a flush

}  // namespace torch_tpu::device
