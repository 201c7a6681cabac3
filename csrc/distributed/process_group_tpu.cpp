#include "distributed/process_group_tpu.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue_inl.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>

namespace torch_tpu::distributed {

using c10d::ReduceOp;
using c10d::Work;

// The first failure of a group's transport (see the header): once recorded,
// every call of the group raises.
class TransportFailure {
 public:
  // Records `error`, raised by the transport in `op`, unless one came first.
  void record(const char* op, const std::exception_ptr& error) {
    std::string what = std::string(op) + ": " + message_of(error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (what_.empty()) what_ = std::move(what);
  }
  // NCCL raises DistBackendError once its communicator was aborted.
  void check() const {
    std::string what;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      what = what_;
    }
    if (what.empty()) return;
    C10_THROW_ERROR(DistBackendError,
                    c10::str("tpu_dist: this group cannot run collectives any more: a collective failed in its "
                             "transport earlier (",
                             what,
                             "). Its ranks no longer agree on which collective comes next; destroy the group "
                             "(dist.destroy_process_group) and create a new one to go on."));
  }

 private:
  static std::string message_of(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "an unknown error";
    }
  }

  mutable std::mutex mutex_;
  std::string what_;  // empty until a collective failed
};

namespace {

bool on_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// Host copies of one call's tensors, and where results go back.
class Staging {
 public:
  // `force`: stage CPU tensors as well (the call rewrites its inputs).
  explicit Staging(bool force = false) : force_(force) {}

  // A host tensor with t's sizes and strides (gloo then checks the layout
  // exactly as it checks a CPU tensor's), holding t's values.
  at::Tensor in(const at::Tensor& t) {
    if (!must_stage(t)) return t;
    at::Tensor h = host_like(t);
    h.copy_(t);
    return h;
  }
  // A host tensor laid out like t whose values are written back into t.
  at::Tensor out(const at::Tensor& t) {
    if (!must_stage(t)) return t;
    at::Tensor h = host_like(t);
    writes_.emplace_back(t, h);
    return h;
  }
  at::Tensor inout(const at::Tensor& t) {
    if (!must_stage(t)) return t;
    at::Tensor h = in(t);
    writes_.emplace_back(t, h);
    return h;
  }
  std::vector<at::Tensor> in(const std::vector<at::Tensor>& ts) {
    return each(ts, [this](const at::Tensor& t) { return in(t); });
  }
  std::vector<at::Tensor> out(const std::vector<at::Tensor>& ts) {
    return each(ts, [this](const at::Tensor& t) { return out(t); });
  }
  std::vector<at::Tensor> inout(const std::vector<at::Tensor>& ts) {
    return each(ts, [this](const at::Tensor& t) { return inout(t); });
  }
  // In place, as CUDA collectives write their outputs: every view of the
  // tpu storage sees the result.
  void write_back() {
    for (auto& [dst, host] : writes_) dst.copy_(host);
    writes_.clear();
  }
  // The same from the transport's completion callback, on its thread: the
  // copies run at once there (torch_tpu::collective_write_back_ holds that
  // thread in Strict mode), not in a DeferAndFuse program nobody flushes.
  void write_back_from_callback() {
    static auto write_back = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("torch_tpu::collective_write_back_", "")
                                 .typed<at::Tensor&(at::Tensor&, const at::Tensor&)>();
    for (auto& [dst, host] : writes_) {
      if (on_tpu(dst)) {
        write_back.call(dst, host);
      } else {
        dst.copy_(host);
      }
    }
    writes_.clear();
  }

 private:
  bool must_stage(const at::Tensor& t) const { return t.defined() && (force_ || on_tpu(t)); }
  static at::Tensor host_like(const at::Tensor& t) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU));
  }
  template <typename Stage>
  static std::vector<at::Tensor> each(const std::vector<at::Tensor>& ts, Stage stage) {
    std::vector<at::Tensor> hs;
    hs.reserve(ts.size());
    for (const auto& t : ts) hs.push_back(stage(t));
    return hs;
  }

  bool force_;
  std::vector<std::pair<at::Tensor, at::Tensor>> writes_;
};

// gloo has no AVG and no PREMUL_SUM (NCCL has both, and FSDP and DDP comm
// hooks use them): they run as SUM with the factor applied on the host copy.
bool rewrites_inputs(const ReduceOp& op) { return op.op_ == ReduceOp::PREMUL_SUM; }

ReduceOp transport_op(const ReduceOp& op) {
  if (op.op_ == ReduceOp::AVG || op.op_ == ReduceOp::PREMUL_SUM) return ReduceOp(ReduceOp::SUM);
  return op;
}

void premultiply(std::vector<at::Tensor>& host_inputs, const ReduceOp& op) {
  if (op.op_ != ReduceOp::PREMUL_SUM) return;
  // NCCLPreMulSumSupplement: torch 2.11 and 2.12's name; 2.13 renamed it and keeps this one as an alias.
  auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor != nullptr, "PREMUL_SUM needs a factor (use dist._make_nccl_premul_sum)");
  for (auto& h : host_inputs) {
    if (factor->tensor_factor.defined()) {
      h.mul_(factor->tensor_factor.to(at::kCPU));
    } else {
      h.mul_(factor->double_factor);
    }
  }
}

void average(std::vector<at::Tensor>& host_outputs, const ReduceOp& op, int size) {
  if (op.op_ != ReduceOp::AVG) return;
  for (auto& h : host_outputs) {
    if (at::isIntegralType(h.scalar_type(), /*includeBool=*/true)) {
      h.div_(size, "trunc");  // integer AVG truncates, as NCCL's does
    } else {
      h.div_(size);
    }
  }
}

c10::intrusive_ptr<Work> finished(std::vector<at::Tensor> results) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(std::move(results)));
  return Work::create_from_future(future);
}

// Waits for the transport's Work of `op`; its failure poisons the group
// before it propagates. (An argument error gloo raises when the collective
// is issued, before anything is sent, leaves the group usable, as in gloo.)
void await(TransportFailure& failure, const char* op, const c10::intrusive_ptr<Work>& work) {
  try {
    work->wait();
  } catch (...) {
    failure.record(op, std::current_exception());
    throw;
  }
}

// What a transport thread finished with: the Work it completed (its results
// are the caller's tpu tensors, often with Python objects) and the host
// copies. Dropping the last reference to a tensor that has a Python object
// takes the GIL, and a thread that asks for the GIL while the interpreter is
// finalizing is ended by Python with a forced unwind, which std::terminate
// stops inside the destructor: the rank aborted at exit ("terminate called
// without an active exception") whenever a waiter had dropped its Work
// before the transport's worker left the callback. So transport threads
// never drop these references: the next thread that issues or waits on a
// collective drops them, or the group's destructor, and at exit the process
// leaves them to the OS.
class RetiredWork {
 public:
  static RetiredWork& instance() {
    // Never destroyed: what it holds at exit is left to the OS, since
    // dropping it after the interpreter is gone would call into Python.
    static auto* retired = new RetiredWork();
    return *retired;
  }
  void hold(std::shared_ptr<void> finished_with) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(std::move(finished_with));
  }
  // Drops everything held, on the calling thread (which is not a transport
  // worker), outside the lock: a destructor may take the GIL.
  void release() {
    std::vector<std::shared_ptr<void>> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(held_);
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> held_;
};

// The Work of a collective that the transport's completion callback
// completes. Work::create_from_future's would not do: its wait() returns
// once the future is set, with a value or an error alike, so a collective
// that failed (a peer killed mid-transfer) returned from a blocking
// all_reduce as if done, its tensors never written. Here wait() rethrows the
// failure (with or without a timeout), and the future carries it to the
// callbacks chained on it (DDP's and FSDP's).
class TransportWork : public Work {
 public:
  TransportWork(c10d::OpType type, std::vector<at::Tensor> results)
      : Work(-1, type),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
        results_(std::move(results)) {}

  void complete(const std::exception_ptr& error) {
    finish(error);
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(results_));
    }
  }
  bool wait(std::chrono::milliseconds timeout) override {
    Work::wait(timeout);  // rethrows the failure
    future_->wait();      // set right after finish(): readable once wait() returns
    RetiredWork::instance().release();
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return results_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<at::Tensor> results_;
};

// A collective still running on the host transport. The Work handed back
// completes, and its future is set, once the transport is done and the
// results are written back into the tpu tensors, by the transport's
// completion callback (after `finish`, which may change the host results).
// Until then the tensors hold their old values, as a CUDA tensor does until
// the collective's stream is waited on: DDP's reducer and FSDP wait on the
// Work or chain on its future before they read. Meanwhile the calling
// thread goes on issuing device work (the backward pass), so communication
// overlaps computation; a blocking call (async_op=False) waits at once.
// A failed transfer poisons the group (`failure`) and leaves the tensors
// untouched; a failure writing the results back is this rank's alone.
c10::intrusive_ptr<Work> finish_async(const std::shared_ptr<TransportFailure>& failure, const char* op,
                                      c10d::OpType type, c10::intrusive_ptr<Work> transport,
                                      std::shared_ptr<Staging> staging, std::vector<at::Tensor> results,
                                      std::function<void()> finish = {}) {
  c10::intrusive_ptr<c10::ivalue::Future> done;
  try {
    done = transport->getFuture();
  } catch (const c10::Error&) {  // a transport Work without one: completes here
    await(*failure, op, transport);
    if (finish) finish();
    staging->write_back();
    return finished(std::move(results));
  }
  RetiredWork::instance().release();
  auto work = c10::make_intrusive<TransportWork>(type, std::move(results));
  done->addCallback([transport, staging, work, failure, op, finish](c10::ivalue::Future& f) mutable {
    if (f.hasError()) {
      failure->record(op, f.exception_ptr());  // before anyone waiting on `work` issues the next call
      work->complete(f.exception_ptr());
    } else {
      try {
        if (finish) finish();
        staging->write_back_from_callback();
        work->complete(nullptr);
      } catch (...) {
        work->complete(std::current_exception());
      }
    }
    // This runs on the transport's worker: hand every reference over
    // instead of dropping it here (RetiredWork).
    struct FinishedWith {
      c10::intrusive_ptr<Work> transport;
      std::shared_ptr<Staging> staging;
      c10::intrusive_ptr<TransportWork> work;
      std::function<void()> finish;
    };
    RetiredWork::instance().hold(std::make_shared<FinishedWith>(
        FinishedWith{std::move(transport), std::move(staging), std::move(work), std::move(finish)}));
  });
  return work;
}

// A reduction (allreduce, its coalesced form, reduce) on the host copies:
// PREMUL_SUM's factor applied before and AVG's division after, as the
// transport has neither; `run` issues it with the options rewritten for the
// transport and returns its Work. Only a rank that `receives` the result
// writes it back.
template <typename Options, typename Run>
c10::intrusive_ptr<Work> host_reduction(const std::shared_ptr<TransportFailure>& failure, const char* op_name,
                                        c10d::OpType type, std::vector<at::Tensor>& tensors, const Options& opts,
                                        int size, bool receives, Run run) {
  auto staging = std::make_shared<Staging>(rewrites_inputs(opts.reduceOp));
  auto host = staging->inout(tensors);
  premultiply(host, opts.reduceOp);
  Options host_opts = opts;
  host_opts.reduceOp = transport_op(opts.reduceOp);
  auto work = run(host, host_opts);
  if (!receives) {
    await(*failure, op_name, work);
    return finished(tensors);
  }
  const ReduceOp op = opts.reduceOp;
  return finish_async(failure, op_name, type, std::move(work), staging, tensors,
                      [host, op, size]() mutable { average(host, op, size); });
}

// A gather into lists of outputs (allgather and its coalesced form) on the
// host copies; `run` issues it and returns its Work.
template <typename Run>
c10::intrusive_ptr<Work> host_gather(TransportFailure& failure, std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputs, Run run) {
  Staging staging;
  auto host_in = staging.in(inputs);
  std::vector<std::vector<at::Tensor>> host_out;
  for (auto& list : outputs) host_out.push_back(staging.out(list));
  await(failure, "allgather", run(host_out, host_in));
  staging.write_back();
  std::vector<at::Tensor> results;
  for (auto& list : outputs) results.insert(results.end(), list.begin(), list.end());
  return finished(results);
}

// Point-to-point work stays asynchronous (a batch of isend/irecv must all
// be posted before any completes); its results go back on wait().
class StagedWork : public Work {
 public:
  StagedWork(c10::intrusive_ptr<Work> host, Staging staging, std::shared_ptr<TransportFailure> failure)
      : host_(std::move(host)), staging_(std::move(staging)), failure_(std::move(failure)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    bool done = false;
    try {
      done = host_->wait(timeout);
    } catch (...) {
      failure_->record("send/recv", std::current_exception());
      throw;
    }
    std::call_once(written_, [this] { staging_.write_back(); });
    return done;
  }
  bool isCompleted() override { return host_->isCompleted(); }
  bool isSuccess() const override { return host_->isSuccess(); }
  std::exception_ptr exception() const override { return host_->exception(); }
  int sourceRank() const override { return host_->sourceRank(); }
  void abort() override { host_->abort(); }

 private:
  c10::intrusive_ptr<Work> host_;
  Staging staging_;
  std::shared_ptr<TransportFailure> failure_;
  std::once_flag written_;
};

enum class Op { broadcast, allreduce, reduce, allgather, gather, scatter, reduce_scatter, alltoall };
const char* const kOpNames[] = {"broadcast", "allreduce", "reduce",         "allgather",
                                "gather",    "scatter",   "reduce_scatter", "alltoall"};

constexpr int kMaxDims = 8;
constexpr int kHeader = 4;  // op, dtype, ndim, number of tensors

// The fingerprint's first entry: the op, and whether it runs in-program.
int64_t op_code(int64_t op, bool in_program) { return op * 2 + (in_program ? 1 : 0); }

std::string describe(const at::Tensor& row) {
  auto v = row.accessor<int64_t, 1>();
  std::ostringstream s;
  // A peer's row is read as untrusted: codes out of range are printed as
  // numbers, never used as indices.
  constexpr int64_t op_count = sizeof(kOpNames) / sizeof(kOpNames[0]);
  if (v[0] >= 0 && v[0] / 2 < op_count) {
    s << kOpNames[v[0] / 2] << (v[0] % 2 ? "[in program]" : "") << "(";
  } else {
    s << "collective code " << v[0] << "(";
  }
  if (v[1] < 0) {
    s << "no tensors";
  } else if (v[1] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
    s << "dtype code " << v[1];
  } else {
    s << "dtype=" << c10::toString(static_cast<c10::ScalarType>(v[1]));
    if (v[2] >= 0) {
      s << ", shape=[";
      for (int64_t d = 0; d < std::min<int64_t>(v[2], kMaxDims); ++d) s << (d ? ", " : "") << v[kHeader + d];
      if (v[2] > kMaxDims) s << ", ...";
      s << "]";
    }
    s << ", tensors=" << v[3];
  }
  s << ")";
  return s.str();
}

// The device layer's collective ops (csrc/device/collective_kernels.cpp),
// through the dispatcher: this module links nothing of the device's.
template <typename Signature>
c10::TypedOperatorHandle<Signature> device_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// The reduce op's name and PREMUL_SUM's factor for the in-program
// transport, or false where it has none (the bitwise ops, a tensor factor).
bool program_reduce(const ReduceOp& op, const at::Tensor& t, std::string* name, double* factor) {
  *factor = 1.0;
  switch (op.op_) {
    case ReduceOp::SUM:
      *name = "SUM";
      return true;
    case ReduceOp::AVG:
      *name = "AVG";
      return true;
    case ReduceOp::PRODUCT:
      *name = "PRODUCT";
      return true;
    case ReduceOp::MIN:
      *name = "MIN";
      return true;
    case ReduceOp::MAX:
      *name = "MAX";
      return true;
    case ReduceOp::PREMUL_SUM: {
      auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (supplement == nullptr || supplement->tensor_factor.defined()) return false;
      *name = "PREMUL_SUM";
      *factor = supplement->double_factor;
      return true;
    }
    default:
      return false;
  }
}

using ReduceSignature = at::Tensor&(at::Tensor&, c10::string_view, double, at::IntArrayRef);
using IntoSignature = at::Tensor&(at::Tensor&, const at::Tensor&, at::IntArrayRef);
using ReduceIntoSignature = at::Tensor&(at::Tensor&, const at::Tensor&, c10::string_view, double, at::IntArrayRef);
using BroadcastSignature = at::Tensor&(at::Tensor&, int64_t, at::IntArrayRef);

}  // namespace

ProcessGroupTpu::ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                                 std::vector<int64_t> program_devices)
    : Backend(rank, size),
      host_(std::move(host)),
      failure_(std::make_shared<TransportFailure>()),
      program_devices_(std::move(program_devices)) {
  TORCH_CHECK(host_, "tpu_dist needs a host transport backend");
  TORCH_CHECK(program_devices_.empty() || static_cast<int>(program_devices_.size()) == size,
              "tpu_dist: one device per rank for the in-program transport");
}

// Destroying the host transport joins its worker threads (ProcessGroupGloo's
// run loops). A worker that has just finished a collective may still be
// releasing its completion callback's tensors, and releasing a tensor that
// has a Python object takes the GIL: destroyed by a thread that holds the
// GIL (a Python reference dropped, a DDP Reducer freed, the interpreter
// exiting), the two threads would wait on each other forever. c10d holds its
// own backends' Python references the same way.
ProcessGroupTpu::~ProcessGroupTpu() {
  RetiredWork::instance().release();
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release released;
    host_.reset();
  } else {
    host_.reset();
  }
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupTpu::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                         const std::vector<int>& ranks,
                                                         const c10::intrusive_ptr<Options>& opts) {
  TORCH_CHECK(split_factory_, "tpu_dist: this group cannot be split");
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;  // this rank is in none of the new groups
  return split_factory_(store, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()),
                        opts ? opts->timeout : timeout_);
}

bool ProcessGroupTpu::in_program(const at::Tensor& t) const {
  return !program_devices_.empty() && on_tpu(t) && t.device().index() == program_devices_[rank_];
}

void ProcessGroupTpu::check_same_call(const char* op_name, const std::vector<at::Tensor>& tensors,
                                      bool shapes_must_match, bool in_program) {
  // Always on: without it a size mismatch ends the receiving rank inside
  // gloo's I/O thread (an uncatchable abort) and a dtype mismatch of equal
  // element size returns wrong values on every rank. It costs one small
  // allgather per eager collective (0.25-0.37 ms on the 2-core CI machine).
  if (size_ == 1) return;
  // A collective joining a graph's program (torch.compile) is checked when
  // the program launches: the ranks' replicas meet there, and a rank whose
  // program differs makes all raise. An exchange here would wait for ranks
  // that replay the graph instead of tracing it (one rank recompiling).
  using JoinsSignature = bool(const at::Tensor&);
  static auto joins_program = device_op<JoinsSignature>("torch_tpu::collective_joins_program");
  if (in_program && joins_program.call(tensors.at(0))) return;
  int64_t op = 0;
  while (std::string(kOpNames[op]) != op_name) ++op;
  at::Tensor mine = at::full({kHeader + kMaxDims}, -1, at::kLong);
  auto v = mine.accessor<int64_t, 1>();
  v[0] = op_code(op, in_program);
  v[3] = static_cast<int64_t>(tensors.size());
  if (!tensors.empty() && tensors[0].defined()) {
    const at::Tensor& t = tensors[0];
    v[1] = static_cast<int64_t>(t.scalar_type());
    if (shapes_must_match) {
      v[2] = t.dim();
      for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) v[kHeader + d] = t.size(d);
    }
  }
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < size_; ++r) all[0].push_back(at::empty_like(mine));
  std::vector<at::Tensor> inputs{mine};
  await(*failure_, op_name, host_->allgather(all, inputs));
  for (int r = 1; r < size_; ++r) {
    if (!at::equal(all[0][r], all[0][0])) {
      TORCH_CHECK(false,
                  "Detected mismatch between collectives on ranks. Rank 0 is running collective: ", describe(all[0][0]),
                  ", but Rank ", r, " is running collective: ", describe(all[0][r]),
                  " (tpu_dist compares every collective before any data moves)");
    }
  }
}

c10::intrusive_ptr<Work> ProcessGroupTpu::broadcast(std::vector<at::Tensor>& tensors,
                                                    const c10d::BroadcastOptions& opts) {
  failure_->check();
  if (tensors.size() == 1 && in_program(tensors[0])) {
    check_same_call("broadcast", tensors, true, true);
    static auto broadcast = device_op<BroadcastSignature>("torch_tpu::collective_broadcast_");
    broadcast.call(tensors[0], opts.rootRank, program_devices_);
    return finished(tensors);
  }
  check_same_call("broadcast", tensors, true);
  Staging staging;
  auto host = staging.inout(tensors);
  await(*failure_, "broadcast", host_->broadcast(host, opts));
  staging.write_back();
  return finished(tensors);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::allreduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::AllreduceOptions& opts) {
  failure_->check();
  std::string op;
  double factor = 1;
  if (tensors.size() == 1 && in_program(tensors[0]) && program_reduce(opts.reduceOp, tensors[0], &op, &factor)) {
    check_same_call("allreduce", tensors, true, true);
    static auto all_reduce = device_op<ReduceSignature>("torch_tpu::collective_all_reduce_");
    all_reduce.call(tensors[0], op, factor, program_devices_);
    return finished(tensors);
  }
  check_same_call("allreduce", tensors, true);
  return host_reduction(failure_, "allreduce", c10d::OpType::ALLREDUCE, tensors, opts, size_, true,
                        [&](auto& host, auto& host_opts) { return host_->allreduce(host, host_opts); });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceCoalescedOptions& opts) {
  failure_->check();
  check_same_call("allreduce", tensors, true);
  return host_reduction(failure_, "allreduce", c10d::OpType::ALLREDUCE_COALESCED, tensors, opts, size_, true,
                        [&](auto& host, auto& host_opts) { return host_->allreduce_coalesced(host, host_opts); });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  failure_->check();
  check_same_call("reduce", tensors, true);
  return host_reduction(failure_, "reduce", c10d::OpType::REDUCE, tensors, opts, size_, rank_ == opts.rootRank,
                        [&](auto& host, auto& host_opts) { return host_->reduce(host, host_opts); });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::AllgatherOptions& opts) {
  failure_->check();
  check_same_call("allgather", inputs, true);
  return host_gather(*failure_, outputs, inputs,
                     [&](auto& host_out, auto& host_in) { return host_->allgather(host_out, host_in, opts); });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                          const c10d::AllgatherOptions& opts) {
  failure_->check();
  if (in_program(input) && in_program(output)) {
    check_same_call("allgather", {input}, true, true);
    static auto all_gather = device_op<IntoSignature>("torch_tpu::collective_all_gather_into");
    all_gather.call(output, input, program_devices_);
    return finished({output});
  }
  check_same_call("allgather", {input}, true);
  auto staging = std::make_shared<Staging>();
  at::Tensor host_in = staging->in(input);
  at::Tensor host_out = staging->out(output);
  return finish_async(failure_, "allgather", c10d::OpType::_ALLGATHER_BASE,
                      host_->_allgather_base(host_out, host_in, opts), staging, {output});
}

c10::intrusive_ptr<Work> ProcessGroupTpu::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllgatherOptions& opts) {
  failure_->check();
  check_same_call("allgather", inputs, true);
  return host_gather(*failure_, outputs, inputs, [&](auto& host_out, auto& host_in) {
    return host_->allgather_coalesced(host_out, host_in, opts);
  });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                          std::vector<at::Tensor>& inputs,
                                                                          const c10d::AllgatherOptions& opts) {
  failure_->check();
  // One pair (functional collectives' all_gather_into_tensor) is the base
  // form: in-program where the group is.
  if (outputs.size() == 1 && inputs.size() == 1) return _allgather_base(outputs[0], inputs[0], opts);
  check_same_call("allgather", inputs, true);
  Staging staging;
  auto host_in = staging.in(inputs);
  auto host_out = staging.out(outputs);
  await(*failure_, "allgather", host_->allgather_into_tensor_coalesced(host_out, host_in, opts));
  staging.write_back();
  return finished(outputs);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                 std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  failure_->check();
  check_same_call("gather", inputs, true);
  Staging staging;
  auto host_in = staging.in(inputs);
  std::vector<std::vector<at::Tensor>> host_out;
  for (auto& list : outputs) host_out.push_back(staging.out(list));
  await(*failure_, "gather", host_->gather(host_out, host_in, opts));
  staging.write_back();
  std::vector<at::Tensor> results;
  for (auto& list : outputs) results.insert(results.end(), list.begin(), list.end());
  return finished(results);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ScatterOptions& opts) {
  failure_->check();
  check_same_call("scatter", outputs, true);
  Staging staging;
  std::vector<std::vector<at::Tensor>> host_in;
  for (auto& list : inputs) host_in.push_back(staging.in(list));
  auto host_out = staging.out(outputs);
  await(*failure_, "scatter", host_->scatter(host_out, host_in, opts));
  staging.write_back();
  return finished(outputs);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ReduceScatterOptions& opts) {
  failure_->check();
  check_same_call("reduce_scatter", outputs, true);
  Staging staging(rewrites_inputs(opts.reduceOp));
  std::vector<std::vector<at::Tensor>> host_in;
  for (auto& list : inputs) {
    host_in.push_back(staging.in(list));
    premultiply(host_in.back(), opts.reduceOp);
  }
  auto host_out = staging.out(outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = transport_op(opts.reduceOp);
  await(*failure_, "reduce_scatter", host_->reduce_scatter(host_out, host_in, host_opts));
  average(host_out, opts.reduceOp, size_);
  staging.write_back();
  return finished(outputs);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                               const c10d::ReduceScatterOptions& opts) {
  failure_->check();
  std::string op;
  double factor = 1;
  if (in_program(input) && in_program(output) && program_reduce(opts.reduceOp, input, &op, &factor)) {
    check_same_call("reduce_scatter", {input}, true, true);
    static auto reduce_scatter = device_op<ReduceIntoSignature>("torch_tpu::collective_reduce_scatter_into");
    reduce_scatter.call(output, input, op, factor, program_devices_);
    return finished({output});
  }
  check_same_call("reduce_scatter", {input}, true);
  auto staging = std::make_shared<Staging>(rewrites_inputs(opts.reduceOp));
  std::vector<at::Tensor> host_in{staging->in(input)};
  premultiply(host_in, opts.reduceOp);
  std::vector<at::Tensor> host_out{staging->out(output)};
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = transport_op(opts.reduceOp);
  auto work = host_->_reduce_scatter_base(host_out[0], host_in[0], host_opts);
  const ReduceOp reduce_op = opts.reduceOp;
  const int size = size_;
  return finish_async(failure_, "reduce_scatter", c10d::OpType::_REDUCE_SCATTER_BASE, std::move(work), staging,
                      {output}, [host_out, reduce_op, size]() mutable { average(host_out, reduce_op, size); });
}

c10::intrusive_ptr<Work> ProcessGroupTpu::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                          std::vector<at::Tensor>& inputs,
                                                                          const c10d::ReduceScatterOptions& opts) {
  failure_->check();
  // One pair (functional collectives' reduce_scatter_tensor): the base form.
  if (outputs.size() == 1 && inputs.size() == 1) return _reduce_scatter_base(outputs[0], inputs[0], opts);
  check_same_call("reduce_scatter", inputs, true);
  Staging staging(rewrites_inputs(opts.reduceOp));
  auto host_in = staging.in(inputs);
  premultiply(host_in, opts.reduceOp);
  auto host_out = staging.out(outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = transport_op(opts.reduceOp);
  await(*failure_, "reduce_scatter", host_->reduce_scatter_tensor_coalesced(host_out, host_in, host_opts));
  average(host_out, opts.reduceOp, size_);
  staging.write_back();
  return finished(outputs);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                        std::vector<int64_t>& output_splits,
                                                        std::vector<int64_t>& input_splits,
                                                        const c10d::AllToAllOptions& opts) {
  failure_->check();
  // In-program: equal splits (none given, or each dim 0 / size, as
  // functional collectives spell them), so every rank's call has one shape.
  auto equal = [&](const std::vector<int64_t>& splits, const at::Tensor& t) {
    if (splits.empty()) return true;
    if (t.dim() == 0 || static_cast<int>(splits.size()) != size_ || t.size(0) % size_ != 0) return false;
    return std::all_of(splits.begin(), splits.end(), [&](int64_t n) { return n == t.size(0) / size_; });
  };
  if (equal(output_splits, output) && equal(input_splits, input) && in_program(input) && in_program(output)) {
    check_same_call("alltoall", {input}, true, true);
    static auto all_to_all = device_op<IntoSignature>("torch_tpu::collective_all_to_all_into");
    all_to_all.call(output, input, program_devices_);
    return finished({output});
  }
  // Splits may differ by rank (uneven all_to_all); dtypes may not.
  check_same_call("alltoall", {input}, false);
  Staging staging;
  at::Tensor host_in = staging.in(input);
  at::Tensor host_out = staging.out(output);
  await(*failure_, "alltoall", host_->alltoall_base(host_out, host_in, output_splits, input_splits, opts));
  staging.write_back();
  return finished({output});
}

c10::intrusive_ptr<Work> ProcessGroupTpu::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::AllToAllOptions& opts) {
  failure_->check();
  check_same_call("alltoall", inputs, false);
  // gloo's list alltoall needs tensors of one size; NCCL's (and so
  // dist.all_to_all on CUDA) does not: run it as one alltoall_base over
  // the flattened tensors, with their element counts as splits.
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size() && inputs.size() == static_cast<size_t>(size_),
              "all_to_all needs one input and one output tensor per rank");
  std::vector<at::Tensor> flat;
  std::vector<int64_t> in_splits, out_splits;
  for (const auto& t : inputs) {
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "all_to_all: tensors must all have the same dtype");
    flat.push_back(t.reshape(-1));
    in_splits.push_back(t.numel());
  }
  int64_t total = 0;
  for (const auto& t : outputs) {
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "all_to_all: tensors must all have the same dtype");
    out_splits.push_back(t.numel());
    total += t.numel();
  }
  at::Tensor host_in = at::cat(flat).to(at::kCPU);
  at::Tensor host_out = at::empty({total}, host_in.options());
  await(*failure_, "alltoall", host_->alltoall_base(host_out, host_in, out_splits, in_splits, opts));
  int64_t offset = 0;
  for (auto& t : outputs) {
    t.copy_(host_out.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
  return finished(outputs);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  failure_->check();
  Staging staging;
  auto host = staging.in(tensors);
  return c10::make_intrusive<StagedWork>(host_->send(host, dst, tag), std::move(staging), failure_);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  failure_->check();
  Staging staging;
  auto host = staging.out(tensors);
  auto work = host_->recv(host, src, tag);
  return c10::make_intrusive<StagedWork>(std::move(work), std::move(staging), failure_);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  failure_->check();
  Staging staging;
  auto host = staging.out(tensors);
  auto work = host_->recvAnysource(host, tag);
  return c10::make_intrusive<StagedWork>(std::move(work), std::move(staging), failure_);
}

c10::intrusive_ptr<Work> ProcessGroupTpu::barrier(const c10d::BarrierOptions& opts) {
  failure_->check();
  return finish_async(failure_, "barrier", c10d::OpType::BARRIER, host_->barrier(opts), std::make_shared<Staging>(),
                      {});
}

void ProcessGroupTpu::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  failure_->check();
  try {
    host_->monitoredBarrier(opts, wait_all_ranks);
  } catch (...) {
    failure_->record("monitored_barrier", std::current_exception());
    throw;
  }
}

// Collectives run to completion as they are issued, so a coalesced block is
// already complete at its end; every rank still issues the same sequence.
void ProcessGroupTpu::startCoalescing() {}
c10::intrusive_ptr<Work> ProcessGroupTpu::endCoalescing() { return finished({}); }

void ProcessGroupTpu::setSequenceNumberForGroup() { host_->setSequenceNumberForGroup(); }
uint64_t ProcessGroupTpu::getSequenceNumberForGroup() { return host_->getSequenceNumberForGroup(); }
void ProcessGroupTpu::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  host_->setTimeout(timeout);
}
void ProcessGroupTpu::abort() { host_->abort(); }
void ProcessGroupTpu::shutdown() { host_->shutdown(); }

}  // namespace torch_tpu::distributed
