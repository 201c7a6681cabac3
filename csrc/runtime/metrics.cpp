#include "metrics.h"

#include <stdexcept>

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

void Metrics::count_op_in_mode(const char* mode) {
  std::lock_guard<std::mutex> lock(mutex);
  ops_by_mode[mode] += 1;
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
      {"program_temp_bytes_peak", program_temp_bytes_peak},
      {"program_alias_bytes_peak", program_alias_bytes_peak},
  };
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [op, n] : cpu_fallbacks) s["cpu_fallback::" + op] = n;
  for (const auto& [reason, n] : flushes) s["flush::" + reason] = n;
  for (const auto& [mode, n] : ops_by_mode) s["ops_in_mode::" + mode] = n;
  return s;
}

void Metrics::reset() {
  ops_dispatched = programs_executed = host_waits = bytes_to_device = bytes_to_host = 0;
  cache_hits = cache_misses = compiles = compile_nanos = graph_replays = 0;
  op_cache_replays = op_cache_captures = program_temp_bytes_peak = program_alias_bytes_peak = 0;
  peak_device_bytes = live_device_bytes.load();
  std::lock_guard<std::mutex> lock(mutex);
  cpu_fallbacks.clear();
  flushes.clear();
  ops_by_mode.clear();
}

namespace {
std::mutex precision_mutex;
std::string precision_name = "medium";  // TorchTPU's default: one bf16 pass, f32 accumulation

void set_matmul_precision_check(const std::string& torch_name) {
  if (torch_name != "medium" && torch_name != "high" && torch_name != "highest") {
    throw std::invalid_argument("matmul precision must be medium, high or highest, got " + torch_name);
  }
}
}  // namespace

void set_matmul_precision(const std::string& torch_name) {
  set_matmul_precision_check(torch_name);
  std::lock_guard<std::mutex> lock(precision_mutex);
  precision_name = torch_name;
}

std::string matmul_precision_torch_name() {
  std::lock_guard<std::mutex> lock(precision_mutex);
  return precision_name;
}

namespace {
// A compiled graph traces at the precision it was compiled with, on its own
// thread only: other threads keep the process setting meanwhile.
thread_local std::string thread_precision_override;
}  // namespace

void set_thread_matmul_precision(const std::string& torch_name) {
  if (!torch_name.empty()) set_matmul_precision_check(torch_name);
  thread_precision_override = torch_name;
}

std::string matmul_precision() {
  std::string n = thread_precision_override.empty() ? matmul_precision_torch_name() : thread_precision_override;
  return n == "highest" ? "HIGHEST" : n == "high" ? "HIGH" : "DEFAULT";
}

}  // namespace torch_tpu::runtime
