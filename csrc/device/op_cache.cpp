#include "device/op_cache.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "device/argument_checks.h"
#include "device/storage_buffer.h"
#include "device/tensor_program.h"
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

// ---- signature --------------------------------------------------------------------

// One argument's values, appended to `flat`; false when the call is not cached.
// Lists go element by element behind their length, so each position of a
// flat signature means the same thing for every call of one op.
bool flatten(const c10::IValue& v, std::vector<c10::IValue>& flat) {
  if (v.isNone() || v.isInt() || v.isDouble() || v.isBool() || v.isString() || v.isDevice()) {
    flat.push_back(v);
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    flat.push_back(t.defined() ? c10::IValue(t) : c10::IValue());
    if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the dispatcher wrapped (x * 2.5): its capture keeps
      // the value as a constant (graph_capture.cpp), so it is signature.
      if (t.scalar_type() == at::kUInt64) return false;  // an integer past int64
      const c10::Scalar value = t.item();
      if (value.isComplex()) return false;
      if (value.isFloatingPoint()) {
        flat.emplace_back(value.toDouble());
      } else if (value.isBoolean()) {
        flat.emplace_back(value.toBool());
      } else {
        flat.emplace_back(value.toLong());
      }
    }
  } else if (v.isSymInt()) {
    flat.emplace_back(v.toSymInt().guard_int(__FILE__, __LINE__));
  } else if (v.isList()) {  // every list: Tensor[], Tensor?[], int[], float[], bool[], Scalar[]
    auto list = v.toListRef();
    flat.emplace_back(static_cast<int64_t>(list.size()));
    for (const c10::IValue& e : list) {
      if (e.isList() || !flatten(e, flat)) return false;
    }
  } else {
    return false;  // a Generator (its own state), complex numbers, anything else
  }
  return true;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// `float_classes`: hash floats by class only (OpSpec::floats_are_inputs ops).
uint64_t hash_of(const void* op, const std::vector<c10::IValue>& flat, bool float_classes) {
  uint64_t h = reinterpret_cast<uintptr_t>(op);
  std::vector<uint64_t> storages;  // aliasing: the first flat position of each storage
  for (const c10::IValue& v : flat) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      h = mix(h, static_cast<uint64_t>(t.scalar_type()) + (is_tpu(t) ? 1000 : 2000));
      for (int64_t s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
      if (!is_tpu(t)) continue;
      for (int64_t s : t.strides()) h = mix(h, static_cast<uint64_t>(s));
      StorageBuffer& sb = storage_buffer(t);
      settle_pending_writes(sb);  // another thread's pending program writes it: its buffer is not current yet
      h = mix(h, static_cast<uint64_t>(t.storage_offset()));
      hlo::ElementType buffer_dtype = hlo::ElementType::U8;
      const bool has_buffer = sb.current(&buffer_dtype) != nullptr;
      h = mix(h, sb.nbytes * 4 + static_cast<uint64_t>(has_buffer) * 2);
      if (has_buffer) h = mix(h, static_cast<uint64_t>(buffer_dtype));  // the program's parameter type
      size_t k = 0;
      while (k < storages.size() && storages[k] != sb.id) ++k;
      if (k == storages.size()) storages.push_back(sb.id);
      h = mix(h, k);
    } else if (v.isInt()) {
      h = mix(h, static_cast<uint64_t>(v.toInt()));
    } else if (v.isDouble()) {
      // Floats by class: a capture may take any other number as an input
      // (CapturedGraph checks the ones its program baked in).
      double d = v.toDouble();
      uint64_t bits = 0x5ca1a4;
      if (!float_classes || lower::is_special_scalar(d)) std::memcpy(&bits, &d, sizeof(bits));
      h = mix(h, bits);
    } else if (v.isBool()) {
      h = mix(h, v.toBool() ? 3 : 5);
    } else if (v.isString()) {
      h = mix(h, std::hash<std::string>()(v.toStringRef()));
    } else if (v.isDevice()) {
      h = mix(h, static_cast<uint64_t>(v.toDevice().index()) * 131 + static_cast<uint64_t>(v.toDevice().type()));
    } else {
      h = mix(h, 7);  // None
    }
  }
  return h;
}

// ---- the cache --------------------------------------------------------------------

struct Key {
  const void* op;
  uint64_t signature;
  bool operator==(const Key& o) const { return op == o.op && signature == o.signature; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(mix(k.signature, reinterpret_cast<uintptr_t>(k.op)));
  }
};

constexpr int kTensorReturn = -1;  // one Tensor (undefined ones included)
constexpr int kNoneReturn = -2;

struct Entry {
  std::shared_ptr<CapturedGraph> program;  // null: the capture was refused, and is not tried again
  std::vector<int> list_sizes;  // per return: kTensorReturn, kNoneReturn, or n for a Tensor[] of n
};

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
  size_t entries = 0;                      // captures in `captured`
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
  const c10::FunctionSchema& schema = op.schema();
  for (const c10::Argument& a : schema.arguments()) {
    if (a.is_out()) return std::nullopt;
  }
  if (spec.checks_read_values) return std::nullopt;  // a replay would skip them
  OpCall call;
  call.flat.reserve(args.size() + 2);
  call.flat.emplace_back(runtime::matmul_precision());
  call.flat.emplace_back(static_cast<int64_t>(current_device()));
  call.arg_start.reserve(args.size());
  for (const c10::IValue& v : args) {
    call.arg_start.push_back(static_cast<int>(call.flat.size()));
    if (!flatten(v, call.flat)) return std::nullopt;
  }
  call.floats_are_inputs = spec.floats_are_inputs;
  call.key = hash_of(op_id(op), call.flat, call.floats_are_inputs);
  return call;
}

std::optional<std::vector<c10::IValue>> op_cache_replay(const c10::OperatorHandle& op, const OpCall& call) {
  std::vector<Entry> entries;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.captured.find(Key{op_id(op), call.key});
    if (it == c.captured.end()) return std::nullopt;
    entries = it->second;
  }
  std::optional<std::vector<c10::IValue>> flat;
  Entry entry;
  for (Entry& e : entries) {
    if (!e.program) continue;  // refused
    // No match: another baked-in float, or a hash collision.
    flat = e.program->replay(call.flat);
    if (flat) {
      entry = std::move(e);
      break;
    }
  }
  if (!flat) return std::nullopt;
  runtime::metrics().op_cache_replays++;
  std::vector<c10::IValue> returns;
  size_t k = 0;
  for (int n : entry.list_sizes) {
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
      if (!e.program) return false;
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
  Entry entry;
  std::vector<c10::IValue> flat_returns;
  for (const c10::IValue& r : returns) {
    if (r.isTensorList()) {
      entry.list_sizes.push_back(static_cast<int>(r.toTensorList().size()));
      for (const at::Tensor& t : r.toTensorVector()) flat_returns.emplace_back(t);
    } else {
      entry.list_sizes.push_back(r.isNone() ? kNoneReturn : kTensorReturn);
      flat_returns.push_back(r.isTensor() && !r.toTensor().defined() ? c10::IValue() : r);
    }
  }
  std::string why;
  // Runs the program once, now, whether or not it can be replayed. A capture
  // refuses what it cannot replay, int returns (SDPA's) included.
  entry.program = capture_program(std::move(program), false, device, call.flat, flat_returns, &why);
  if (entry.program) runtime::metrics().op_cache_captures++;
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
