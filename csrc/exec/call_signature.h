// A call's signature: everything about its arguments that decides what a
// cached result may be reused for. One module encodes it for the three
// caches that reuse work across calls:
//   - meta caching (csrc/device/meta_inference.h): result shapes and dtypes;
//   - Strict's op cache (csrc/exec/op_cache.h): a captured one-op program;
//   - graph replay (csrc/exec/graph_capture.h): a captured graph program.
// A signature is a flat list of values (lists element by element behind
// their length, so each position means the same thing for every call of one
// op), a hash of it, and a record that verifies a later call against it
// (the hash alone may collide). Positions in the flat list are also where a
// Python float a program reads as an input comes from (its origin,
// lower::ScalarArg::origin), so a replay can feed the new call's number.
//
// The three differ where what they cache differs; each difference is a
// field of SignaturePolicy, with its reason.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::device {

struct SignaturePolicy {
  enum class Numbers {
    ByValue,          // a program or result may depend on any number's value
    FloatsAreInputs,  // floats feed program inputs (OpSpec::floats_are_inputs): hashed by kind
                      // only; the record checks the ones the program baked in
    ByKind,           // results cannot depend on numbers (OpSpec::meta_reads_numbers false): int or float only
  } numbers = Numbers::ByValue;
  // A wrapped number's value (x * 2.5): a program bakes it in as a constant,
  // a meta kernel sees only its dtype.
  bool wrapped_values = true;
  // Whether a storage holds a buffer yet, and its element type: a program's
  // parameter types; meta kernels see no buffers.
  bool buffers = true;
  // A view's storage offset by value, or only whether it is 0: a program
  // takes a non-zero offset as an input (runtime::ViewLayout::
  // dynamic_offset), so the key of x[t] is one for every t > 0 and the
  // record checks what else the program depends on (SignatureEntry::
  // free_offset). A meta kernel's overlap checks read offsets, and its
  // cache holds one result per key.
  bool offsets_by_value = false;
  // Whether the calling thread's own pending DeferAndFuse program is left
  // pending where a storage it writes is read: DeferAndFuse's step replay
  // (step_replay.h) keys ops that read its results while recording, and
  // running the program there would cut every step after its first op.
  // Another thread's pending writes are always run first.
  bool keeps_own_pending = false;
};

// Policies of the three users.
inline SignaturePolicy program_signature(bool floats_are_inputs) {
  SignaturePolicy p;
  if (floats_are_inputs) p.numbers = SignaturePolicy::Numbers::FloatsAreInputs;
  return p;
}
inline SignaturePolicy meta_signature(bool reads_numbers) {
  SignaturePolicy p;
  p.numbers = reads_numbers ? SignaturePolicy::Numbers::ByValue : SignaturePolicy::Numbers::ByKind;
  p.wrapped_values = false;
  p.buffers = false;
  p.offsets_by_value = true;
  return p;
}

// Appends one argument's values to `flat`; false when it has no signature
// (a Generator, complex numbers, integers past int64, nested lists...).
bool append_signature(const c10::IValue& v, std::vector<c10::IValue>& flat, const SignaturePolicy& policy);

// Hash of a flat signature. `op` distinguishes ops.
uint64_t signature_hash(const void* op, const std::vector<c10::IValue>& flat, const SignaturePolicy& policy);

// One flat position as recorded to verify later calls.
struct SignatureEntry {
  // FreeFloat: a Python float only program inputs read (ParamSource::
  // HostScalar); any float matches, 0, 1 and infinities included: the ops
  // whose floats feed inputs (OpSpec::floats_are_inputs) compute with them
  // as their lowerings' constants would.
  // AnyNumber: a number of the same kind (SignaturePolicy::Numbers::ByKind).
  enum class Kind { DeviceTensor, HostTensor, Other, FreeFloat, AnyNumber } kind = Kind::Other;
  at::ScalarType dtype = at::kFloat;
  bool wrapped = false;  // HostTensor: a Python number the dispatcher wrapped (type promotion treats it apart)
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  // DeviceTensor: a program reads this tensor's offset only as an input a
  // replay feeds (every ParamSource::Kind::ViewOffset of the capture was an
  // argument's): any offset matches that is 0 where this one was and not 0
  // where it was not, and, for a storage an earlier position also views,
  // lies as far from that position's offset as when recorded (whether two
  // views overlap, which argument checks read, depends on that alone).
  bool free_offset = false;
  size_t storage_nbytes = 0;
  int device = 0;
  bool has_buffer = false;
  hlo::ElementType buffer_dtype = hlo::ElementType::U8;  // a storage's buffer may hold its bytes as another type
  int alias_of = -1;                                     // DeviceTensor: earlier position sharing the storage
  // DeviceTensor: its conjugate and negative bits. The ops PyTorch lets
  // through with the bit set (mm, bmm, ...) read the values it stands for,
  // so a program for a plain tensor must not replay for a conjugated view.
  bool conj = false, neg = false;
  c10::IValue value;  // Other: compared by equality; AnyNumber: of the same kind
};

struct SignatureRecord {
  std::vector<SignatureEntry> entries;
  bool buffers = true;             // SignaturePolicy::buffers when recorded
  bool keeps_own_pending = false;  // SignaturePolicy::keeps_own_pending when recorded

  // Whether `flat` matches; when not, `why` says which position and what changed.
  bool matches(const std::vector<c10::IValue>& flat, std::string* why) const;
};

SignatureRecord record_signature(const std::vector<c10::IValue>& flat, const SignaturePolicy& policy);

// The flat position of the tpu tensor `t` (by identity), or -1: where a
// replay takes the offset of a view a program reads as an input.
int position_of_tensor(const std::vector<c10::IValue>& flat, const c10::TensorImpl* t);
// Whether a tpu tensor of `flat` views storage `storage_id`.
bool views_storage(const std::vector<c10::IValue>& flat, uint64_t storage_id);
// Marks every tpu tensor's offset free (SignatureEntry::free_offset): for a
// capture whose offset inputs are all offsets of its arguments, fed anew by
// each replay (a view a kernel made of an argument inside the call keeps
// its offset as a constant, and the record its exact offsets).
void free_offsets(SignatureRecord& record);

}  // namespace torch_tpu::device
