#include "device/device_allocator.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>

#include "device/host_memory.h"
#include "device/storage_buffer.h"
#include "runtime/device_runtime.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::RecordContext;
using Action = c10::CachingDeviceAllocator::TraceEntry::Action;

constexpr int kMaxDevices = 64;

// Everything counted about device bytes, under one lock: an allocation's
// out-of-memory check and its counting are one step, so two threads cannot
// both pass the check for the last free bytes.
struct Accounting {
  std::mutex mutex;
  DeviceStats stats[kMaxDevices];
  int64_t allocated_on_all_devices = 0;  // what the XLA:CPU plugin's devices take from the host together

  // Read without the lock on every allocation and free.
  std::atomic<RecordContext> record_stacks{RecordContext::NEVER};
  std::atomic<GatherContextFn> gather{nullptr};
  bool record_events = false;
  size_t max_events = 0;
  std::deque<MemoryEvent> events;
};

Accounting& accounting() {
  static auto* a = new Accounting();  // never destroyed: storages die at exit
  return *a;
}

void check_device(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "tpu: device index ", device, " out of range");
}

// CUDA's allocator's check (and message) for a statistics call's device.
void check_stats_device(int device) {
  TORCH_CHECK(device >= 0 && device < static_cast<int>(runtime::DeviceRuntime::get().device_count()),
              "Invalid device argument ", device, ": did you call init?");
}

// The pools CUDA's statistics split by: allocations of up to 1 MiB are
// "small_pool". We keep no pools; the split is by size alone, so that
// code reading CUDA's keys reads the same sums.
StatType pool_of(size_t nbytes) {
  return nbytes <= c10::CachingAllocator::kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

// A storage is one allocation, one segment and one active block: nothing is
// cached or split, so allocated, reserved, active and requested bytes move
// together. `move` is Stat::increase or Stat::decrease.
template <typename Move>
void count_storage(DeviceStats& s, size_t nbytes, Move move) {
  for (StatType t : {StatType::AGGREGATE, pool_of(nbytes)}) {
    const auto i = static_cast<size_t>(t);
    for (c10::CachingAllocator::Stat* blocks : {&s.allocation[i], &s.segment[i], &s.active[i]}) {
      move(*blocks, 1);
    }
    for (c10::CachingAllocator::Stat* bytes :
         {&s.allocated_bytes[i], &s.reserved_bytes[i], &s.active_bytes[i], &s.requested_bytes[i]}) {
      move(*bytes, nbytes);
    }
  }
}

void count_allocation(DeviceStats& s, size_t nbytes) {
  count_storage(s, nbytes, [](c10::CachingAllocator::Stat& stat, size_t amount) { stat.increase(amount); });
  s.num_device_alloc += 1;
}

void count_free(DeviceStats& s, size_t nbytes) {
  count_storage(s, nbytes, [](c10::CachingAllocator::Stat& stat, size_t amount) { stat.decrease(amount); });
  s.num_device_free += 1;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Under the accounting lock.
void record_event(Accounting& a, Action action, int device, uintptr_t address, size_t size,
                  std::shared_ptr<c10::GatheredContext> context) {
  if (!a.record_events || a.max_events == 0) return;
  if (a.events.size() >= a.max_events) a.events.pop_front();
  a.events.push_back({action, device, address, size, now_us(), std::move(context)});
}

// The calling thread's stack when `needed` events keep one; taken before the
// accounting lock (a stack may take the GIL, which a thread waiting for that
// lock may hold).
std::shared_ptr<c10::GatheredContext> gather_context(RecordContext needed) {
  Accounting& a = accounting();
  if (a.record_stacks.load(std::memory_order_relaxed) < needed) return nullptr;
  GatherContextFn gather = a.gather.load(std::memory_order_relaxed);
  return gather ? gather() : nullptr;
}

// What one device can hold: the plugin's limit where it reports one (TPU,
// GPU); the XLA:CPU plugin reports none, and its devices share host memory
// (host_memory_total: physical memory or the cgroup's limit).
int64_t device_capacity(int device, bool* shared_host) {
  static std::once_flag once;
  static std::vector<int64_t> limits;
  std::call_once(once, [] {
    auto& client = runtime::DeviceRuntime::get().client();
    for (size_t d = 0; d < client.devices().size(); ++d) {
      auto stats = client.memory_stats(d);
      limits.push_back(stats.available && stats.bytes_limit > 0 ? stats.bytes_limit : 0);
    }
  });
  const int64_t limit = device < static_cast<int>(limits.size()) ? limits[device] : 0;
  *shared_host = limit == 0;
  return limit > 0 ? limit : host_memory_total();
}

// What the host can still give storages: what it has available less what
// storages without a buffer yet will take when written.
int64_t host_bytes_free() { return std::max<int64_t>(host_memory_available() - bytes_awaiting_buffers(), 0); }

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// torch.cuda.set_per_process_memory_fraction's limit: the share of a
// device's capacity this process may allocate (1 unless set).
std::atomic<double>& memory_fraction(int device) {
  static std::atomic<double> fractions[kMaxDevices] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto& f : fractions) f.store(1.0);
  });
  return fractions[device];
}

// What this process may allocate on `device`.
int64_t allowed_bytes(int device, int64_t capacity) {
  return static_cast<int64_t>(static_cast<double>(capacity) * memory_fraction(device).load());
}

// Bytes allocated by live storages that count against `device`'s capacity;
// under the accounting lock.
int64_t bytes_in_use(const Accounting& a, int device, bool shared_host) {
  if (shared_host) return a.allocated_on_all_devices;
  return a.stats[device].allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
}

// Reading the host's free memory costs about 10 microseconds, ten times an
// op's dispatch, so it is read only where it can matter: at an allocation
// of this size or more (writing its bytes costs far more than the read),
// and once this much has been allocated in smaller ones since the last
// read, so small allocations cannot creep unseen more than this past what
// is free (the kernel keeps a larger reserve than that).
constexpr int64_t kHostReadEveryBytes = int64_t{16} << 20;
std::atomic<int64_t> allocated_since_host_read{0};

// Whether the host is to be read before allocating `nbytes`.
bool host_read_due(int64_t nbytes) {
  if (nbytes >= kHostReadEveryBytes) return true;
  if (allocated_since_host_read.fetch_add(nbytes, std::memory_order_relaxed) + nbytes < kHostReadEveryBytes) {
    return false;
  }
  allocated_since_host_read.store(0, std::memory_order_relaxed);
  return true;
}

// Storages count from their allocation, as CUDA's allocator counts them
// (torch.empty allocates), whether or not a buffer exists yet: a tensor
// the device cannot hold raises at the call that asked for it, not at some
// later op that first writes it. On the XLA:CPU plugin that is what the
// host can still give, not its total: past that the kernel's OOM killer
// would take the process instead of an OutOfMemoryError. A refusal counts
// in num_ooms and, while history is recorded, as an "oom" event.
void reserve_device_bytes(int device, size_t nbytes, const std::shared_ptr<c10::GatheredContext>& context) {
  bool shared_host = false;
  const int64_t capacity = device_capacity(device, &shared_host);
  const int64_t allowed = allowed_bytes(device, capacity);
  int64_t host_free = shared_host && host_read_due(static_cast<int64_t>(nbytes)) ? host_bytes_free() : INT64_MAX;
  // Pages malloc kept from dead storages count as used in MemAvailable;
  // they go back to the kernel before a refusal for want of host memory.
  if (static_cast<int64_t>(nbytes) > host_free && return_free_malloc_pages()) host_free = host_bytes_free();
  Accounting& a = accounting();
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    const int64_t in_use = bytes_in_use(a, device, shared_host);
    const auto n = static_cast<int64_t>(nbytes);
    if (n > allowed - in_use) {
      refusal =
          "tpu out of memory. Tried to allocate " + format_bytes(static_cast<double>(nbytes)) +
          ". tpu:" + std::to_string(device) + " has a total capacity of " +
          format_bytes(static_cast<double>(capacity)) +
          (shared_host ? " (host memory, shared by every device of the XLA:CPU plugin)" : "") +
          (allowed < capacity ? ", of which this process may allocate " + format_bytes(static_cast<double>(allowed)) +
                                    " (set_per_process_memory_fraction) and "
                              : std::string(", of which ")) +
          format_bytes(static_cast<double>(in_use)) + " is allocated by live tpu tensors.";
    } else if (n > host_free) {
      refusal = "tpu out of memory. Tried to allocate " + format_bytes(static_cast<double>(nbytes)) +
                ". tpu:" + std::to_string(device) +
                " allocates from host memory (shared by every device of the XLA:CPU plugin), of which " +
                format_bytes(static_cast<double>(host_free)) + " of " + format_bytes(static_cast<double>(capacity)) +
                " is free (MemAvailable, within the cgroup's memory limit where one is set); " +
                format_bytes(static_cast<double>(in_use)) + " is allocated by live tpu tensors.";
    }
    if (refusal.empty()) {
      count_allocation(a.stats[device], nbytes);
      a.allocated_on_all_devices += n;
    } else {
      a.stats[device].num_ooms += 1;
      const int64_t free = std::max<int64_t>(std::min(allowed - in_use, host_free), 0);
      const bool with_stack = a.record_stacks.load(std::memory_order_relaxed) >= RecordContext::ALLOC;
      record_event(a, Action::OOM, device, static_cast<uintptr_t>(free), nbytes, with_stack ? context : nullptr);
    }
  }
  TORCH_CHECK_WITH(OutOfMemoryError, refusal.empty(), refusal);
  runtime::metrics().add_live_bytes(static_cast<int64_t>(nbytes));
}

}  // namespace

void release_device_bytes(int device, size_t nbytes, uintptr_t address) {
  if (nbytes == 0) return;
  auto context = gather_context(RecordContext::ALL);
  Accounting& a = accounting();
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    count_free(a.stats[device], nbytes);
    a.allocated_on_all_devices -= static_cast<int64_t>(nbytes);
    // No stream holds a block back and no cache keeps it: the free completes
    // and its segment goes back at once.
    record_event(a, Action::FREE_REQUESTED, device, address, nbytes, context);
    record_event(a, Action::FREE_COMPLETED, device, address, nbytes, context);
    record_event(a, Action::SEGMENT_FREE, device, address, nbytes, context);
  }
  runtime::metrics().add_live_bytes(-static_cast<int64_t>(nbytes));
}

std::pair<int64_t, int64_t> device_memory_info(int device) {
  check_device(device);
  bool shared_host = false;
  const int64_t capacity = device_capacity(device, &shared_host);
  int64_t in_use = 0;
  {
    Accounting& a = accounting();
    std::lock_guard<std::mutex> lock(a.mutex);
    in_use = bytes_in_use(a, device, shared_host);
  }
  int64_t free = std::max<int64_t>(allowed_bytes(device, capacity) - in_use, 0);
  if (shared_host) free = std::min(free, host_bytes_free());  // what reserve_device_bytes would let through
  return {free, capacity};
}

void set_memory_fraction(int device, double fraction) {
  check_device(device);
  memory_fraction(device).store(fraction);
}

double get_memory_fraction(int device) {
  check_device(device);
  return memory_fraction(device).load();
}

c10::DataPtr TpuAllocator::allocate(size_t nbytes) {
  runtime::DeviceRuntime::get();  // raises in a child forked after the plugin started
  const int device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  check_device(device);
  // CUDA's allocator counts no empty allocation.
  if (nbytes == 0) return new_storage_buffer(device, 0, nullptr);
  auto context = gather_context(RecordContext::STATE);
  reserve_device_bytes(device, nbytes, context);
  c10::DataPtr ptr = new_storage_buffer(device, nbytes, context);
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  const auto address = reinterpret_cast<uintptr_t>(ptr.get());
  // context="state" keeps stacks on live storages only, not on events.
  if (a.record_stacks.load(std::memory_order_relaxed) < RecordContext::ALLOC) context.reset();
  // Every storage is its own segment (nothing is cached), so CUDA's pair of
  // events for an allocation that needed new device memory.
  record_event(a, Action::SEGMENT_ALLOC, device, address, nbytes, context);
  record_event(a, Action::ALLOC, device, address, nbytes, context);
  return ptr;
}

void TpuAllocator::copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const {
  // Storage copies go through `_copy_from` on tensors; raw pointers here are
  // fake addresses and cannot be copied byte-wise.
  TORCH_CHECK(false, "tpu: raw device pointer copies are not supported; copy tensors instead");
}

bool TpuAllocator::initialized() {
  return !runtime::DeviceRuntime::in_bad_fork() && runtime::DeviceRuntime::get().initialized();
}

void TpuAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  // Nothing is cached: a storage's bytes go back when it dies.
}

void TpuAllocator::recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) {
  // One stream per device: a block is never in use on another.
}

c10::CachingDeviceAllocator::DeviceStats TpuAllocator::getDeviceStats(c10::DeviceIndex device) {
  check_stats_device(device);
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.stats[device];
}

namespace {
// Every Stat of DeviceStats, for the resets, which treat them all alike.
template <typename Reset>
void for_each_stat(DeviceStats& s, Reset reset) {
  for (auto* per_pool : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                         &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (auto& stat : *per_pool) reset(stat);
  }
  reset(s.oversize_allocations);
  reset(s.oversize_segments);
}
}  // namespace

void TpuAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  check_stats_device(device);
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  DeviceStats& s = a.stats[device];
  for_each_stat(s, [](c10::CachingAllocator::Stat& stat) { stat.reset_accumulated(); });
  s.num_alloc_retries = 0;
  s.num_ooms = 0;
  s.num_sync_all_streams = 0;
  s.num_device_alloc = 0;
  s.num_device_free = 0;
}

void TpuAllocator::resetPeakStats(c10::DeviceIndex device) {
  check_stats_device(device);
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  DeviceStats& s = a.stats[device];
  for_each_stat(s, [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
}

std::pair<size_t, size_t> TpuAllocator::getMemoryInfo(c10::DeviceIndex device) {
  auto [free, total] = device_memory_info(device);
  return {static_cast<size_t>(free), static_cast<size_t>(total)};
}

TpuAllocator* allocator() {
  static TpuAllocator instance;
  return &instance;
}

void record_memory_history(RecordContext when, bool trace, size_t max_entries, GatherContextFn gather) {
  std::deque<MemoryEvent> dropped;  // stacks are released outside the lock
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.gather.store(gather);
  a.record_stacks.store(when);
  a.record_events = trace;
  a.max_events = trace ? max_entries : 0;
  if (!trace) {
    dropped.swap(a.events);
  } else {
    while (a.events.size() > a.max_events) {
      dropped.push_back(std::move(a.events.front()));
      a.events.pop_front();
    }
  }
}

std::vector<LiveAllocation> live_allocations() {
  std::vector<LiveAllocation> live;
  for_each_live_storage([&](const StorageBuffer& sb, uintptr_t address) {
    if (sb.nbytes > 0) live.push_back({sb.device, address, sb.nbytes, sb.allocated_by});
  });
  std::sort(live.begin(), live.end(), [](const LiveAllocation& x, const LiveAllocation& y) {
    return std::make_pair(x.device, x.address) < std::make_pair(y.device, y.address);
  });
  return live;
}

std::vector<MemoryEvent> memory_events() {
  Accounting& a = accounting();
  std::lock_guard<std::mutex> lock(a.mutex);
  record_event(a, Action::SNAPSHOT, 0, 0, 0, nullptr);
  return {a.events.begin(), a.events.end()};
}

}  // namespace torch_tpu::device
