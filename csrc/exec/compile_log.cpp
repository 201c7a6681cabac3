#include "exec/compile_log.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "exec/pending_work.h"
#include "exec/program_state.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::atomic<bool> log_on{env_int("TORCH_TPU_LOG_COMPILES", 0) != 0};
std::atomic<int> variants_warning{env_int("TORCH_TPU_COMPILE_VARIANTS_WARN", 8)};

// Earlier variants of each site; the few most recent are compared.
constexpr size_t kVariantsKept = 16;
constexpr size_t kSitesKept = 4096;

struct Site {
  std::vector<LoggedSignature> variants;
  int count = 0;
  int since_warm = 0;  // variants after the warm-up
  bool warm = false, warned = false;
  int64_t first_wait = -1;  // the host's wait count at the site's first program
};

// Host waits so far: a training step ends with one (loss.item()), so a
// program run again after a wait is one run again in a later step.
int64_t host_waits() { return runtime::metrics().host_waits.load(std::memory_order_relaxed); }

struct History {
  std::mutex mutex;
  std::unordered_map<std::string, Site> sites;
};

History& history() {
  static auto* h = new History();  // leaked: ops may run during interpreter shutdown
  return *h;
}

// The Strict call being launched on this thread (LoggedCallScope).
struct LoggedCall {
  const c10::OperatorHandle* op = nullptr;
  const std::vector<c10::IValue>* flat = nullptr;
  c10::ArrayRef<int> starts;
};
thread_local LoggedCall current_call;

// DeferAndFuse: the ops this thread recorded since its last flush.
struct DeferredOp {
  std::string name;
  std::vector<LoggedInput> results;
};
thread_local std::vector<DeferredOp> deferred_ops;

std::string text_of(const std::vector<int64_t>& v) {
  std::string out = "(";
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + std::to_string(v[k]);
  return out + (v.size() == 1 ? ",)" : ")");
}

std::string text_of(const c10::IValue& v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

LoggedInput logged_tensor(const at::Tensor& t, std::string name, std::unordered_map<const void*, int>& first_of_storage,
                          int position) {
  LoggedInput in;
  in.name = std::move(name);
  in.tensor = true;
  in.dtype = std::string(c10::getDtypeNames(t.scalar_type()).first);
  in.device = t.device().is_cpu() ? "cpu" : "tpu";
  in.sizes = t.sizes().vec();
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    in.tensor = false;  // a Python number: its value is what a program bakes in
    in.value = text_of(c10::IValue(t.item()));
    return in;
  }
  in.strides = t.strides().vec();
  if (t.has_storage()) {
    auto [it, fresh] = first_of_storage.emplace(t.storage().unsafeGetStorageImpl(), position);
    in.alias_of = fresh ? -1 : it->second;
  }
  return in;
}

// What changed, one item per difference, with the hint for its kind.
struct Differences {
  std::vector<std::string> items;
  bool shapes = false, values = false, strides = false, dtypes = false;
  // How far apart: a changed rank or a missing input counts as several
  // changed dimensions, so the nearest variant is the same call's, not
  // another call site's program of the same op.
  int distance = 0;
  void add(std::string item, int weight) {
    items.push_back(std::move(item));
    distance += weight;
  }
};

Differences differences(const LoggedSignature& before, const LoggedSignature& now) {
  Differences d;
  std::map<std::string, const LoggedInput*> earlier;
  for (const auto& in : before) earlier[in.name] = &in;
  auto name_at = [](const LoggedSignature& sig, int k) { return k >= 0 && k < (int)sig.size() ? sig[k].name : "?"; };
  for (const auto& b : now) {
    auto it = earlier.find(b.name);
    if (it == earlier.end()) {
      d.add("new input " + b.name, 4);
      continue;
    }
    const LoggedInput& a = *it->second;
    earlier.erase(it);
    if (a.tensor != b.tensor) {
      d.add(b.name + ": " + (a.tensor ? "a tensor" : "a number") + " -> " + (b.tensor ? "a tensor" : "a number"), 4);
      continue;
    }
    if (!b.tensor) {
      if (a.value != b.value || a.dtype != b.dtype) {
        d.add(b.name + ": " + a.value + " -> " + b.value, 1);
        // A dynamic graph's size input (L['x'].size()[1]) is a shape, not a number the user passed.
        (b.name.find(".size()") != std::string::npos ? d.shapes : d.values) = true;
      }
      continue;
    }
    if (a.device != b.device) d.add(b.name + " device: " + a.device + " -> " + b.device, 4);
    if (a.dtype != b.dtype) {
      d.add(b.name + " dtype: " + a.dtype + " -> " + b.dtype, 2);
      d.dtypes = true;
    }
    if (a.sizes.size() != b.sizes.size()) {
      d.add(b.name + " shape: " + text_of(a.sizes) + " -> " + text_of(b.sizes), 4);
      d.shapes = true;
    } else {
      for (size_t k = 0; k < a.sizes.size(); ++k) {
        if (a.sizes[k] == b.sizes[k]) continue;
        d.add(b.name + " dim " + std::to_string(k) + ": " + std::to_string(a.sizes[k]) + " -> " +
                  std::to_string(b.sizes[k]),
              1);
        d.shapes = true;
      }
      if (a.sizes == b.sizes && a.strides != b.strides) {
        d.add(b.name + " strides: " + text_of(a.strides) + " -> " + text_of(b.strides), 1);
        d.strides = true;
      }
    }
    if (a.alias_of != b.alias_of) {
      d.add(b.alias_of >= 0 ? b.name + " now shares storage with " + name_at(now, b.alias_of)
                            : b.name + " no longer shares storage with " + name_at(before, a.alias_of),
            1);
    }
  }
  for (const auto& [name, in] : earlier) d.add("input " + name + " is gone", 4);
  return d;
}

std::string joined(const Differences& d) {
  constexpr size_t kShown = 8;  // a line a user reads; the first differences name the cause
  std::string out;
  for (size_t k = 0; k < d.items.size() && k < kShown; ++k) out += (out.empty() ? "" : "; ") + d.items[k];
  if (d.items.size() > kShown) out += "; and " + std::to_string(d.items.size() - kShown) + " more";
  return out;
}

std::string hints(const Differences& d) {
  std::string out;
  if (d.shapes) out += " Each new shape is a new program: pad or bucket the sizes that vary.";
  if (d.values) out += " A number argument is part of the program: each value compiles its own.";
  if (d.strides) out += " A view with other strides reads differently: .contiguous() gives one layout.";
  if (d.dtypes) out += " A new dtype is a new program.";
  return out;
}

void emit(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

bool compile_log_on() { return log_on.load(std::memory_order_relaxed); }

void set_compile_log(bool on, int warning) {
  log_on.store(on);
  variants_warning.store(warning);
}

int compile_variants_warning() { return variants_warning.load(); }

LoggedSignature logged_signature(const std::vector<c10::IValue>& values, const std::vector<std::string>& names) {
  LoggedSignature sig;
  std::unordered_map<const void*, int> first_of_storage;
  for (size_t k = 0; k < values.size(); ++k) {
    const std::string name = k < names.size() ? names[k] : "input " + std::to_string(k);
    const c10::IValue& v = values[k];
    if (v.isTensor() && v.toTensor().defined()) {
      sig.push_back(logged_tensor(v.toTensor(), name, first_of_storage, static_cast<int>(sig.size())));
    } else if (v.isList()) {
      auto list = v.toListRef();
      for (size_t j = 0; j < list.size(); ++j) {
        const std::string element = name + "[" + std::to_string(j) + "]";
        if (list[j].isTensor() && list[j].toTensor().defined()) {
          sig.push_back(logged_tensor(list[j].toTensor(), element, first_of_storage, static_cast<int>(sig.size())));
        } else {
          LoggedInput in;
          in.name = element;
          in.value = text_of(list[j]);
          sig.push_back(std::move(in));
        }
      }
      if (list.empty()) sig.push_back(LoggedInput{name, false, "", "", {}, {}, -1, "[]"});
    } else {
      LoggedInput in;
      in.name = name;
      in.value = text_of(v);
      sig.push_back(std::move(in));
    }
  }
  return sig;
}

std::string signature_difference(const LoggedSignature& before, const LoggedSignature& now) {
  return joined(differences(before, now));
}

namespace {

Site& site_of(History& h, const std::string& site) {
  if (h.sites.size() >= kSitesKept && !h.sites.count(site)) h.sites.clear();
  return h.sites[site];
}

}  // namespace

void log_reuse(const std::string& site) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  Site& s = site_of(h, site);
  const int64_t waits = host_waits();
  if (s.first_wait < 0) {
    s.first_wait = waits;  // its first programs loaded before the log was on
  } else if (waits > s.first_wait) {
    s.warm = true;
  }
}

std::string log_compile(const std::string& site, const std::string& what, const char* how,
                        const LoggedSignature& signature, bool warm) {
  std::string line, warning;
  {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mutex);
    Site& s = site_of(h, site);
    ++s.count;
    if (s.first_wait < 0) s.first_wait = host_waits();
    s.warm = s.warm || (warm && !s.variants.empty());
    if (s.warm) ++s.since_warm;
    if (s.warm && !s.variants.empty()) {  // none: its earlier programs loaded before the log was on
      // The nearest earlier variant: the least distance, the most recent of equals.
      const LoggedSignature* nearest = nullptr;
      int fewest = INT_MAX;
      for (auto it = s.variants.rbegin(); it != s.variants.rend(); ++it) {
        const int n = differences(*it, signature).distance;
        if (n < fewest) fewest = n, nearest = &*it;
      }
      const Differences d = differences(*nearest, signature);
      const bool unrecorded = !signature.empty() && signature.front().value == "?";
      line = "[torch_tpu compile] " + what + ": " + how + " variant " + std::to_string(s.count) + ". " +
             (d.items.empty() && unrecorded ? "Its program parameters match an earlier variant's; " +
                                                  signature.front().name + " differ: a number or an out= tensor's size."
              : d.items.empty() ? "Its inputs match an earlier variant's: the program differs in something they do "
                                  "not show (matmul precision, autocast, a default dtype, its other ops)."
                                : "Differs from the nearest earlier variant in: " + joined(d) + "." + hints(d));
    }
    s.variants.push_back(signature);
    if (s.variants.size() > kVariantsKept) s.variants.erase(s.variants.begin());
    const int n = variants_warning.load();
    if (n > 0 && s.since_warm > n && !s.warned) {
      s.warned = true;
      warning = "torch_tpu: " + what + " has compiled " + std::to_string(s.since_warm) +
                " variants since its warm-up (more than TORCH_TPU_COMPILE_VARIANTS_WARN=" + std::to_string(n) +
                "): its inputs keep changing; the compile log's lines say how.";
    }
  }
  if (!line.empty()) emit(line);
  if (!warning.empty()) TORCH_WARN(warning);
  return line;
}

LoggedCallScope::LoggedCallScope(const c10::OperatorHandle& op, const std::vector<c10::IValue>& flat,
                                 c10::ArrayRef<int> starts) {
  current_call = {&op, &flat, starts};
}

LoggedCallScope::~LoggedCallScope() { current_call = {}; }

void log_deferred_op(const c10::OperatorHandle& op, const std::vector<c10::IValue>& returns) {
  if (deferred_ops.size() > 100000) deferred_ops.clear();  // a loop that never flushes
  DeferredOp rec;
  rec.name = c10::toString(op.schema().operator_name());
  std::unordered_map<const void*, int> unused;
  const std::string prefix = "op " + std::to_string(deferred_ops.size() + 1) + " " + rec.name;
  for (size_t j = 0; j < returns.size(); ++j) {
    if (!returns[j].isTensor() || !returns[j].toTensor().defined()) continue;
    LoggedInput in = logged_tensor(returns[j].toTensor(), prefix + " result " + std::to_string(j), unused, -1);
    in.alias_of = -1;
    in.strides.clear();  // a result's strides follow its shape
    rec.results.push_back(std::move(in));
  }
  deferred_ops.push_back(std::move(rec));
}

namespace {

// The thread's recorded ops, when they are `state`'s: in order among its
// ops (which also hold copies and other steps no kernel launched), and not
// another thread's program or one recorded before the log was turned on.
bool deferred_ops_are(const ProgramState& state) {
  if (deferred_ops.empty()) return false;
  size_t k = 0;
  for (const auto& op : state.ops) {
    if (k < deferred_ops.size() && deferred_ops[k].name == op.name) ++k;
  }
  return k == deferred_ops.size();
}

}  // namespace

void log_program_lookup(const ProgramState& state, const char* how) {
  LoggedSignature sig;
  std::string site, what;
  if (state.owner) {
    std::string sequence;
    for (const auto& op : state.ops) sequence += op.name + ";";
    site = "fused:" + sequence;
    if (!how) return log_reuse(site);
    what = "DeferAndFuse program of " + std::to_string(state.ops.size()) + " ops (" +
           (state.ops.empty() ? std::string() : state.ops.front().name + " ... " + state.ops.back().name) + ")";
    if (deferred_ops_are(state)) {
      for (const auto& op : deferred_ops) sig.insert(sig.end(), op.results.begin(), op.results.end());
    }
  } else if (!how) {
    return log_reuse(current_call.op         ? c10::toString(current_call.op->schema().operator_name())
                     : state.ops.size() == 1 ? state.ops.front().name
                                             : "program of " + std::to_string(state.ops.size()) + " ops");
  } else if (current_call.op) {
    const c10::FunctionSchema& schema = current_call.op->schema();
    site = what = c10::toString(schema.operator_name());
    // Names of the flat positions: the matmul precision and device, then
    // each argument (a list's length and elements; a wrapped number's value).
    const auto& flat = *current_call.flat;
    const c10::ArrayRef<int> starts = current_call.starts;
    std::vector<std::string> names(flat.size());
    if (!names.empty()) names[0] = "matmul precision";
    if (names.size() > 1) names[1] = "device";
    for (size_t k = 0; k < starts.size(); ++k) {
      const size_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : flat.size();
      const std::string arg = k < schema.arguments().size() ? schema.arguments()[k].name() : "argument";
      const bool list =
          schema.arguments().size() > k && schema.arguments()[k].type()->kind() == c10::TypeKind::ListType;
      for (size_t p = begin; p < end && p < names.size(); ++p) {
        if (list) {
          names[p] = p == begin ? "len(" + arg + ")" : arg + "[" + std::to_string(p - begin - 1) + "]";
        } else {
          names[p] = p == begin ? arg : arg + " value";
        }
      }
    }
    sig = logged_signature(flat, names);
  } else {
    site = what =
        state.ops.size() == 1 ? state.ops.front().name : "program of " + std::to_string(state.ops.size()) + " ops";
  }
  if (sig.empty()) {
    // No call to name the inputs by (an op with out= arguments, Debug mode):
    // the program's parameters, and a marker saying so.
    LoggedInput unknown;
    unknown.name = "its arguments (not recorded for an op with out= arguments, or in Debug mode)";
    unknown.value = "?";
    sig.push_back(std::move(unknown));
    for (size_t k = 0; k < state.args.size(); ++k) {
      LoggedInput in;
      in.name = "parameter " + std::to_string(k);
      in.tensor = true;
      in.dtype = "PJRT type " + std::to_string(static_cast<int>(state.args[k]->element_type()));
      in.device = "tpu";
      in.sizes = state.args[k]->dims();
      sig.push_back(std::move(in));
    }
  }
  log_compile(site, what, how, sig);
}

void forget_deferred_ops(const ProgramState& state) {
  if (deferred_ops_are(state)) deferred_ops.clear();
}

}  // namespace torch_tpu::device
