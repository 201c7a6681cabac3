#include "metrics.h"

#include <stdexcept>
#include <string>

#include "pjrt/pjrt_runtime.h"

namespace torch_tpu::runtime {

Metrics& metrics() {
  static Metrics* m = new Metrics();  // never destroyed: read during shutdown
  return *m;
}

void Metrics::add_live_bytes(int64_t delta) {
  int64_t now = live_device_bytes.fetch_add(delta) + delta;
  int64_t peak = peak_device_bytes.load();
  while (now > peak && !peak_device_bytes.compare_exchange_weak(peak, now)) {
  }
}

namespace {
void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t now = peak.load();
  while (value > now && !peak.compare_exchange_weak(now, value)) {
  }
}
}  // namespace

void Metrics::note_program_memory(int64_t temp_bytes, int64_t alias_bytes) {
  raise_to(program_temp_bytes_peak, temp_bytes);
  raise_to(program_alias_bytes_peak, alias_bytes);
}

void Metrics::count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex);
  cpu_fallbacks[op] += 1;
}

static_assert(static_cast<int>(EagerMode::DeferAndFuse) + 1 == Metrics::kEagerModes, "a counter per eager mode");

void Metrics::count_op_in_mode(const char* mode) {
  // eager_mode_name returns one literal per mode: its address finds the mode
  // without comparing text.
  for (EagerMode m : {EagerMode::Strict, EagerMode::DeferAndFuse, EagerMode::Debug}) {
    if (mode == eager_mode_name(m)) return count_op_in_mode(m);
  }
  count_op_in_mode(eager_mode_from_name(mode));
}

void Metrics::count_flush(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex);
  flushes[reason] += 1;
}

std::map<std::string, int64_t> Metrics::snapshot() {
  std::map<std::string, int64_t> s{
      {"ops_dispatched", ops_dispatched},
      {"programs_executed", programs_executed},
      {"host_waits", host_waits},
      {"bytes_to_device", bytes_to_device},
      {"bytes_to_host", bytes_to_host},
      {"cache_hits", cache_hits},
      {"cache_misses", cache_misses},
      {"compiles", compiles},
      {"compile_nanos", compile_nanos},
      {"live_device_bytes", live_device_bytes},
      {"peak_device_bytes", peak_device_bytes},
      {"graph_replays", graph_replays},
      {"op_cache_replays", op_cache_replays},
      {"op_cache_captures", op_cache_captures},
      {"step_replays", step_replays},
      {"step_replay_ops", step_replay_ops},
      {"step_replay_fallbacks", step_replay_fallbacks},
      {"program_temp_bytes_peak", program_temp_bytes_peak},
      {"program_alias_bytes_peak", program_alias_bytes_peak},
      {"uploads", pjrt::host_to_device_buffers() - uploads_before_reset},
  };
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [op, n] : cpu_fallbacks) s["cpu_fallback::" + op] = n;
  for (const auto& [reason, n] : flushes) s["flush::" + reason] = n;
  // A mode that dispatched no op since the last reset is left out.
  for (int m = 0; m < kEagerModes; ++m) {
    const int64_t n = ops_by_mode[m].load(std::memory_order_relaxed);
    if (n > 0) s[std::string("ops_in_mode::") + eager_mode_name(static_cast<EagerMode>(m))] = n;
  }
  return s;
}

void Metrics::reset() {
  ops_dispatched = programs_executed = host_waits = bytes_to_device = bytes_to_host = 0;
  cache_hits = cache_misses = compiles = compile_nanos = graph_replays = 0;
  op_cache_replays = op_cache_captures = program_temp_bytes_peak = program_alias_bytes_peak = 0;
  step_replays = step_replay_ops = step_replay_fallbacks = 0;
  uploads_before_reset = pjrt::host_to_device_buffers();
  for (auto& n : ops_by_mode) n = 0;
  peak_device_bytes = live_device_bytes.load();
  std::lock_guard<std::mutex> lock(mutex);
  cpu_fallbacks.clear();
  flushes.clear();
}

namespace {
// Read by every op (its cache key and its lowering), so held as numbers, not
// names behind a mutex. 0 medium (TorchTPU's default: one bf16 pass, f32
// accumulation), 1 high, 2 highest.
constexpr const char* kTorchNames[] = {"medium", "high", "highest"};
constexpr const char* kStableHloNames[] = {"DEFAULT", "HIGH", "HIGHEST"};
std::atomic<int> process_precision{0};

int precision_level(const std::string& torch_name) {
  for (int level = 0; level < 3; ++level) {
    if (torch_name == kTorchNames[level]) return level;
  }
  throw std::invalid_argument("matmul precision must be medium, high or highest, got " + torch_name);
}

// The calling thread's own precision, over the process setting: a
// torch.tpu.precision block, a compiled graph's trace (at the precision in
// force at its call), a linalg kernel's full-precision products. -1: none.
thread_local int thread_precision_override = -1;
}  // namespace

void set_matmul_precision(const std::string& torch_name) {
  process_precision.store(precision_level(torch_name), std::memory_order_relaxed);
}

std::string matmul_precision_torch_name() { return kTorchNames[process_precision.load(std::memory_order_relaxed)]; }

std::string set_thread_matmul_precision(const std::string& torch_name) {
  const int previous = thread_precision_override;
  thread_precision_override = torch_name.empty() ? -1 : precision_level(torch_name);
  return previous < 0 ? "" : kTorchNames[previous];
}

int matmul_precision_level() {
  return thread_precision_override >= 0 ? thread_precision_override : process_precision.load(std::memory_order_relaxed);
}

std::string matmul_precision() { return kStableHloNames[matmul_precision_level()]; }

}  // namespace torch_tpu::runtime
