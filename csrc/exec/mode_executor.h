// What the eager modes (runtime/eager_mode.h) do differently with a lowered
// op, one object per mode, so the kernel (lowered_kernel.cpp) and the program
// builder (tensor_program.cpp) ask the calling thread's executor instead of
// testing the mode:
//
//   Strict        a signature seen before replays its captured program (the
//                 op cache); the second sighting captures it; each op's
//                 program launches at once and nothing waits.
//   Debug         the row's Debug check runs before lowering; each op's
//                 program launches at once and is waited for, so launch
//                 errors, index ranges and (if asked) NaN/Inf surface at the
//                 op that made them.
//   DeferAndFuse  the op is recorded into the thread's pending program
//                 (pending_work.h) and runs fused at the next flush.
//
// Every mode then shares one path: meta inference, lowering, writes and the
// launch step of program_launch.h.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <vector>

#include "device/op_spec.h"
#include "exec/op_cache.h"
#include "runtime/eager_mode.h"

namespace torch_tpu::device {

class TensorProgram;

class ModeExecutor {
 public:
  virtual ~ModeExecutor() = default;
  virtual runtime::EagerMode mode() const = 0;

  // The call's op-cache record when this mode caches calls (Strict).
  virtual std::optional<OpCall> cache_record(const c10::OperatorHandle& /*op*/, const OpSpec& /*spec*/,
                                             const std::vector<c10::IValue>& /*args*/) const {
    return std::nullopt;
  }
  // Checks this mode adds to the row's argument checks (Debug's).
  virtual void check_arguments(const OpSpec& /*spec*/, const c10::FunctionSchema& /*schema*/,
                               const std::vector<c10::IValue>& /*args*/) const {}
  // Whether ops append to the thread's pending program rather than each
  // building and launching its own.
  virtual bool defers_programs() const { return false; }
  // Whether each op's errors, index ranges and (if asked) NaN/Inf surface at
  // the op that made them (Debug), rather than at a later synchronization.
  virtual bool checks_each_op() const { return false; }
  // Runs (or records) the op's finished program. `call` is cache_record's.
  virtual void launch(const c10::OperatorHandle& op, const std::optional<OpCall>& call, TensorProgram& program,
                      int device, const std::vector<c10::IValue>& returns) const;
  // After the launch: what this mode waits for and checks (Debug's).
  virtual void after_launch(const c10::OperatorName& /*op*/, int /*device*/,
                            const std::vector<c10::IValue>& /*returns*/) const {}
};

const ModeExecutor& mode_executor(runtime::EagerMode mode);
// The calling thread's (each thread has its own mode).
inline const ModeExecutor& current_mode_executor() { return mode_executor(runtime::eager_mode()); }

// Runs the calling thread's ops under `mode` until the scope ends, then
// restores the thread's own mode (also when an exception leaves the scope).
class ScopedEagerMode {
 public:
  explicit ScopedEagerMode(runtime::EagerMode mode) : previous_(current_mode_executor().mode()) {
    runtime::set_eager_mode(mode);
  }
  ~ScopedEagerMode() { runtime::set_eager_mode(previous_); }
  ScopedEagerMode(const ScopedEagerMode&) = delete;
  ScopedEagerMode& operator=(const ScopedEagerMode&) = delete;

 private:
  runtime::EagerMode previous_;
};

}  // namespace torch_tpu::device
