// Counters a user reads while debugging (torch_tpu.metrics()).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/eager_mode.h"

namespace torch_tpu::runtime {

struct Metrics {
  std::atomic<int64_t> ops_dispatched{0};
  std::atomic<int64_t> programs_executed{0};
  std::atomic<int64_t> host_waits{0};
  std::atomic<int64_t> bytes_to_device{0};
  std::atomic<int64_t> bytes_to_host{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_nanos{0};
  std::atomic<int64_t> graph_replays{0};      // torch.compile graph calls that reused a captured program
  std::atomic<int64_t> op_cache_replays{0};   // Strict ops that replayed a captured program (exec/op_cache.h)
  std::atomic<int64_t> op_cache_captures{0};  // Strict op signatures captured for replay
  // DeferAndFuse flushes launched as a remembered step, the ops they matched
  // instead of recording, and replays that became a recorded program (exec/step_replay.h).
  std::atomic<int64_t> step_replays{0};
  std::atomic<int64_t> step_replay_ops{0};
  std::atomic<int64_t> step_replay_fallbacks{0};
  std::atomic<int64_t> live_device_bytes{0};
  std::atomic<int64_t> peak_device_bytes{0};
  // Of the programs compiled or loaded since the last reset, the most
  // scratch memory one needs and the most argument bytes one updates in
  // place (XLA's buffer assignment): an in-place op that copies its tensor
  // instead shows that tensor's size as scratch.
  std::atomic<int64_t> program_temp_bytes_peak{0};
  std::atomic<int64_t> program_alias_bytes_peak{0};
  // pjrt::host_to_device_buffers() at the last reset: "uploads" counts from there.
  std::atomic<int64_t> uploads_before_reset{0};

  // Lowered ops dispatched, per eager mode (indexed by EagerMode): counted
  // on every op, so a relaxed atomic each, not a locked map keyed by name.
  static constexpr int kEagerModes = 3;
  std::atomic<int64_t> ops_by_mode[kEagerModes] = {};

  std::mutex mutex;
  std::map<std::string, int64_t> cpu_fallbacks;  // per op
  std::map<std::string, int64_t> flushes;        // DeferAndFuse, per reason

  void add_live_bytes(int64_t delta);
  void note_program_memory(int64_t temp_bytes, int64_t alias_bytes);
  void count_fallback(const std::string& op);
  void count_flush(const std::string& reason);
  void count_op_in_mode(EagerMode mode) { ops_by_mode[static_cast<int>(mode)].fetch_add(1, std::memory_order_relaxed); }
  // `mode` is eager_mode_name's text; an unknown name throws std::invalid_argument.
  void count_op_in_mode(const char* mode);
  std::map<std::string, int64_t> snapshot();
  void reset();
};

Metrics& metrics();

// StableHLO dot precision for float32 matmuls: DEFAULT, HIGH or HIGHEST.
std::string matmul_precision();
// The same as a number for cache keys: 0 DEFAULT (medium), 1 HIGH, 2 HIGHEST.
int matmul_precision_level();
void set_matmul_precision(const std::string& torch_name);  // medium|high|highest
std::string matmul_precision_torch_name();
// The calling thread's override ("" clears it): a torch.tpu.precision
// block, a compiled graph's trace. Returns the override it replaces ("" for
// none), to restore it.
std::string set_thread_matmul_precision(const std::string& torch_name);

}  // namespace torch_tpu::runtime
