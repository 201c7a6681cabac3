#include "exec/op_cache.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "device/storage_buffer.h"
#include "exec/call_signature.h"
#include "exec/tensor_program.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_OP_CACHE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// ---- the cache --------------------------------------------------------------------

struct Key {
  const void* op;
  uint64_t signature;
  bool operator==(const Key& o) const { return op == o.op && signature == o.signature; }
};
struct KeyHash {
  size_t operator()(const Key& k) const { return static_cast<size_t>(k.signature); }  // the op is in the hash
};

constexpr int kTensorReturn = -1;  // one Tensor (undefined ones included)
constexpr int kNoneReturn = -2;

struct Capture {
  std::shared_ptr<CapturedProgram> program;  // null: the capture was refused, and is not tried again
  std::vector<int> list_sizes;               // per return: kTensorReturn, kNoneReturn, or n for a Tensor[] of n
};
// Shared and immutable, so a replay takes its key's captures out of the
// lock without copying them (a replay is the per-op hot path).
using Entry = std::shared_ptr<const Capture>;

// Captures of one key: they differ in floats their programs baked in (a
// dropout p, a leaky_relu slope). A key past this many runs uncached when
// no capture matches.
constexpr size_t kMaxVariants = 4;

// Bounds: a loop over ever new signatures (shapes that keep changing) must
// not grow these without end. Past them the tables start over.
constexpr size_t kMaxCaptured = 1024;  // each holds an executable alive (memory mappings)
constexpr size_t kMaxSeen = 65536;

struct Cache {
  std::mutex mutex;
  std::unordered_map<Key, std::vector<Entry>, KeyHash> captured;
  std::unordered_set<Key, KeyHash> seen;  // signatures seen once, not captured
  size_t entries = 0;                     // captures in `captured`
};

Cache& cache() {
  static Cache* c = new Cache();  // leaked: ops may run during interpreter shutdown
  return *c;
}

const void* op_id(const c10::OperatorHandle& op) { return &op.schema(); }

}  // namespace

void op_cache_clear() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.captured.clear();
  c.seen.clear();
  c.entries = 0;
}

std::optional<OpCall> op_cache_call(const c10::OperatorHandle& op, const OpSpec& spec,
                                    const std::vector<c10::IValue>& args) {
  if (!enabled()) return std::nullopt;
  for (const c10::Argument& a : op.schema().arguments()) {
    if (a.is_out()) return std::nullopt;
  }
  return op_call_signature(op, spec, args, /*keeps_own_pending=*/false);
}

std::optional<OpCall> op_call_signature(const c10::OperatorHandle& op, const OpSpec& spec,
                                        const std::vector<c10::IValue>& args, bool keeps_own_pending) {
  if (spec.checks_read_values) return std::nullopt;  // a replay would skip them
  OpCall call;
  call.flat.reserve(args.size() + 2);
  // The precision as a small number, not its name: a string IValue is a
  // heap allocation and a string hash on every call.
  call.flat.emplace_back(static_cast<int64_t>(runtime::matmul_precision_level()));
  call.flat.emplace_back(static_cast<int64_t>(current_device()));
  call.arg_start.reserve(args.size());
  call.floats_are_inputs = spec.floats_are_inputs;
  SignaturePolicy policy = program_signature(call.floats_are_inputs);
  policy.keeps_own_pending = keeps_own_pending;
  for (const c10::IValue& v : args) {
    call.arg_start.push_back(static_cast<int>(call.flat.size()));
    if (!append_signature(v, call.flat, policy)) return std::nullopt;
  }
  call.key = signature_hash(op_id(op), call.flat, policy);
  return call;
}

std::optional<std::vector<c10::IValue>> op_cache_replay(const c10::OperatorHandle& op, const OpCall& call) {
  std::array<Entry, kMaxVariants> entries;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.captured.find(Key{op_id(op), call.key});
    if (it == c.captured.end()) return std::nullopt;
    std::copy_n(it->second.begin(), std::min(it->second.size(), kMaxVariants), entries.begin());
  }
  std::optional<std::vector<c10::IValue>> flat;
  const Capture* entry = nullptr;
  for (const Entry& e : entries) {
    if (!e || !e->program) continue;  // past the key's captures, or refused
    // No match: another baked-in float, or a hash collision.
    flat = e->program->replay(call.flat);
    if (flat) {
      entry = e.get();
      break;
    }
  }
  if (!flat) return std::nullopt;
  runtime::metrics().op_cache_replays++;
  std::vector<c10::IValue> returns;
  returns.reserve(entry->list_sizes.size());
  size_t k = 0;
  for (int n : entry->list_sizes) {
    if (n < 0) {
      c10::IValue& v = (*flat)[k++];
      // An undefined Tensor return (a backward's output_mask entry false) is
      // captured as None; the op returns it as a Tensor.
      returns.push_back(n == kTensorReturn && v.isNone() ? c10::IValue(at::Tensor()) : std::move(v));
      continue;
    }
    std::vector<at::Tensor> list;
    for (int i = 0; i < n; ++i) list.push_back((*flat)[k++].toTensor());
    returns.emplace_back(std::move(list));
  }
  return returns;
}

bool op_cache_should_capture(const c10::OperatorHandle& op, const OpCall& call) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const Key key{op_id(op), call.key};
  auto it = c.captured.find(key);
  if (it != c.captured.end()) {
    // Its captures did not match (op_cache_replay ran first): capture this
    // variant too, unless the key was refused or has enough.
    const std::vector<Entry>& entries = it->second;
    for (const Entry& e : entries) {
      if (!e->program) return false;
    }
    return entries.size() < kMaxVariants;
  }
  if (c.seen.erase(key)) return true;
  if (c.seen.size() >= kMaxSeen) c.seen.clear();
  c.seen.insert(key);
  return false;
}

void op_cache_capture(const c10::OperatorHandle& op, const OpCall& call, std::unique_ptr<ProgramState> program,
                      int device, const std::vector<c10::IValue>& returns) {
  auto entry = std::make_shared<Capture>();
  std::vector<c10::IValue> flat_returns;
  for (const c10::IValue& r : returns) {
    if (r.isTensorList()) {
      entry->list_sizes.push_back(static_cast<int>(r.toTensorList().size()));
      for (const at::Tensor& t : r.toTensorVector()) flat_returns.emplace_back(t);
    } else {
      entry->list_sizes.push_back(r.isNone() ? kNoneReturn : kTensorReturn);
      flat_returns.push_back(r.isTensor() && !r.toTensor().defined() ? c10::IValue() : r);
    }
  }
  std::string why;
  // Runs the program once, now, whether or not it can be replayed. A capture
  // refuses what it cannot replay, int returns (SDPA's) included.
  entry->program = capture_program(std::move(program), false, device, call.flat, flat_returns, &why,
                                   c10::toString(op.schema().operator_name()));
  if (entry->program) runtime::metrics().op_cache_captures++;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.entries >= kMaxCaptured) {
    c.captured.clear();
    c.entries = 0;
  }
  c.captured[Key{op_id(op), call.key}].push_back(std::move(entry));
  ++c.entries;
}

}  // namespace torch_tpu::device
