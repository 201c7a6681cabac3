#include "pjrt/launch_queue.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "pjrt/pjrt_runtime.h"

namespace torch_tpu::pjrt {

namespace {

// How long the worker keeps looking for a next job before it sleeps, and a
// waiter for its ticket before it sleeps: ops a few microseconds apart then
// pass without the futex wake-ups that would cost more than the launch.
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr auto kWaiterSpin = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <typename Done>
bool spin_until(Done done, std::chrono::microseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int k = 0;; ++k) {
    if (done()) return true;
    if ((k & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
    cpu_relax();
  }
}

bool queue_turned_off() {
  const char* v = std::getenv("TORCH_TPU_LAUNCH_QUEUE");
  return v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
}

}  // namespace

LaunchQueue& LaunchQueue::get() {
  // Leaked on purpose, as the runtime is: buffers are released through it
  // during interpreter shutdown.
  static LaunchQueue* queue = new LaunchQueue();
  return *queue;
}

LaunchQueue::LaunchQueue() {
  if (queue_turned_off()) return;
  // Running before the worker starts: a worker that found the queue empty
  // and not running would end at once.
  state_.store(State::Running, std::memory_order_release);
  std::thread worker([this] { run_worker(); });
  worker_id_ = worker.get_id();  // read by jobs, which the queue's mutex orders after this
  worker.detach();
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { pthread_atfork(&LaunchQueue::before_fork, nullptr, &LaunchQueue::in_forked_child); });
}

void LaunchQueue::Job::operator()() {
  if (run) {
    run();
  } else {
    release_queued_output(*released, index);
  }
}

uint64_t LaunchQueue::push(std::function<void()> job) { return enqueue(Job{std::move(job), nullptr, 0}); }

uint64_t LaunchQueue::push_release(std::shared_ptr<QueuedOutputs> outputs, size_t index) {
  return enqueue(Job{nullptr, std::move(outputs), index});
}

uint64_t LaunchQueue::enqueue(Job&& job) {
  const State state = state_.load(std::memory_order_acquire);
  // A forked child does not own the parent's plugin objects: what it
  // inherited is leaked, never released (as DeviceRuntime::in_bad_fork).
  if (state == State::ForkedChild) return 0;
  // The worker's own jobs may release buffers: queuing those behind a full
  // queue it alone empties would never return.
  if (state == State::Running && !on_worker()) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (jobs_.size() >= kCapacity && state_.load(std::memory_order_relaxed) == State::Running) {
      ++blocked_pushers_;
      room_freed_.wait(lock);
      --blocked_pushers_;
    }
    if (state_.load(std::memory_order_relaxed) == State::Running) {
      jobs_.push(std::move(job));
      // Under the lock: tickets follow the queue's order.
      const uint64_t ticket = pushed_.fetch_add(1, std::memory_order_acq_rel) + 1;
      const bool wake = worker_sleeping_;
      lock.unlock();
      if (wake) work_arrived_.notify_one();
      return ticket;
    }
  }
  // Off, stopped or on the worker: here, after what is already queued (a
  // job must not overtake those before it).
  if (!on_worker() && state_.load(std::memory_order_acquire) == State::Stopped) {
    wait(pushed_.load(std::memory_order_acquire));
  }
  job();
  return 0;
}

void LaunchQueue::wait(uint64_t ticket) {
  if (state_.load(std::memory_order_acquire) == State::ForkedChild) {
    if (completed_.load(std::memory_order_acquire) >= ticket) return;
    throw PjrtError(
        "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use the 'spawn' "
        "start method");
  }
  if (completed_.load(std::memory_order_acquire) >= ticket) return;
  if (on_worker()) throw PjrtError("internal: the launch queue's worker waited for a later job");
  if (spin_until([&] { return completed_.load(std::memory_order_acquire) >= ticket; }, kWaiterSpin)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++waiters_;
  jobs_done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= ticket; });
  --waiters_;
}

void LaunchQueue::run_worker() {
  // The worker blocks every signal, as do the plugin's threads it starts
  // (they inherit its mask): a process-directed signal (Ctrl-C's SIGINT)
  // must reach the Python thread. Python's handler run on another thread
  // only marks the signal, and a main thread busy in ops that never release
  // the GIL does not look at it. Blocked here, not around the thread's
  // creation: a signal sent while the creating thread blocked it would go
  // to some other thread.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  uint64_t popped = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (jobs_.empty()) {
      lock.unlock();
      spin_until([&] { return pushed_.load(std::memory_order_acquire) != popped; }, kWorkerSpin);
      lock.lock();
      while (jobs_.empty()) {
        if (state_.load(std::memory_order_relaxed) != State::Running) {
          jobs_done_.notify_all();
          return;  // stopped, with nothing left to run
        }
        worker_sleeping_ = true;
        work_arrived_.wait(lock);
        worker_sleeping_ = false;
      }
    }
    Job job = jobs_.pop();
    ++popped;
    // A full queue's pushers wake when half of it has run, not at each
    // job: a host ahead of the device then sleeps once per half a queue,
    // not once per op.
    if (blocked_pushers_ > 0 && jobs_.size() <= kCapacity / 2) room_freed_.notify_all();
    lock.unlock();
    job();
    job = Job{};  // what it held (buffers, executables) goes before it counts as done
    lock.lock();
    completed_.fetch_add(1, std::memory_order_acq_rel);
    if (waiters_ > 0) jobs_done_.notify_all();
  }
}

void LaunchQueue::stop() {
  if (state_.load(std::memory_order_acquire) != State::Running || on_worker()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  if (state_.load(std::memory_order_relaxed) != State::Running) return;
  state_.store(State::Stopped, std::memory_order_release);
  const uint64_t last = pushed_.load(std::memory_order_acquire);
  work_arrived_.notify_one();
  room_freed_.notify_all();
  ++waiters_;
  jobs_done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= last; });
  --waiters_;
}

void LaunchQueue::hold_for_test() {
  if (!active() || on_worker()) return;  // run here, the hold would never end
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    held_ = true;
  }
  push([this] {
    std::unique_lock<std::mutex> lock(held_mutex_);
    hold_running_ = true;
    held_released_.notify_all();
    held_released_.wait(lock, [this] { return !held_; });
    hold_running_ = false;
  });
  // Returns once the worker is inside the hold, not while it still runs
  // what was queued before (a release behind a busy machine): what the
  // caller queues next then waits behind a running hold, so a full queue
  // is the hold and kCapacity jobs, whatever ran before.
  std::unique_lock<std::mutex> lock(held_mutex_);
  held_released_.wait(lock, [this] { return hold_running_; });
}

void LaunchQueue::release_for_test() {
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    held_ = false;
  }
  held_released_.notify_all();
}

void LaunchQueue::before_fork() {
  // The child gets no worker: what the parent queued runs first, so no
  // buffer the child inherits is still waiting for a job.
  LaunchQueue& q = get();
  if (q.active() && !q.on_worker()) q.drain();
}

void LaunchQueue::in_forked_child() { get().state_.store(State::ForkedChild, std::memory_order_release); }

}  // namespace torch_tpu::pjrt
