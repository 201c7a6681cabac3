// When each launched program ran on its device, for torch.profiler
// (device/program_profiler.h turns the spans into Kineto activities).
// Knows pjrt only: a span ends when the plugin's completion event for the
// program's results fires (PJRT_Event_OnReady), stamped on the clock
// torch's profiler uses (CLOCK_REALTIME nanoseconds, c10::getTime).
//
// Off unless a profiler session records tpu activity: then each launch
// costs one relaxed atomic load here and nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pjrt/pjrt_runtime.h"

namespace torch_tpu::runtime {

struct ProgramSpan {
  std::string name;
  std::vector<std::pair<std::string, std::string>> details;  // shown in the trace event's args
  int device = 0;
  uint64_t correlation = 0;  // the profiler's id of the host op that launched it (0: none)
  int64_t launched_ns = 0;   // the host handed the program to the plugin
  // Filled by timeline_stop: the program started once launched and once the
  // earlier programs that ended before it had ended (it may have waited for
  // them); it ended when its results became ready.
  int64_t start_ns = 0, end_ns = 0;
  int64_t bytes_in = 0, bytes_out = 0;
};

int64_t timeline_clock_ns();
bool timeline_on();
void timeline_start();
// Stops recording, waits for the recorded programs to finish, and returns
// their spans in launch order.
std::vector<ProgramSpan> timeline_stop();
// Records a program launched at span.launched_ns whose results include
// `output` (null: a program without results, ended at its launch).
void timeline_record(ProgramSpan span, const pjrt::Buffer* output);

}  // namespace torch_tpu::runtime
