#include "exec/graph_capture.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "device/generator.h"
#include "runtime/device_runtime.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

bool is_device_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

bool is_host_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu();
}

// Donation updates an input in place, so a replay needs no second buffer of
// its size. XLA:CPU runs a program that donates a buffer only after every
// earlier program using that buffer finished, so the host waits for the
// device at every in-place op of a chain (an optimizer's add_ after add_):
// measured 47 us per 32x32 add_ against 13 us without donation
// (benchmarks/dispatch.py). Below this size a copy costs less than that wait.
constexpr size_t kMinDonatedBytes = 64 * 1024;

// An output over an input's storage is a view of that input, as the graph
// made it; one over a fresh storage is a tensor of its own (set_, not a
// view): autograd refuses in-place ops on views a multi-output function
// returns, and the trace returned no view there either (a 0-d loss the
// Trainer scales in place).
at::Tensor restride(const at::Tensor& base, const CapturedProgram::Output& o, bool fresh) {
  if (base.sizes() == c10::IntArrayRef(o.sizes) && base.strides() == c10::IntArrayRef(o.strides) &&
      base.storage_offset() == o.offset) {
    return base;
  }
  if (fresh) return at::empty({0}, base.options()).set_(base.storage(), o.offset, o.sizes, o.strides);
  return base.as_strided(o.sizes, o.strides, o.offset);
}

}  // namespace

runtime::BufferPtr upload_host(const at::Tensor& cpu, int device) {
  at::Tensor c = cpu.contiguous();
  hlo::ElementType dtype = element_type(c.scalar_type());
  runtime::metrics().bytes_to_device += static_cast<int64_t>(c.nbytes());
  return runtime::DeviceRuntime::get().upload(c.data_ptr(), pjrt_type(dtype), c.sizes().vec(), device);
}

namespace {

// A number a replay feeds, as the bytes its program input holds.
struct NumberKey {
  int device = -1;  // no device: an empty entry matches no number
  hlo::ElementType dtype = hlo::ElementType::F32;
  uint64_t bits = 0;
  bool operator==(const NumberKey& o) const { return device == o.device && dtype == o.dtype && bits == o.bits; }
};

struct NumberKeyHash {
  size_t operator()(const NumberKey& k) const {
    return std::hash<uint64_t>()(k.bits) ^ (static_cast<size_t>(k.device) << 8) ^ static_cast<size_t>(k.dtype);
  }
};

// A number replays fed before (an optimizer's lr, betas, eps and weight
// decay, a model's constant scale) reuses the buffer uploaded for it, as a
// view's offset does (view_offset_buffer): every replay uploading every
// float is a host-to-device transfer per number per launch, which on a TPU
// crosses PCIe. A number fed the first time travels in its launch's job
// (upload_for_launch), as one that changes every step (a bias correction, a
// schedule's lr) always does; one seen among the last kRecent such numbers
// is fed again, so it is uploaded once and kept. The buffers are inputs,
// never donated, so launches share them. Bounded: a table full of numbers
// that stopped repeating is cleared.
runtime::BufferPtr kept_or_uploaded_number(const NumberKey& key, const void* bytes, size_t nbytes) {
  constexpr size_t kRecent = 64, kMaxKept = 1024;
  static std::mutex mutex;
  static auto* kept = new std::unordered_map<NumberKey, runtime::BufferPtr, NumberKeyHash>();  // leaked: used at exit
  static auto* recent = new std::array<NumberKey, kRecent>();
  static size_t next_recent = 0;
  auto& rt = runtime::DeviceRuntime::get();
  const PJRT_Buffer_Type type = pjrt_type(key.dtype);
  std::unique_lock<std::mutex> lock(mutex);
  if (auto it = kept->find(key); it != kept->end()) return it->second;
  runtime::metrics().bytes_to_device += static_cast<int64_t>(nbytes);
  if (std::find(recent->begin(), recent->end(), key) == recent->end()) {
    (*recent)[next_recent++ % kRecent] = key;
    lock.unlock();
    return rt.upload_for_launch(bytes, type, {}, key.device);
  }
  if (kept->size() >= kMaxKept) kept->clear();
  runtime::BufferPtr buffer = rt.upload(bytes, type, {}, key.device);
  kept->emplace(key, buffer);
  return buffer;
}

}  // namespace

// A Python float as a 0-d buffer of `dtype`, converted as CPU converts it
// (c10's casts), without making CPU tensors: a replay with a changing float
// (a schedule's lr, a bias correction) uploads one on every call, so the
// launch reading it does (upload_for_launch); one that repeats is uploaded
// once (kept_or_uploaded_number).
runtime::BufferPtr upload_number(double value, hlo::ElementType dtype, int device) {
  const at::ScalarType type = scalar_type(dtype);
  auto upload = [&](const auto& number) {
    NumberKey key{device, dtype, 0};
    static_assert(sizeof(number) <= sizeof(key.bits));
    std::memcpy(&key.bits, &number, sizeof(number));
    return kept_or_uploaded_number(key, &number, sizeof(number));
  };
  switch (type) {
    case at::kFloat:
      return upload(static_cast<float>(value));
    case at::kDouble:
      return upload(value);
    case at::kHalf:
      return upload(static_cast<c10::Half>(value));
    case at::kBFloat16:
      return upload(static_cast<c10::BFloat16>(value));
    default:
      return upload_host(at::scalar_tensor(value, at::kDouble).to(type), device);
  }
}

runtime::BufferPtr draw_rng_state(const at::Generator& generator, int device) {
  TpuGeneratorImpl* gen = tpu_generator(generator, device);
  uint64_t state[2];
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    state[0] = gen->current_seed();
    state[1] = gen->next_counter();
  }
  return runtime::DeviceRuntime::get().upload_for_launch(state, PJRT_Buffer_Type_U64, {2}, device);
}

bool CapturedProgram::matches(const std::vector<c10::IValue>& values) {
  auto fail = [&](size_t k, const std::string& what) {
    mismatch_ = "input " + std::to_string(k) + ": " + what;
    return false;
  };
  if (!signature.matches(values, &mismatch_)) return false;
  // Equal numbers shared one program input when captured; they still must be.
  // A number its range-checked input cannot hold is the lowering's to refuse
  // (LowerContext::scalar raises CPU's error), never a replay's to upload.
  for (const Param& p : params) {
    if (p.kind != Param::Kind::HostFloat) continue;
    for (int o : p.origins) {
      if (values[o].toDouble() != values[p.origins.front()].toDouble()) {
        return fail(o, "numbers that shared a program input differ");
      }
    }
    lower::ScalarArg number;
    number.kind = lower::ScalarArg::Kind::Float;
    number.f = values[p.origins.front()].toDouble();
    if (p.range_checked && lower::scalar_overflows(number, p.dtype)) {
      return fail(p.origins.front(), "a number its input's dtype cannot hold");
    }
  }
  return true;
}

std::optional<std::vector<c10::IValue>> CapturedProgram::replay(const std::vector<c10::IValue>& values) {
  if (!matches(values)) return std::nullopt;
  ProgramLaunch l;
  l.device = device;
  l.args.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    runtime::BufferPtr& arg = l.args[i];
    switch (p.kind) {
      case Param::Kind::Input: {
        const at::Tensor& t = values[p.input].toTensor();
        arg = signature.entries[p.input].kind == Input::Kind::HostTensor ? upload_host(t, device)
                                                                         : storage_buffer(t).current();
        break;
      }
      case Param::Kind::Constant:
        arg = p.constant;
        break;
      case Param::Kind::Rng:
        arg = draw_rng_state(p.generator, device);
        break;
      case Param::Kind::HostFloat:
        arg = upload_number(values[p.origins.front()].toDouble(), p.dtype, device);
        break;
      case Param::Kind::ViewOffset:
        arg = view_offset_buffer(values[p.input].toTensor().storage_offset(), device);
        break;
    }
    // An input the graph overwrites is updated in place when only its
    // storage and this argument list hold its buffer.
    if (p.donor && signature.entries[p.input].storage_nbytes >= kMinDonatedBytes) l.donors.push_back({i, 2});
  }
  // The fresh outputs' storages first: allocating can raise (out of memory)
  // before anything ran.
  c10::SmallVector<at::Tensor, 4> fresh(sinks.size());
  for (size_t s = 0; s < sinks.size(); ++s) {
    const Sink& sink = sinks[s];
    if (sink.kind == Sink::Kind::Fresh && sink.only_output >= 0) {
      // Made in its output's shape: no second tensor over the storage.
      const Output& o = outputs[sink.only_output];
      fresh[s] = empty_tpu(o.sizes, o.strides, o.dtype, device);
    } else if (sink.kind == Sink::Kind::Fresh) {
      const int64_t numel = static_cast<int64_t>(sink.nbytes) / hlo::byte_size(sink.dtype);
      fresh[s] = empty_tpu({numel}, {1}, scalar_type(sink.dtype), device);
    }
    const at::Tensor& target = sink.kind == Sink::Kind::InputWrite ? values[sink.input].toTensor() : fresh[s];
    l.targets.push_back({&storage_buffer(target), sink.dtype});
  }
  l.checks = checks;
  if (!replica_devices.empty()) l.replica_devices = &replica_devices;
  l.trace_name = &trace_name;
  l.op_names = &op_names;
  if (executable) launch(*executable, l);
  std::vector<c10::IValue> out;
  out.reserve(outputs.size());
  for (const Output& o : outputs) {
    switch (o.kind) {
      case Output::Kind::None:
        out.emplace_back();
        break;
      case Output::Kind::FromSink:
        out.emplace_back(restride(fresh[o.index], o, /*fresh=*/true));
        break;
      case Output::Kind::Empty:
        out.emplace_back(restride(empty_tpu(o.sizes, o.strides, o.dtype, device), o, /*fresh=*/true));
        break;
      case Output::Kind::Input: {
        // A view of an input at an offset that is free (a replay's x[t].add_
        // returns x[t], not x[t] of the capture) sits where it sat from it.
        const at::Tensor& input = values[o.index].toTensor();
        Output moved = o;
        moved.offset += input.storage_offset() - signature.entries[o.index].offset;
        out.emplace_back(restride(input, moved, /*fresh=*/false));
        break;
      }
    }
  }
  return out;
}

void begin_capture(int device) { begin_graph_capture(device); }

void abort_capture() { abort_graph_capture(); }

std::shared_ptr<CapturedProgram> end_capture(int device, const std::vector<c10::IValue>& values,
                                             const std::vector<c10::IValue>& graph_outputs, std::string* why) {
  bool broken = false;
  std::unique_ptr<ProgramState> state = end_graph_capture(device, &broken);
  // A graph that ran no device op (a vision tower's reshapes and permutes
  // between two graph breaks) is captured as an empty program: its replays
  // rebuild its views of the inputs, unless a flush split it (its ops then
  // ran as programs of their own).
  if (!state) state = std::make_unique<ProgramState>(device);
  static std::atomic<int> graphs{0};
  const size_t n = state->ops.size();
  std::string name = take_graph_name();  // its function's, from torch_tpu/compile.py
  if (name.empty()) name = "graph " + std::to_string(++graphs);
  name += " (" + std::to_string(n) + (n == 1 ? " op)" : " ops)");
  return capture_program(std::move(state), broken, device, values, graph_outputs, why, name);
}

std::shared_ptr<CapturedProgram> capture_program(std::unique_ptr<ProgramState> state, bool broken, int device,
                                                 const std::vector<c10::IValue>& values,
                                                 const std::vector<c10::IValue>& graph_outputs, std::string* why,
                                                 const std::string& name) {
  auto cap = std::make_shared<CapturedProgram>();
  cap->device = device;
  cap->trace_name = name;
  for (const auto& op : state->ops) {
    if (!op.name.empty()) cap->op_names.push_back(op.name);
  }
  if (cap->op_names.empty()) cap->op_names.push_back(name);  // a Strict op's program, named when it runs
  std::string reason = broken ? "a flush split the graph (a host read, a CPU fallback or another device)" : "";
  auto refuse = [&](const std::string& r) {
    if (reason.empty()) reason = r;
  };

  // Inputs and their signature: graph replay's policy is a program's (a
  // graph's numbers are baked in unless the loop below frees them).
  cap->signature = record_signature(values, program_signature(/*floats_are_inputs=*/false));
  std::unordered_map<uint64_t, int> input_of_storage;
  std::unordered_map<const c10::TensorImpl*, int> input_of_host;
  for (size_t k = 0; k < values.size(); ++k) {
    const c10::IValue& v = values[k];
    if (is_device_tensor(v)) {
      input_of_storage.emplace(storage_buffer(v.toTensor()).id, static_cast<int>(k));
    } else if (is_host_tensor(v)) {
      input_of_host.emplace(v.toTensor().unsafeGetTensorImpl(), static_cast<int>(k));
    }
  }

  // Python floats the program reads only as inputs (an op cache capture's):
  // a replay feeds the new call's number. One that a program constant also
  // stands for (an origin of a `fixed` input) stays part of the signature.
  std::vector<bool> pinned(values.size(), false);
  for (const ParamSource& src : state->sources) {
    if (src.kind != ParamSource::Kind::HostScalar || !src.fixed) continue;
    for (int o : src.origins) {
      if (o >= 0 && static_cast<size_t>(o) < values.size()) pinned[o] = true;
    }
  }
  auto free_float = [&](const ParamSource& src) {
    if (src.fixed || src.origins.empty()) return false;
    for (int o : src.origins) {
      if (o < 0 || static_cast<size_t>(o) >= values.size() || pinned[o]) return false;
      if (!values[o].isDouble() || values[o].toDouble() != src.value) return false;
    }
    return true;
  };

  // Parameters: graph inputs are rebound on replay, the rest kept or redrawn.
  bool offsets_pinned = false;
  for (size_t i = 0; i < state->sources.size(); ++i) {
    const ParamSource& src = state->sources[i];
    CapturedProgram::Param p;
    switch (src.kind) {
      case ParamSource::Kind::Storage: {
        auto it = input_of_storage.find(src.storage_id);
        if (it == input_of_storage.end()) {
          refuse("the graph reads a tensor that is not one of its inputs");
        } else {
          p.kind = CapturedProgram::Param::Kind::Input;
          p.input = it->second;
        }
        break;
      }
      case ParamSource::Kind::HostTensor: {
        auto it = input_of_host.find(src.host);
        if (it != input_of_host.end()) {
          p.kind = CapturedProgram::Param::Kind::Input;
          p.input = it->second;
        } else {
          // A CPU tensor computed inside the graph (from a CPU input, say an
          // optimizer's step count): replays would not recompute it.
          refuse("the graph computes on CPU tensors");
        }
        break;
      }
      case ParamSource::Kind::Constant:
        p.constant = state->args[i];
        break;
      case ParamSource::Kind::HostScalar:
        if (!free_float(src)) {
          p.constant = state->args[i];
          break;
        }
        p.kind = CapturedProgram::Param::Kind::HostFloat;
        p.origins = src.origins;
        p.dtype = src.dtype;
        p.range_checked = src.range_checked;
        for (int o : src.origins) cap->signature.entries[o].kind = CapturedProgram::Input::Kind::FreeFloat;
        break;
      case ParamSource::Kind::Rng:
        p.kind = CapturedProgram::Param::Kind::Rng;
        p.generator = src.generator;
        break;
      case ParamSource::Kind::ViewOffset:
        p.input = position_of_tensor(values, src.host);
        if (p.input >= 0) {
          p.kind = CapturedProgram::Param::Kind::ViewOffset;
        } else {
          // A view made inside the call or graph: its offset stays the
          // program's, and so do the inputs' when it views one of them.
          p.constant = state->args[i];
          if (views_storage(values, src.storage_id)) offsets_pinned = true;
        }
        break;
    }
    cap->params.push_back(std::move(p));
  }
  if (offsets_pinned) {
    for (CapturedProgram::Param& p : cap->params) {
      if (p.kind != CapturedProgram::Param::Kind::ViewOffset) continue;
      p.kind = CapturedProgram::Param::Kind::Constant;
      p.constant = state->args[&p - cap->params.data()];
    }
  } else {
    free_offsets(cap->signature);
  }
  // Every replay reads the constants: a host value among them (a number
  // that also stands for a program constant) is uploaded once, here, not by
  // each replay's launch (DeviceRuntime::upload_for_launch).
  for (const CapturedProgram::Param& p : cap->params) {
    if (p.kind == CapturedProgram::Param::Kind::Constant && p.constant) p.constant->upload_value_now();
  }

  // Program outputs: every storage the graph wrote that is still alive.
  std::vector<hlo::Value> outs;
  std::vector<c10::intrusive_ptr<c10::StorageImpl>> targets;
  std::unordered_map<uint64_t, int> sink_of_storage;
  for (auto& slot : state->slots) {
    if (!slot.written) continue;
    auto storage = slot.storage.lock();
    if (!storage) continue;
    CapturedProgram::Sink sink;
    sink.dtype = slot.current->dtype();
    sink.nbytes = slot.nbytes;
    auto it = input_of_storage.find(slot.storage_id);
    if (it != input_of_storage.end()) {
      sink.kind = CapturedProgram::Sink::Kind::InputWrite;
      sink.input = it->second;
      if (slot.param && !state->replication) {  // replays may update it in place (replicas donate nothing)
        state->b.mark_donated(*slot.param, static_cast<int>(outs.size()));  // the output pushed below
        cap->params[param_index(*slot.param)].donor = true;
      }
    } else if (slot.param) {
      refuse("the graph writes a tensor that is not one of its inputs");
    }
    sink_of_storage[slot.storage_id] = static_cast<int>(cap->sinks.size());
    cap->sinks.push_back(sink);
    outs.push_back(*slot.current);
    targets.push_back(std::move(storage));
  }

  // Graph outputs, in terms of sinks and inputs.
  std::vector<bool> sink_returned(cap->sinks.size(), false);
  for (const c10::IValue& v : graph_outputs) {
    CapturedProgram::Output o;
    if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) {
      cap->outputs.push_back(o);
      continue;
    }
    if (!is_device_tensor(v)) {
      refuse("the graph returns something other than tpu tensors");
      continue;
    }
    const at::Tensor& t = v.toTensor();
    StorageBuffer& sb = storage_buffer(t);
    o.dtype = t.scalar_type();
    o.sizes = t.sizes().vec();
    o.strides = t.strides().vec();
    o.offset = t.storage_offset();
    if (auto it = sink_of_storage.find(sb.id);
        it != sink_of_storage.end() && cap->sinks[it->second].kind == CapturedProgram::Sink::Kind::Fresh) {
      o.kind = CapturedProgram::Output::Kind::FromSink;
      o.index = it->second;
      sink_returned[it->second] = true;
      if (element_type(o.dtype) != cap->sinks[it->second].dtype) refuse("the graph returns a view of another dtype");
    } else if (auto in = input_of_storage.find(sb.id); in != input_of_storage.end()) {
      o.kind = CapturedProgram::Output::Kind::Input;
      o.index = in->second;
      if (o.dtype != cap->signature.entries[in->second].dtype)
        refuse("the graph returns a view of an input in another dtype");
    } else if (t.numel() == 0) {
      o.kind = CapturedProgram::Output::Kind::Empty;
    } else {
      refuse("the graph returns a tensor it did not compute");
    }
    cap->outputs.push_back(std::move(o));
  }
  for (size_t s = 0; s < cap->sinks.size(); ++s) {
    if (cap->sinks[s].kind == CapturedProgram::Sink::Kind::Fresh && !sink_returned[s]) {
      refuse("a tensor computed inside the graph outlives it without being returned");
    }
  }
  // A fresh storage only one output covers, whole and from offset 0 (an
  // eager op's result): replays allocate it in that output's shape.
  std::vector<int> outputs_of_sink(cap->sinks.size(), 0);
  for (const CapturedProgram::Output& o : cap->outputs) {
    if (o.kind == CapturedProgram::Output::Kind::FromSink) outputs_of_sink[o.index]++;
  }
  for (size_t i = 0; i < cap->outputs.size(); ++i) {
    const CapturedProgram::Output& o = cap->outputs[i];
    if (o.kind != CapturedProgram::Output::Kind::FromSink || outputs_of_sink[o.index] != 1 || o.offset != 0) continue;
    CapturedProgram::Sink& sink = cap->sinks[o.index];
    const size_t nbytes = at::detail::computeStorageNbytes(o.sizes, o.strides, c10::elementSize(o.dtype));
    if (element_type(o.dtype) == sink.dtype && nbytes == sink.nbytes) sink.only_output = static_cast<int>(i);
  }

  // A graph that writes nothing (its outputs are inputs or views of them)
  // needs no program: a replay only restrides the inputs. One that draws
  // random numbers it then drops still advances its generator, as each
  // replay would have to.
  if (outs.empty() && !asserts_something(state->range_checks)) {
    const bool draws = std::any_of(state->sources.begin(), state->sources.end(),
                                   [](const ParamSource& src) { return src.kind == ParamSource::Kind::Rng; });
    if (draws) refuse("the graph draws random numbers it does not keep");
    if (!state->range_checks.empty()) refuse("the graph checks indices but computes nothing");
    if (!reason.empty()) {
      *why = reason;
      return nullptr;
    }
    return cap;
  }
  // Run it once, now, with the recorded buffers; nothing is donated, so the
  // same executable runs the replays.
  for (const auto& [pred, info] : state->range_checks) {
    outs.push_back(pred);
    cap->checks.push_back(info);
  }
  auto& runtime = runtime::DeviceRuntime::get();
  const ExecutableLookup lookup;
  if (state->replication) {
    cap->replica_devices = state->replication->devices;
    cap->executable = runtime.replicated_executable(state->b.finish(outs), cap->replica_devices);
  } else {
    cap->executable = runtime.executable(state->b.finish(outs));
  }
  ProgramLaunch l;
  l.device = device;
  l.trace_name = &cap->trace_name;
  l.op_names = &cap->op_names;
  l.origin = lookup.origin();
  if (state->replication) l.replica_devices = &cap->replica_devices;
  l.args = state->args;
  for (size_t k = 0; k < targets.size(); ++k) {
    l.targets.push_back({&storage_buffer(c10::Storage(targets[k])), cap->sinks[k].dtype});
  }
  l.checks = cap->checks;
  launch(*cap->executable, l);
  if (!reason.empty()) {
    *why = reason;
    return nullptr;
  }
  return cap;
}

}  // namespace torch_tpu::device
