#include "exec/mode_executor.h"

#include "device/debug_checks.h"
#include "exec/compile_log.h"
#include "exec/pending_work.h"
#include "exec/tensor_program.h"
#include "runtime/device_runtime.h"

namespace torch_tpu::device {

void ModeExecutor::launch(const c10::OperatorHandle& op, const std::optional<OpCall>& /*call*/, TensorProgram& program,
                          int /*device*/, const std::vector<c10::IValue>& /*returns*/) const {
  // The name a failed program's error shows (under DeferAndFuse, run() only
  // marks the op recorded; the pending program runs at its flush).
  program.run(c10::toString(op.schema().operator_name()));
}

namespace {

class StrictExecutor final : public ModeExecutor {
 public:
  runtime::EagerMode mode() const override { return runtime::EagerMode::Strict; }

  std::optional<OpCall> cache_record(const c10::OperatorHandle& op, const OpSpec& spec,
                                     const std::vector<c10::IValue>& args) const override {
    return op_cache_call(op, spec, args);
  }

  void launch(const c10::OperatorHandle& op, const std::optional<OpCall>& call, TensorProgram& program, int device,
              const std::vector<c10::IValue>& returns) const override {
    std::optional<LoggedCallScope> logged;
    if (call && compile_log_on()) logged.emplace(op, call->flat, call->arg_start);
    if (call && op_cache_should_capture(op, *call)) {
      if (logged) log_reuse(c10::toString(op.schema().operator_name()));  // its second call of this signature
      op_cache_capture(op, *call, program.release(), device, returns);
    } else {
      ModeExecutor::launch(op, call, program, device, returns);
    }
  }
};

class DebugExecutor final : public ModeExecutor {
 public:
  runtime::EagerMode mode() const override { return runtime::EagerMode::Debug; }
  bool checks_each_op() const override { return true; }

  void check_arguments(const OpSpec& spec, const c10::FunctionSchema& schema,
                       const std::vector<c10::IValue>& args) const override {
    if (spec.debug_check) spec.debug_check(schema, args);
  }

  void after_launch(const c10::OperatorName& op, int device, const std::vector<c10::IValue>& returns) const override {
    runtime::DeviceRuntime::get().synchronize(device);  // errors surface at this op
    check_finite_results(op.overload_name.empty() ? op.name : op.name + "." + op.overload_name, returns);
  }
};

class DeferAndFuseExecutor final : public ModeExecutor {
 public:
  runtime::EagerMode mode() const override { return runtime::EagerMode::DeferAndFuse; }
  bool defers_programs() const override { return true; }

  void launch(const c10::OperatorHandle& op, const std::optional<OpCall>& call, TensorProgram& program, int device,
              const std::vector<c10::IValue>& returns) const override {
    // A graph being captured logs its compile as the graph's (torch_tpu/compile.py).
    if (compile_log_on() && !graph_capture_on(device)) log_deferred_op(op, returns);
    ModeExecutor::launch(op, call, program, device, returns);
  }
};

}  // namespace

const ModeExecutor& mode_executor(runtime::EagerMode mode) {
  static const StrictExecutor strict;
  static const DebugExecutor debug;
  static const DeferAndFuseExecutor defer_and_fuse;
  switch (mode) {
    case runtime::EagerMode::Strict:
      return strict;
    case runtime::EagerMode::Debug:
      return debug;
    case runtime::EagerMode::DeferAndFuse:
      return defer_and_fuse;
  }
  return strict;
}

}  // namespace torch_tpu::device
