// Strict mode's op cache: an op called again with the same signature
// replays the program its earlier call captured, so the call skips the meta
// kernel, the lowering, the program text and the compilation-cache lookup.
// Eager training loops repeat the same few hundred op signatures every step;
// building their program text was most of Strict's per-op cost.
//
// A signature is what fixes the program (csrc/exec/call_signature.h, under
// the program policy): the op, the matmul precision, every tpu tensor's
// dtype, sizes, strides, offset (only whether it is 0 where the program
// takes it as an input, SignatureEntry::free_offset), storage size, buffer
// and aliasing, CPU scalar tensors' dtypes, and every other argument's
// value (lists element by element). For the arithmetic ops optimizers are made of
// (OpSpec::floats_are_inputs: the _foreach_ ops and add, sub, rsub, mul,
// div, addcmul, addcdiv, lerp, fill_), Python floats that the lowering made program inputs
// (ScalarArg::origin) are the exception: a replay uploads the new call's
// numbers, so an optimizer's per-step bias corrections (foreach AdamW's
// step_size list) replay one program. Their keys hash floats only by kind,
// and a replay feeds any float, 0, 1 and infinities included, to an input:
// these ops' lowerings take a float only as an operand (LowerContext::scalar),
// where such a number gives what the constant it would otherwise be gives
// (x * 1, x / 1, x + y * 0 alike), so AdamW's bias correction reaching
// exactly 1.0 after some hundred steps recompiles nothing. Each key keeps a
// few captures, each checking the floats its program baked in. These ops'
// meta kernels check no float's value, and replays skip the meta kernel;
// the one check a lowering makes on a float, that it fits the dtype CPU
// converts it to (LowerContext::scalar), a replay makes too: a number that
// does not fit runs the lowering, which raises CPU's error.
// A key is captured the second time it is seen. Replays bind the new
// buffers exactly as torch.compile's graph replays do
// (csrc/exec/graph_capture.h): CPU scalars are uploaded, RNG states
// drawn, in-place results donated.
//
// Not cached: Debug and DeferAndFuse (their own paths), ops with out=
// arguments (their resize belongs to each call), ops whose argument checks
// read tensor values (multinomial; a replay skips the checks), an explicit
// Generator, complex Python numbers and integers past int64, and anything
// a capture refuses (int returns among them); a refused signature is
// remembered and not captured again.
// TORCH_TPU_OP_CACHE=0 turns it off.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <vector>

#include <c10/util/SmallVector.h>

#include "device/op_spec.h"
#include "exec/graph_capture.h"

namespace torch_tpu::device {

// Forgets every captured and seen signature (tests that count captures
// start from an empty cache; the cache starts over by itself when full).
void op_cache_clear();

struct OpCall {
  std::vector<c10::IValue> flat;       // the signature's values (call_signature.h), in argument order
  c10::SmallVector<int, 8> arg_start;  // per argument: its first position in `flat` (inline: no allocation per op)
  bool floats_are_inputs = false;      // OpSpec::floats_are_inputs
  uint64_t key = 0;                    // hash of the signature, floats by kind (verified on replay)
};

// The call's flat signature, or nullopt when the call is not cached.
std::optional<OpCall> op_cache_call(const c10::OperatorHandle& op, const OpSpec& spec,
                                    const std::vector<c10::IValue>& args);

// The same signature without asking whether the op cache is on, out=
// arguments included (as their call passes them, before the resize); with
// `keeps_own_pending`, as DeferAndFuse's step replay keys a call
// (SignaturePolicy::keeps_own_pending).
std::optional<OpCall> op_call_signature(const c10::OperatorHandle& op, const OpSpec& spec,
                                        const std::vector<c10::IValue>& args, bool keeps_own_pending);

// The op's returns from a captured replay, or nullopt (not captured yet, or
// the signature did not match): the caller runs the op normally.
std::optional<std::vector<c10::IValue>> op_cache_replay(const c10::OperatorHandle& op, const OpCall& call);

// Whether the caller should capture this call: its signature was seen before.
bool op_cache_should_capture(const c10::OperatorHandle& op, const OpCall& call);

// Captures the call's program (Strict: released unrun) and runs it once.
// `returns` are the op's returns as pushed to the stack.
void op_cache_capture(const c10::OperatorHandle& op, const OpCall& call, std::unique_ptr<ProgramState> program,
                      int device, const std::vector<c10::IValue>& returns);

}  // namespace torch_tpu::device
