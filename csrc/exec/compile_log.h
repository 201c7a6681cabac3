// "Why did this compile?": with TORCH_TPU_LOG_COMPILES=1 (or
// torch_tpu.set_compile_log(True)), every new program of a call site after
// its warm-up prints what differs from the nearest earlier variant of that
// site: a dimension ("self dim 1: 32 -> 48"), a dtype, a number baked into
// the program, strides, inputs sharing storage. A site past N such
// variants (TORCH_TPU_COMPILE_VARIANTS_WARN, default 8) warns once.
//
// Sites: a Strict op (by its name), a DeferAndFuse flush (by its sequence
// of ops), a compiled graph (by its Python frame and forward/backward). An
// op's first calls compile one program per shape it meets in the model
// (every layer's matmul): that is its warm-up, which ends once the op runs
// a program again after the host waited for the device since the op's
// first program (a step ends with a wait, loss.item(): the second step).
// A flush's warm-up ends the same way; a graph's is its first program.
//
// A new program is one this process had not loaded (a miss of the
// compilation cache's memory tier): compiled, or loaded from the disk tier.
// Off, the launch path pays one relaxed load.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace torch_tpu::device {

struct ProgramState;

bool compile_log_on();
// `variants_warning`: warn when a site has more variants than this (0: never).
void set_compile_log(bool on, int variants_warning);
int compile_variants_warning();

// One input of a call as the log compares it.
struct LoggedInput {
  std::string name;  // "self", "tensors[2]", "op 3 aten::mm result 0", a graph input's name
  bool tensor = false;
  std::string dtype, device;
  std::vector<int64_t> sizes, strides;
  int alias_of = -1;  // an earlier input sharing its storage
  std::string value;  // a non-tensor's value, as text
};
using LoggedSignature = std::vector<LoggedInput>;

// The inputs `values` (one per name; a list's elements get [k]).
LoggedSignature logged_signature(const std::vector<c10::IValue>& values, const std::vector<std::string>& names);

// What differs between two signatures, in words ("" when nothing does).
std::string signature_difference(const LoggedSignature& before, const LoggedSignature& now);

// Records a new program of `site` with `signature`, and, after the site's
// warm-up (`warm`: it is over whatever reuse says), prints how it differs
// from the nearest earlier one. `how`: "compiled" or "loaded from the disk
// cache". Returns the printed line.
std::string log_compile(const std::string& site, const std::string& what, const char* how,
                        const LoggedSignature& signature, bool warm = false);
// `site` ran a program it ran before: its warm-up is over.
void log_reuse(const std::string& site);

// Strict: the call whose program the calling thread launches now (its op
// and flat signature, csrc/exec/op_cache.h), for run_program's log line.
class LoggedCallScope {
 public:
  LoggedCallScope(const c10::OperatorHandle& op, const std::vector<c10::IValue>& flat, c10::ArrayRef<int> starts);
  ~LoggedCallScope();
};

// DeferAndFuse: an op recorded into the calling thread's pending program,
// with its results (their shapes stand for the op's inputs in the log).
void log_deferred_op(const c10::OperatorHandle& op, const std::vector<c10::IValue>& returns);

// run_program's side: a program was loaded (`how`) for `state`, or
// (`how` null) found in memory.
void log_program_lookup(const ProgramState& state, const char* how);
// A DeferAndFuse flush ran `state` (compiled or not): forgets the thread's recorded ops.
void forget_deferred_ops(const ProgramState& state);

}  // namespace torch_tpu::device
