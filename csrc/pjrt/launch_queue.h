// The launch queue: one thread of ours that makes the plugin calls a launch
// needs (execute, small uploads, and destroying buffers), in the order they
// were queued, so the thread that dispatches ops returns as soon as the call
// is queued.
// CUDA's stream launch queue does this in hardware; the PJRT C API has no
// asynchronous execute of its own (the XLA:CPU plugin runs a small program
// on the calling thread, and its execute costs the caller about 2 us either
// way: docs/performance.md).
//
// Order is the queue's one guarantee: a job runs after every job queued
// before it, so a program's arguments made by earlier queued programs exist
// when it runs. A thread that needs a queued result (a read to the host, a
// synchronize) waits for its job's ticket.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_tpu::pjrt {

struct QueuedOutputs;

class LaunchQueue {
 public:
  // The process's queue. Off (every job runs on the calling thread) when
  // TORCH_TPU_LAUNCH_QUEUE=0.
  static LaunchQueue& get();

  // Whether push() hands jobs to the worker (not off, stopped or in a child
  // forked after the worker started).
  bool active() const { return state_.load(std::memory_order_acquire) == State::Running; }
  // Queues `job` and returns its ticket: it has run once completed() reaches
  // it. Blocks while `kCapacity` jobs are waiting (a host far ahead of the
  // device waits, as CUDA's does when its queue is full). Not active: runs
  // `job` here (after the worker, if there is one, has run everything
  // before it) and returns its ticket. `job` must not throw.
  uint64_t push(std::function<void()> job);
  // Queues the release of a queued program's output `index` (every op's
  // result is one): the same as push() of a function that releases it,
  // without allocating that function on this thread for the worker to free.
  uint64_t push_release(std::shared_ptr<QueuedOutputs> outputs, size_t index);
  // Waits until every job up to `ticket` has run.
  void wait(uint64_t ticket);
  // Waits until every job queued before this call has run.
  void drain() { wait(pushed_.load(std::memory_order_acquire)); }
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  bool on_worker() const { return std::this_thread::get_id() == worker_id_; }
  // Jobs queued and not yet run (the one running included).
  uint64_t depth() const {
    return pushed_.load(std::memory_order_acquire) - completed_.load(std::memory_order_acquire);
  }
  // Tests: queues a job that holds the worker until release_for_test(), so
  // what is queued after it waits, deterministically; returns once the
  // worker is inside it.
  void hold_for_test();
  void release_for_test();
  // Runs what is queued and sends later jobs to their callers' threads: at
  // exit, once the plugin's static objects may be destroyed, no thread of
  // ours may be inside it.
  void stop();

 private:
  LaunchQueue();
  enum class State { Off, Running, Stopped, ForkedChild };
  static constexpr size_t kCapacity = 1024;
  struct Job {
    std::function<void()> run;                // or, when empty:
    std::shared_ptr<QueuedOutputs> released;  // release released->buffers[index]
    size_t index = 0;
    void operator()();
  };
  uint64_t enqueue(Job&& job);
  void run_worker();
  static void before_fork();
  static void in_forked_child();

  std::atomic<State> state_{State::Off};
  std::mutex mutex_;
  std::condition_variable work_arrived_, room_freed_, jobs_done_;
  // The waiting jobs, in a ring of kCapacity slots made once: queuing and
  // taking a job allocate nothing (a deque's blocks are allocated by the
  // pushing thread and freed by the worker, a pattern glibc's malloc serves
  // slowly).
  class Ring {
   public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    void push(Job&& job) {
      slots_[(head_ + size_) % kCapacity] = std::move(job);
      ++size_;
    }
    Job pop() {
      Job job = std::move(slots_[head_]);
      head_ = (head_ + 1) % kCapacity;
      --size_;
      return job;
    }

   private:
    std::unique_ptr<Job[]> slots_ = std::make_unique<Job[]>(kCapacity);
    size_t head_ = 0, size_ = 0;
  };
  Ring jobs_;  // under mutex_
  std::atomic<uint64_t> pushed_{0}, completed_{0};
  bool worker_sleeping_ = false;  // under mutex_
  int waiters_ = 0;               // under mutex_: threads in wait()
  int blocked_pushers_ = 0;       // under mutex_: threads in push() waiting for room
  std::thread::id worker_id_;
  std::mutex held_mutex_;
  std::condition_variable held_released_;
  bool held_ = false;          // under held_mutex_
  bool hold_running_ = false;  // under held_mutex_: the worker is inside the hold
};

}  // namespace torch_tpu::pjrt
