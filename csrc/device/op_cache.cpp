#include "device/op_cache.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

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

uint64_t hash_of(const void* op, const std::vector<c10::IValue>& flat) {
  uint64_t h = reinterpret_cast<uintptr_t>(op);
  std::vector<uint64_t> storages;  // aliasing: the first flat position of each storage
  for (const c10::IValue& v : flat) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      h = mix(h, static_cast<uint64_t>(t.scalar_type()) + (is_tpu(t) ? 1000 : 2000));
      for (int64_t s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
      if (!is_tpu(t)) continue;
      for (int64_t s : t.strides()) h = mix(h, static_cast<uint64_t>(s));
      const StorageBuffer& sb = storage_buffer(t);
      h = mix(h, static_cast<uint64_t>(t.storage_offset()));
      h = mix(h, sb.nbytes * 4 + static_cast<uint64_t>(sb.buffer != nullptr) * 2);
      size_t k = 0;
      while (k < storages.size() && storages[k] != sb.id) ++k;
      if (k == storages.size()) storages.push_back(sb.id);
      h = mix(h, k);
    } else if (v.isInt()) {
      h = mix(h, static_cast<uint64_t>(v.toInt()));
    } else if (v.isDouble()) {
      double d = v.toDouble();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
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

// Bounds: a loop over ever new signatures (shapes that keep changing) must
// not grow these without end. Past them the tables start over.
constexpr size_t kMaxCaptured = 1024;  // each holds an executable alive (memory mappings)
constexpr size_t kMaxSeen = 65536;

struct Cache {
  std::mutex mutex;
  std::unordered_map<Key, Entry, KeyHash> captured;
  std::unordered_set<Key, KeyHash> seen;  // signatures seen once, not captured
};

Cache& cache() {
  static Cache* c = new Cache();  // leaked: ops may run during interpreter shutdown
  return *c;
}

const void* op_id(const c10::OperatorHandle& op) { return &op.schema(); }

}  // namespace

std::optional<OpCall> op_cache_call(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  if (!enabled()) return std::nullopt;
  const c10::FunctionSchema& schema = op.schema();
  for (const c10::Argument& a : schema.arguments()) {
    if (a.is_out()) return std::nullopt;
  }
  OpCall call;
  call.flat.reserve(args.size() + 2);
  call.flat.emplace_back(runtime::matmul_precision());
  call.flat.emplace_back(static_cast<int64_t>(current_device()));
  for (const c10::IValue& v : args) {
    if (!flatten(v, call.flat)) return std::nullopt;
  }
  call.key = hash_of(op_id(op), call.flat);
  return call;
}

std::optional<std::vector<c10::IValue>> op_cache_replay(const c10::OperatorHandle& op, const OpCall& call) {
  Entry entry;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.captured.find(Key{op_id(op), call.key});
    if (it == c.captured.end() || !it->second.program) return std::nullopt;  // none, or refused
    entry = it->second;
  }
  std::optional<std::vector<c10::IValue>> flat = entry.program->replay(call.flat);
  if (!flat) return std::nullopt;  // a hash collision: the signature differs
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
  if (c.captured.count(key)) return false;
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
  if (c.captured.size() >= kMaxCaptured) c.captured.clear();
  c.captured.emplace(Key{op_id(op), call.key}, std::move(entry));
}

}  // namespace torch_tpu::device
