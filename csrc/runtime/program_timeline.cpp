#include "runtime/program_timeline.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace torch_tpu::runtime {

namespace {

// One recorded launch. The plugin's callback writes `ready_ns` from its own
// thread; the record lives until timeline_stop saw the stamp.
struct Launch {
  ProgramSpan span;
  std::atomic<int64_t> ready_ns{0};
  const PJRT_Api* api = nullptr;
  PJRT_Event* event = nullptr;
};

struct Timeline {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::vector<std::unique_ptr<Launch>> launches;
};

Timeline& timeline() {
  static auto* t = new Timeline();  // leaked: programs may complete during interpreter shutdown
  return *t;
}

void on_ready(PJRT_Error* error, void* user_arg) {
  auto* launch = static_cast<Launch*>(user_arg);
  if (error) {
    // A failed program still ended; its error reaches the user through its results.
    PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
    launch->api->PJRT_Error_Destroy(&destroy);
  }
  launch->ready_ns.store(std::max<int64_t>(timeline_clock_ns(), 1), std::memory_order_release);
}

// Waits for the callback of a launch whose event the plugin had not fired.
void await_stamp(Launch& launch) {
  if (launch.ready_ns.load(std::memory_order_acquire) != 0) return;
  PJRT_Event_Await_Args await{PJRT_Event_Await_Args_STRUCT_SIZE, nullptr, launch.event};
  if (PJRT_Error* error = launch.api->PJRT_Event_Await(&await)) {
    PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
    launch.api->PJRT_Error_Destroy(&destroy);
  }
  // The plugin may call back from its own thread just after the event is ready.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (launch.ready_ns.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
}

}  // namespace

int64_t timeline_clock_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

bool timeline_on() { return timeline().on.load(std::memory_order_relaxed); }

void timeline_start() {
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.on.store(true);
}

std::vector<ProgramSpan> timeline_stop() {
  Timeline& t = timeline();
  std::vector<std::unique_ptr<Launch>> launches;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.on.store(false);
    launches.swap(t.launches);
  }
  std::map<int, std::set<int64_t>> earlier_ends;  // per device: when the programs launched so far ended
  std::vector<ProgramSpan> spans;
  spans.reserve(launches.size());
  for (auto& launch : launches) {
    ProgramSpan& span = launch->span;
    if (launch->event) {
      await_stamp(*launch);
      span.end_ns = launch->ready_ns.load(std::memory_order_acquire);
      if (span.end_ns == 0) {
        // The plugin never called back: it still may, so the record stays alive.
        span.end_ns = timeline_clock_ns();
        launch.release();
      } else {
        PJRT_Event_Destroy_Args destroy{PJRT_Event_Destroy_Args_STRUCT_SIZE, nullptr, launch->event};
        launch->api->PJRT_Event_Destroy(&destroy);
      }
    } else {
      span.end_ns = span.launched_ns;
    }
    // The device may run independent programs at once (XLA:CPU does): a
    // program waited for the earlier ones that ended before it did, not
    // for those it overlapped.
    std::set<int64_t>& ends = earlier_ends[span.device];
    auto it = ends.upper_bound(span.end_ns);
    const int64_t waited_for = it == ends.begin() ? 0 : *std::prev(it);
    span.start_ns = std::min(std::max(span.launched_ns, waited_for), span.end_ns);
    ends.insert(span.end_ns);
    spans.push_back(std::move(span));
  }
  return spans;
}

void timeline_record(ProgramSpan span, const pjrt::Buffer* output) {
  auto launch = std::make_unique<Launch>();
  launch->span = std::move(span);
  if (output) {
    const PJRT_Api* api = output->client()->plugin()->api();
    PJRT_Buffer_ReadyEvent_Args ready{PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE, nullptr, output->raw(), nullptr};
    if (PJRT_Error* error = api->PJRT_Buffer_ReadyEvent(&ready)) {
      PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
      api->PJRT_Error_Destroy(&destroy);
    } else {
      launch->api = api;
      launch->event = ready.event;
      PJRT_Event_OnReady_Args args{PJRT_Event_OnReady_Args_STRUCT_SIZE, nullptr, ready.event, &on_ready, launch.get()};
      if (PJRT_Error* error = api->PJRT_Event_OnReady(&args)) {
        PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
        api->PJRT_Error_Destroy(&destroy);
        launch->ready_ns.store(timeline_clock_ns());  // no callback will come: end at the event, awaited at stop
      }
    }
  }
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mutex);
  // A session stopped between the caller's check and here: nobody will read it.
  if (!t.on.load(std::memory_order_relaxed)) {
    if (launch->event) {
      await_stamp(*launch);
      PJRT_Event_Destroy_Args destroy{PJRT_Event_Destroy_Args_STRUCT_SIZE, nullptr, launch->event};
      launch->api->PJRT_Event_Destroy(&destroy);
    }
    return;
  }
  t.launches.push_back(std::move(launch));
}

}  // namespace torch_tpu::runtime
