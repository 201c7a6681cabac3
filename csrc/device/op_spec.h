// What the device layer knows about one lowered op: its row of the
// registration table (csrc/device/op_table.cpp). Every rule the kernel
// applies to an op besides its lowering (argument checks, Debug mode's
// checks, which numbers may feed a replayed program, arguments written
// without the schema saying so ...) is a field of this row, so that an op's
// meaning lives in its lowering file and its row. The kernel holds a pointer
// to its row, resolved once at registration: no call compares op names.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <vector>

#include "lower/lowering.h"

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace torch_tpu::device {

struct MetaResult;

// Raises the exception PyTorch raises on CUDA for bad arguments; the
// argument functions themselves live in argument_checks.h and debug_checks.h.
using ArgCheck = void (*)(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// Dtypes of the first argument (of the out= tensor, for factories that take
// no tensor: arange, linspace) the op's CPU and CUDA kernels have no kernel
// for: NotImplementedError naming `kernel`, as their AT_DISPATCH raises.
// Without it, the Python meta kernels raise RuntimeError, or compute, or the
// program fails to compile.
struct DtypeGap {
  // When the kernels dispatch on the dtype, against their other checks.
  enum class When {
    BeforeChecks,  // first (most kernels)
    AfterChecks,   // after the row's checks, which copy the meta function's (lerp, addmm)
    AfterMeta,     // after PyTorch's meta function itself (structured pools: their shape checks)
  };
  const char* kernel = nullptr;  // nullptr: no gap
  bool (*supported)(at::ScalarType) = nullptr;
  // The kernels return an empty result for an empty self before they
  // dispatch on its dtype (softmax, batch_norm): no gap there.
  bool empty_passes = false;
  When when = When::BeforeChecks;
  // The dtype is the out= tensor's (the first argument the op writes).
  bool of_out = false;
};

// What a tensor the op writes may overlap (beyond no internal overlap).
enum class WriteOverlap {
  Partial,            // TensorIterator's rule: it may be an input exactly, never partly
  Disjoint,           // an out= may not even be an input exactly (take's and cat's CPU kernels)
  OneValue,           // writes one value wherever it writes, so it may write an expanded tensor too
  InputsCopiedFirst,  // its inputs are read (copied) before any write, so they may overlap it (fill_.Tensor)
};

// A Meta kernel the device supplies for a row (csrc/device/missing_meta_kernels.h),
// boxed: it serves every overload of its row.
using BoxedMetaKernel = void (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Which Meta kernel gives the op's result shapes: PyTorch's (kernel nullptr)
// or the row's own. The row's is registered where PyTorch has none; with
// `replaces_pytorch` it is called instead of PyTorch's own, which rejects
// what the device runs (missing_meta_kernels.h says why for each).
// With `serves_fake_tensors`, torch.compile's fake tensors on tpu get their
// shapes from it too (torch_tpu/fake_kernels.py), so the rule is written once.
struct RowMeta {
  BoxedMetaKernel kernel = nullptr;
  bool replaces_pytorch = false;
  bool serves_fake_tensors = false;
};

struct OpSpec {
  lower::LowerFn lowering = nullptr;
  const char* overloads = "";  // space-separated ATen overload names

  // Before the meta kernel: CUDA's checks and exception types where
  // PyTorch's meta kernels lack them, in order.
  DtypeGap dtype_gap;  // checked first
  ArgCheck checks[2] = {nullptr, nullptr};
  WriteOverlap write_overlap = WriteOverlap::Partial;
  // The checks read tensor values on the host (multinomial's
  // probabilities), so a call may not replay an earlier call's program.
  bool checks_read_values = false;
  // Debug mode only: checks that read values on the host (index ranges).
  ArgCheck debug_check = nullptr;
  // Rewrites the arguments as CUDA accepts them before anything else reads
  // them (advanced indexing's CPU indices and boolean masks).
  void (*normalize_arguments)(std::vector<c10::IValue>& args) = nullptr;

  RowMeta meta;
  // Whether the meta kernel's results depend on the values of numbers;
  // false: meta results are cached by their kinds only (the _foreach_ ops,
  // whose optimizers pass new numbers every step).
  bool meta_reads_numbers = true;
  // Corrects the meta kernel's result metadata where PyTorch's CPU and CUDA
  // kernels differ from it.
  void (*correct_meta)(const std::vector<c10::IValue>& args, MetaResult& meta) = nullptr;

  // Bit i: argument i is written in place although the schema does not mark
  // it; its new value follows the lowering's returns.
  uint32_t unmarked_writes = 0;
  // Python floats may feed program inputs when the op cache or the step
  // replay replays a call (csrc/exec/op_cache.h): the arithmetic optimizers
  // are made of. Only for rows whose lowerings take each float as an operand
  // alone (LowerContext::scalar), never picking a formula by its value: a
  // replay feeds any float, 0, 1 and infinities included, to the input.
  bool floats_are_inputs = false;

  constexpr OpSpec(lower::LowerFn fn, const char* names) : lowering(fn), overloads(names) {}
  // This row with one field set: the builders below are each one field.
  template <typename Field, typename Value>
  constexpr OpSpec with(Field OpSpec::* field, Value value) const {
    OpSpec s = *this;
    s.*field = value;
    return s;
  }
  // Builders for the table's rows: OpSpec(L::lerp, "...").check(a).floats_in().
  constexpr OpSpec check(ArgCheck c) const {
    OpSpec s = *this;
    // The rows are constexpr: a third check fails to compile instead of
    // replacing the second.
    if (s.checks[1]) throw "a row names at most two checks: merge two into one function";
    (s.checks[0] ? s.checks[1] : s.checks[0]) = c;
    return s;
  }
  constexpr OpSpec gap(const char* kernel, bool (*supported)(at::ScalarType)) const {
    return with(&OpSpec::dtype_gap, DtypeGap{kernel, supported});
  }
  constexpr OpSpec gap_unless_empty(const char* kernel, bool (*supported)(at::ScalarType)) const {
    return with(&OpSpec::dtype_gap, DtypeGap{kernel, supported, true});
  }
  constexpr OpSpec gap_after_checks(const char* kernel, bool (*supported)(at::ScalarType)) const {
    return with(&OpSpec::dtype_gap, DtypeGap{kernel, supported, false, DtypeGap::When::AfterChecks});
  }
  constexpr OpSpec gap_after_meta(const char* kernel, bool (*supported)(at::ScalarType)) const {
    return with(&OpSpec::dtype_gap, DtypeGap{kernel, supported, false, DtypeGap::When::AfterMeta});
  }
  constexpr OpSpec gap_of_out(const char* kernel, bool (*supported)(at::ScalarType), DtypeGap::When when) const {
    return with(&OpSpec::dtype_gap, DtypeGap{kernel, supported, false, when, true});
  }
  constexpr OpSpec overlap(WriteOverlap w) const { return with(&OpSpec::write_overlap, w); }
  constexpr OpSpec reads_values() const { return with(&OpSpec::checks_read_values, true); }
  constexpr OpSpec debug(ArgCheck c) const { return with(&OpSpec::debug_check, c); }
  constexpr OpSpec normalize(void (*fn)(std::vector<c10::IValue>&)) const {
    return with(&OpSpec::normalize_arguments, fn);
  }
  // Where PyTorch has no Meta kernel for the op: `kernel`.
  constexpr OpSpec meta_from(BoxedMetaKernel kernel) const { return with(&OpSpec::meta, RowMeta{kernel, false}); }
  // In place of PyTorch's own Meta kernel: `kernel`.
  constexpr OpSpec meta_instead(BoxedMetaKernel kernel) const { return with(&OpSpec::meta, RowMeta{kernel, true}); }
  // That kernel for fake tensors too, where PyTorch's fake rule rejects
  // what the device runs; the kernel must read sizes as SymInts.
  constexpr OpSpec fake_from_meta() const {
    return with(&OpSpec::meta, RowMeta{meta.kernel, meta.replaces_pytorch, true});
  }
  constexpr OpSpec meta_ignores_numbers() const { return with(&OpSpec::meta_reads_numbers, false); }
  constexpr OpSpec correct(void (*fn)(const std::vector<c10::IValue>&, MetaResult&)) const {
    return with(&OpSpec::correct_meta, fn);
  }
  constexpr OpSpec writes(std::initializer_list<int> args) const {
    OpSpec s = *this;
    for (int i : args) s.unmarked_writes |= 1u << i;
    return s;
  }
  constexpr OpSpec floats_in() const { return with(&OpSpec::floats_are_inputs, true); }
  // The _foreach_ ops: results mirror their lists whatever the numbers, and
  // every number may feed a replay.
  constexpr OpSpec foreach_op() const { return meta_ignores_numbers().floats_in(); }

  bool writes_unmarked(size_t i) const { return i < 32 && (unmarked_writes >> i & 1u); }
};

}  // namespace torch_tpu::device
