#include "exec/step_replay.h"

#include <c10/util/SmallVector.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>

#include "device/program_profiler.h"
#include "exec/compile_log.h"
#include "exec/graph_capture.h"
#include "exec/mode_executor.h"
#include "exec/pending_work.h"
#include "exec/tensor_program.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_STEP_REPLAY");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// Flushes remembered per thread: a loop's step is one or two (a host read
// mid-step cuts it), an evaluation loop's a few more. Each holds an
// executable alive.
constexpr size_t kMaxTemplates = 8;

// TORCH_TPU_STEP_REPLAY_LOG=1: why a replay stopped, on stderr.
bool logged() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_STEP_REPLAY_LOG");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

// What is being replayed: a lowered op (its schema is its identity) or a
// hand-written kernel (an address of its own).
struct Caller {
  const void* id;
  const c10::OperatorHandle* op;
  const char* kernel;
  std::string name() const { return op ? c10::toString(op->schema().operator_name()) : kernel; }
};

std::nullopt_t stopped(const Caller& op, size_t matched, size_t of, const std::string& why) {
  if (logged()) {
    std::cerr << "tpu step replay: op " << matched + 1 << " of " << of << ", " << op.name()
              << ", does not match: " << why << std::endl;
  }
  return std::nullopt;
}

bool is_device_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

// The numbers a replay feeds to an op's program inputs must be ones the
// program takes: equal where they shared an input, fitting a checked dtype
// (as CapturedProgram::matches asks of a graph's).
bool floats_fit(const StepOpKey& key, const std::vector<c10::IValue>& flat) {
  for (const StepOpKey::Param& p : key.params) {
    if (p.kind != StepOpKey::Param::Kind::HostFloat) continue;
    const double first = flat[p.origins.front()].toDouble();
    for (int o : p.origins) {
      if (flat[o].toDouble() != first) return false;
    }
    lower::ScalarArg number;
    number.kind = lower::ScalarArg::Kind::Float;
    number.f = first;
    if (p.range_checked && lower::scalar_overflows(number, p.dtype)) return false;
  }
  return true;
}

const std::shared_ptr<const StepTemplate>* template_starting_with(const PendingWork& work, const void* op,
                                                                  uint64_t hash) {
  for (auto it = work.templates.rbegin(); it != work.templates.rend(); ++it) {
    const StepOpKey& first = *(*it)->keys.front();
    if (first.op == op && first.hash == hash) return &*it;
  }
  return nullptr;
}

// `key` with its storages renamed from the template's to the replay's.
std::shared_ptr<const StepOpKey> renamed(const StepOpKey& key, const StepReplay& replay) {
  auto copy = std::make_shared<StepOpKey>(key);
  auto rename = [&](uint64_t& id) {
    if (!id) return;
    auto it = replay.storages.find(id);
    TORCH_CHECK(it != replay.storages.end(), "internal: a replayed op's storage was never mapped");
    id = it->second.id;
  };
  for (uint64_t& id : copy->storages) rename(id);
  for (StepOpKey::Result& r : copy->results) {
    for (StepOpKey::Result::Fresh& f : r.fresh) rename(f.storage);
  }
  return copy;
}

}  // namespace

std::optional<OpCall> step_op_call(const c10::OperatorHandle& op, const OpSpec& spec,
                                   const std::vector<c10::IValue>& args) {
  if (!enabled() || compile_log_on()) return std::nullopt;
  return op_call_signature(op, spec, args, /*keeps_own_pending=*/true);
}

namespace {

std::optional<std::vector<c10::IValue>> replay_next(const Caller& op, const OpCall& call,
                                                    const std::vector<c10::IValue>& args) {
  std::unique_lock<std::recursive_mutex> lock;
  PendingWork& work = lock_pending_work(lock);
  if (work.capture.active) return std::nullopt;
  std::shared_ptr<StepReplay> replay = work.replay;
  const bool starts = !replay;
  if (starts) {
    if (work.templates.empty()) return std::nullopt;
    for (const auto& program : work.per_device) {
      if (program && !program->ops.empty()) return std::nullopt;  // recording: the flush began elsewhere
    }
    const std::shared_ptr<const StepTemplate>* step = template_starting_with(work, op.id, call.key);
    if (!step) return std::nullopt;
    replay = std::make_shared<StepReplay>();
    replay->step = *step;
    // Sized once: growing them op by op rehashed them all through the step.
    replay->storages.reserve((*step)->storage_count);
    replay->replay_ids.reserve((*step)->storage_count);
  }
  const StepTemplate& step = *replay->step;
  const size_t n = step.keys.size();
  if (replay->matched >= n) return stopped(op, replay->matched, n, "the step ended");
  const StepOpKey& key = *step.keys[replay->matched];
  if (key.op != op.id) return stopped(op, replay->matched, n, "another op");
  if (key.hash != call.key) return stopped(op, replay->matched, n, "another signature");
  std::string why;
  if (!key.record.matches(call.flat, logged() ? &why : nullptr)) return stopped(op, replay->matched, n, why);
  if (!floats_fit(key, call.flat)) return stopped(op, replay->matched, n, "a number the program cannot take");

  // out= arguments take the meta kernel's resize, as recording did (a
  // new storage: mapped below).
  for (const StepOpKey::Resize& r : key.resizes) {
    const at::Tensor& real = args[r.argument].toTensor();
    if (real.sizes() != r.sizes || real.strides() != r.strides) {
      real.resize_(r.sizes);
      if (real.strides() != r.strides) real.as_strided_(r.sizes, r.strides, real.storage_offset());
    }
  }

  // Storages: the template's map one to one onto the replay's.
  c10::SmallVector<std::pair<uint64_t, StepReplay::Storage>, 8> mapped;  // new in this op
  auto mapped_now = [&](uint64_t recorded) -> const StepReplay::Storage* {
    for (const auto& m : mapped) {
      if (m.first == recorded) return &m.second;
    }
    auto it = replay->storages.find(recorded);
    return it == replay->storages.end() ? nullptr : &it->second;
  };
  auto taken = [&](uint64_t id) {
    if (replay->replay_ids.count(id)) return true;
    for (const auto& m : mapped) {
      if (m.second.id == id) return true;
    }
    return false;
  };
  for (size_t pos = 0; pos < key.storages.size(); ++pos) {
    const uint64_t recorded = key.storages[pos];
    if (!recorded) continue;
    const at::Tensor& t = call.flat[pos].toTensor();
    StorageBuffer& sb = storage_buffer(t);
    if (const StepReplay::Storage* m = mapped_now(recorded)) {
      if (m->id != sb.id) return stopped(op, replay->matched, n, "another storage at " + std::to_string(pos));
      // Read again: recording would rebind a buffer another thread replaced.
      auto param = step.param_of_storage.find(recorded);
      if (param != step.param_of_storage.end() && param->second < replay->args.size() && replay->args[param->second] &&
          sb.current() != replay->args[param->second]) {
        return std::nullopt;
      }
      continue;
    }
    if (taken(sb.id))
      return stopped(op, replay->matched, n, "a storage the step had elsewhere at " + std::to_string(pos));
    mapped.push_back({recorded, {sb.id, c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl())}});
  }

  // The op matches. Its results first (allocating may raise: nothing changed yet).
  const int device = key.device;
  std::vector<c10::IValue> returns;
  returns.reserve(key.results.size());
  for (const StepOpKey::Result& r : key.results) {
    auto fresh = [&](const StepOpKey::Result::Fresh& f) {
      at::Tensor t = empty_tpu(f.sizes, f.strides, f.dtype, device);
      mapped.push_back(
          {f.storage,
           {storage_buffer(t).id, c10::weak_intrusive_ptr<c10::StorageImpl>(t.storage().getWeakStorageImpl())}});
      return t;
    };
    switch (r.kind) {
      case StepOpKey::Result::Kind::Argument:
        returns.push_back(args[r.argument]);
        break;
      case StepOpKey::Result::Kind::Fresh:
        returns.emplace_back(fresh(r.fresh.front()));
        break;
      case StepOpKey::Result::Kind::FreshList: {
        std::vector<at::Tensor> list;
        list.reserve(r.fresh.size());
        for (const auto& f : r.fresh) list.push_back(fresh(f));
        returns.emplace_back(std::move(list));
        break;
      }
      case StepOpKey::Result::Kind::Value:
        returns.push_back(r.value);
        break;
      case StepOpKey::Result::Kind::Undefined:
        returns.emplace_back(at::Tensor());
        break;
    }
  }
  // Its program inputs, bound in the order recording binds them (random
  // states are drawn from the generator in that order).
  const size_t first_param = step.program->ops[replay->matched].args;
  c10::SmallVector<runtime::BufferPtr, 8> bound;
  bound.reserve(key.params.size());
  for (size_t i = 0; i < key.params.size(); ++i) {
    const StepOpKey::Param& p = key.params[i];
    switch (p.kind) {
      case StepOpKey::Param::Kind::Storage:
        bound.push_back(storage_buffer(call.flat[p.position].toTensor()).current());
        break;
      case StepOpKey::Param::Kind::HostTensor:
        bound.push_back(upload_host(call.flat[p.position].toTensor(), device));
        break;
      case StepOpKey::Param::Kind::Constant:
        bound.push_back(step.program->args[first_param + i]);
        break;
      case StepOpKey::Param::Kind::HostFloat:
        bound.push_back(upload_number(call.flat[p.origins.front()].toDouble(), p.dtype, device));
        break;
      case StepOpKey::Param::Kind::Rng:
        bound.push_back(draw_rng_state(p.generator, device));
        break;
      case StepOpKey::Param::Kind::ViewOffset:
        bound.push_back(view_offset_buffer(call.flat[p.position].toTensor().storage_offset(), device));
        break;
    }
  }

  // Commit.
  if (replay->args.empty()) replay->args.resize(step.program->args.size());
  for (size_t i = 0; i < bound.size(); ++i) replay->args[first_param + i] = std::move(bound[i]);
  for (auto& [recorded, storage] : mapped) {
    auto slot = step.slot_of_storage.find(recorded);
    if (slot != step.slot_of_storage.end() && step.program->slots[slot->second].written) {
      if (auto alive = storage.storage.lock()) storage_buffer(c10::Storage(alive)).pending_in = &work;
    }
    replay->replay_ids.insert(storage.id);
    replay->storages.emplace(recorded, std::move(storage));
  }
  replay->matched++;
  runtime::metrics().step_replay_ops++;
  if (starts) {
    work.replay = replay;
    replay_began();
  }
  if (replay->matched == step.keys.size() && step.flush_when_complete) flush_pending_work(work, "size_bound");
  return returns;
}

}  // namespace

std::optional<std::vector<c10::IValue>> step_replay_op(const c10::OperatorHandle& op, const OpCall& call,
                                                       const std::vector<c10::IValue>& args) {
  return replay_next({&op.schema(), &op, nullptr}, call, args);
}

std::optional<OpCall> step_kernel_call(const void* kernel, const std::vector<c10::IValue>& args) {
  if (!enabled() || compile_log_on() || !current_mode_executor().defers_programs()) return std::nullopt;
  OpCall call;
  call.flat.emplace_back(static_cast<int64_t>(current_device()));
  SignaturePolicy policy = program_signature(/*floats_are_inputs=*/false);
  policy.keeps_own_pending = true;
  for (const c10::IValue& v : args) {
    call.arg_start.push_back(static_cast<int>(call.flat.size()));
    if (!append_signature(v, call.flat, policy)) return std::nullopt;
  }
  call.key = signature_hash(kernel, call.flat, policy);
  return call;
}

bool step_replay_kernel(const void* kernel, const char* name, const OpCall& call,
                        const std::vector<c10::IValue>& args) {
  return replay_next({kernel, nullptr, name}, call, args).has_value();
}

void set_step_kernel_key(const void* kernel, const OpCall& call, TensorProgram& program) {
  program.set_step_key(make_key(kernel, call, program, {}, {}, std::nullopt, {}));
}

SignatureRecord step_record(const OpCall& call) {
  SignaturePolicy policy = program_signature(call.floats_are_inputs);
  policy.keeps_own_pending = true;
  return record_signature(call.flat, policy);
}

std::shared_ptr<const StepOpKey> make_step_key(const c10::OperatorHandle& op, const OpCall& call,
                                               TensorProgram& program, std::vector<StepOpKey::Result> results,
                                               const std::vector<c10::IValue>& returns,
                                               std::optional<SignatureRecord> record,
                                               std::vector<StepOpKey::Resize> resizes) {
  return make_key(&op.schema(), call, program, std::move(results), returns, std::move(record), std::move(resizes));
}

std::shared_ptr<const StepOpKey> make_key(const void* id, const OpCall& call, TensorProgram& program,
                                          std::vector<StepOpKey::Result> results,
                                          const std::vector<c10::IValue>& returns,
                                          std::optional<SignatureRecord> record,
                                          std::vector<StepOpKey::Resize> resizes) {
  auto key = std::make_shared<StepOpKey>();
  key->op = id;
  key->hash = call.key;
  key->device = program.device();
  key->record = record ? std::move(*record) : step_record(call);
  key->resizes = std::move(resizes);
  key->storages.assign(call.flat.size(), 0);
  for (size_t pos = 0; pos < call.flat.size(); ++pos) {
    if (is_device_tensor(call.flat[pos])) key->storages[pos] = storage_buffer(call.flat[pos].toTensor()).id;
  }

  const ProgramState& state = program.state();
  // Floats a program constant also stands for stay signature (as a graph
  // capture's, graph_capture.cpp).
  std::vector<bool> pinned(call.flat.size(), false);
  for (size_t i = program.first_param(); i < state.sources.size(); ++i) {
    const ParamSource& src = state.sources[i];
    if (src.kind != ParamSource::Kind::HostScalar || !src.fixed) continue;
    for (int o : src.origins) {
      if (o >= 0 && static_cast<size_t>(o) < call.flat.size()) pinned[o] = true;
    }
  }
  auto free_float = [&](const ParamSource& src) {
    if (src.fixed || src.origins.empty()) return false;
    for (int o : src.origins) {
      if (o < 0 || static_cast<size_t>(o) >= call.flat.size() || pinned[o]) return false;
      if (!call.flat[o].isDouble() || call.flat[o].toDouble() != src.value) return false;
    }
    return true;
  };
  bool offsets_pinned = false;
  for (size_t i = program.first_param(); i < state.sources.size(); ++i) {
    const ParamSource& src = state.sources[i];
    StepOpKey::Param p;
    switch (src.kind) {
      case ParamSource::Kind::Storage:
        p.kind = StepOpKey::Param::Kind::Storage;
        for (size_t pos = 0; pos < key->storages.size() && p.position < 0; ++pos) {
          if (key->storages[pos] == src.storage_id) p.position = static_cast<int>(pos);
        }
        if (p.position < 0) return nullptr;  // a storage that is no argument's
        break;
      case ParamSource::Kind::HostTensor:
        p.kind = StepOpKey::Param::Kind::HostTensor;
        for (size_t pos = 0; pos < call.flat.size() && p.position < 0; ++pos) {
          const c10::IValue& v = call.flat[pos];
          if (v.isTensor() && v.toTensor().defined() && v.toTensor().unsafeGetTensorImpl() == src.host) {
            p.position = static_cast<int>(pos);
          }
        }
        if (p.position < 0) return nullptr;
        break;
      case ParamSource::Kind::Constant:
        break;
      case ParamSource::Kind::HostScalar:
        if (!free_float(src)) break;
        p.kind = StepOpKey::Param::Kind::HostFloat;
        p.origins = src.origins;
        p.dtype = src.dtype;
        p.range_checked = src.range_checked;
        for (int o : src.origins) key->record.entries[o].kind = SignatureEntry::Kind::FreeFloat;
        break;
      case ParamSource::Kind::Rng:
        p.kind = StepOpKey::Param::Kind::Rng;
        p.generator = src.generator;
        break;
      case ParamSource::Kind::ViewOffset:
        // As a graph capture's (graph_capture.cpp): a view the kernel made
        // of an argument keeps its offset, and the key its exact offsets.
        p.position = position_of_tensor(call.flat, src.host);
        if (p.position >= 0) {
          p.kind = StepOpKey::Param::Kind::ViewOffset;
        } else if (views_storage(call.flat, src.storage_id)) {
          offsets_pinned = true;
        }
        break;
    }
    key->params.push_back(std::move(p));
  }
  // Views of storages the step made earlier were read at their offsets:
  // those offsets stay exact, and all of them when such a view is none of
  // the arguments (the kernel made it: its offset may follow theirs).
  std::vector<int> static_positions;
  for (const c10::TensorImpl* view : program.static_offset_views()) {
    static_positions.push_back(position_of_tensor(call.flat, view));
    if (static_positions.back() < 0) offsets_pinned = true;
  }
  if (offsets_pinned) {
    for (StepOpKey::Param& p : key->params) {
      if (p.kind == StepOpKey::Param::Kind::ViewOffset) p.kind = StepOpKey::Param::Kind::Constant;
    }
  } else {
    free_offsets(key->record);
    for (int position : static_positions) key->record.entries[position].free_offset = false;
  }

  for (size_t r = 0; r < results.size(); ++r) {
    StepOpKey::Result& result = results[r];
    if (result.kind == StepOpKey::Result::Kind::Fresh) {
      result.fresh.front().storage = storage_buffer(returns[r].toTensor()).id;
    } else if (result.kind == StepOpKey::Result::Kind::FreshList) {
      const std::vector<at::Tensor> list = returns[r].toTensorVector();
      for (size_t k = 0; k < list.size(); ++k) result.fresh[k].storage = storage_buffer(list[k]).id;
    }
  }
  key->results = std::move(results);
  return key;
}

std::unique_ptr<ProgramState> replay_as_program(const StepReplay& replay, PendingWork* owner) {
  const StepTemplate& step = *replay.step;
  auto state = std::make_unique<ProgramState>(*step.program);
  if (replay.matched < state->ops.size()) state->rewind_to_op(replay.matched);
  state->owner = owner;
  for (ProgramState::Slot& slot : state->slots) {
    auto it = replay.storages.find(slot.storage_id);
    TORCH_CHECK(it != replay.storages.end(), "internal: a replayed step's storage was never mapped");
    slot.storage_id = it->second.id;
    slot.storage = it->second.storage;
  }
  for (size_t i = 0; i < state->args.size(); ++i) {
    state->args[i] = replay.args[i];
    ParamSource& src = state->sources[i];
    if (src.kind == ParamSource::Kind::Storage) src.storage_id = replay.storages.at(src.storage_id).id;
  }
  for (ProgramState::OpRecord& record : state->ops) record.key = renamed(*record.key, replay);
  return state;
}

bool launch_replay(StepReplay& replay, PendingWork* owner) {
  const StepTemplate& step = *replay.step;
  const ProgramState& program = *step.program;
  // The results to store: the written storages alive now must be the ones
  // the executable was made to store.
  std::vector<c10::intrusive_ptr<c10::StorageImpl>> alive;
  alive.reserve(step.launched.output_slots.size());
  size_t next = 0;
  for (size_t s = 0; s < program.slots.size(); ++s) {
    if (!program.slots[s].written) continue;
    auto storage = replay.storages.at(program.slots[s].storage_id).storage.lock();
    const bool output = next < step.launched.output_slots.size() && step.launched.output_slots[next] == s;
    if (output) ++next;
    if (static_cast<bool>(storage) != output) return false;
    if (storage) alive.push_back(std::move(storage));
  }
  ProgramLaunch l;
  l.device = program.device;
  l.owner = owner;
  l.args = replay.args;
  for (size_t idx : step.launched.donated_params) {
    const auto& m = replay.storages.at(program.sources[idx].storage_id);
    const long holders = m.storage.expired() ? 1 : 2;
    l.donors.push_back({idx, holders + 1});  // + the replay's own list of the arguments
  }
  for (size_t k = 0; k < alive.size(); ++k) {
    l.targets.push_back(
        {&storage_buffer(c10::Storage(alive[k])), program.slots[step.launched.output_slots[k]].current->dtype()});
  }
  l.checks = step.checks;
  l.trace_name = &step.trace_name;
  l.op_names = &step.op_names;
  launch(*step.executable, l);
  runtime::metrics().step_replays++;
  return true;
}

std::unique_ptr<StepTemplate> template_of(const ProgramState& program, const char* reason) {
  if (!enabled() || program.replication || !program.owner || program.owner->capture.active || program.ops.empty()) {
    return nullptr;
  }
  auto step = std::make_unique<StepTemplate>();
  for (size_t k = 0; k < program.ops.size(); ++k) {
    const ProgramState::OpRecord& op = program.ops[k];
    if (!op.key) {
      if (logged()) {
        std::cerr << "tpu step replay: a flush of " << program.ops.size() << " ops is not remembered: op " << k + 1
                  << ", " << op.name << ", has no key" << std::endl;
      }
      return nullptr;
    }
    const size_t end = k + 1 < program.ops.size() ? program.ops[k + 1].args : program.args.size();
    if (end - op.args != op.key->params.size()) return nullptr;
    step->keys.push_back(op.key);
  }
  for (size_t i = 0; i < program.sources.size(); ++i) {
    const ParamSource& src = program.sources[i];
    // A storage bound twice was rebound mid-program (another thread replaced its buffer).
    if (src.kind == ParamSource::Kind::Storage && !step->param_of_storage.emplace(src.storage_id, i).second) {
      return nullptr;
    }
  }
  std::unordered_set<uint64_t> keyed;
  for (const auto& key : step->keys) {
    for (uint64_t id : key->storages) keyed.insert(id);
    for (const auto& r : key->results) {
      for (const auto& f : r.fresh) keyed.insert(f.storage);
    }
  }
  step->storage_count = keyed.size();
  for (size_t s = 0; s < program.slots.size(); ++s) {
    if (!keyed.count(program.slots[s].storage_id)) return nullptr;  // a replay could not name it
    step->slot_of_storage.emplace(program.slots[s].storage_id, s);
  }
  auto copy = std::make_unique<ProgramState>(program);
  copy->owner = nullptr;
  for (ProgramState::Slot& slot : copy->slots) slot.storage.reset();
  // Only constants stay bound: the rest is the recorded step's, bound anew by each replay.
  for (size_t k = 0; k < program.ops.size(); ++k) {
    const StepOpKey& key = *program.ops[k].key;
    for (size_t i = 0; i < key.params.size(); ++i) {
      runtime::BufferPtr& arg = copy->args[program.ops[k].args + i];
      if (key.params[i].kind != StepOpKey::Param::Kind::Constant) {
        arg = nullptr;
      } else if (arg) {
        arg->upload_value_now();  // read by every replay: uploaded once (DeviceRuntime::upload_for_launch)
      }
    }
  }
  for (const auto& check : program.range_checks) step->checks.push_back(check.second);
  step->flush_when_complete = std::string(reason) == "size_bound";
  // Named as the flush it replays (program_launch.cpp, program_trace_name), marked replayed.
  step->trace_name =
      "fused " + std::to_string(program.ops.size()) + " ops (cut: " + std::string(reason) + ", replayed)";
  for (const auto& op : program.ops) step->op_names.push_back(op.name);
  step->program = std::move(copy);
  return step;
}

void remember_step(PendingWork& work, std::unique_ptr<StepTemplate> step, LaunchedProgram launched) {
  if (!step || !launched.executable) return;
  step->executable = launched.executable;
  step->launched = std::move(launched);
  const StepOpKey& first = *step->keys.front();
  auto& templates = work.templates;
  for (auto it = templates.begin(); it != templates.end(); ++it) {
    const StepOpKey& other = *(*it)->keys.front();
    if (other.op == first.op && other.hash == first.hash) {
      templates.erase(it);
      break;
    }
  }
  if (templates.size() >= kMaxTemplates) templates.erase(templates.begin());
  templates.push_back(std::move(step));
}

}  // namespace torch_tpu::device
