// Captured graph programs: how torch.compile runs a graph as ONE program
// without lowering it again on every call.
//
// The first call of a graph records its ops (through the same kernels and
// lowerings as eager) into one pending program, then captures it: which
// program parameter is which graph input's storage, which output storage
// becomes which graph output, which inputs the graph wrote. Later calls whose
// inputs have the same signature (dtypes, sizes, strides, offsets (inputs'
// offsets are program inputs: only whether each is 0), storage
// sizes, aliasing, CPU scalars' shapes, non-tensor values) bind the new
// buffers to the compiled executable and run it; nothing is lowered, no
// program text is built or hashed.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/call_signature.h"
#include "exec/tensor_program.h"

namespace torch_tpu::device {

// One captured program: a torch.compile graph's, or (op_cache.h) a Strict
// op's one-op program, replayed the same way.
class CapturedProgram {
 public:
  // Runs the captured program on `inputs`; nullopt when they do not match
  // the captured signature (the caller traces the graph again).
  std::optional<std::vector<c10::IValue>> replay(const std::vector<c10::IValue>& inputs);
  // Why the last replay did not match (for recompile diagnostics).
  const std::string& mismatch() const { return mismatch_; }

  using Input = SignatureEntry;
  struct Param {
    // HostFloat: the number at `origins` (all equal), uploaded as `dtype`;
    // `range_checked`: only a number that fits `dtype` (ParamSource).
    // ViewOffset: the storage offset of the tensor at `input`.
    enum class Kind { Input, Constant, Rng, HostFloat, ViewOffset } kind = Kind::Constant;
    int input = -1;
    std::vector<int> origins;
    hlo::ElementType dtype = hlo::ElementType::F32;
    bool range_checked = false;
    bool donor = false;  // an input the graph overwrites: its old buffer is donated when nothing else holds it
    runtime::BufferPtr constant;
    at::Generator generator;
  };
  struct Sink {  // one data output of the program
    enum class Kind { Fresh, InputWrite } kind = Kind::Fresh;
    int input = -1;  // InputWrite
    hlo::ElementType dtype = hlo::ElementType::F32;
    size_t nbytes = 0;  // Fresh: the new storage's size
    // Fresh: the one output over it when that output covers the storage
    // from offset 0 in its own dtype (a replay allocates it in that shape), or -1.
    int only_output = -1;
  };
  struct Output {  // one graph output
    // Empty: a tensor with no elements that no op wrote (a copy of an empty
    // constant, Reformer's): a replay returns a new one of its shape.
    enum class Kind { None, FromSink, Input, Empty } kind = Kind::None;
    int index = -1;  // sink or input
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;  // Input: where the input's own offset was when captured, it follows it
  };

  int device = 0;
  // A graph holding collectives (ProgramState::Replication): its group's
  // devices, each replay being this rank's replica. Empty otherwise.
  std::vector<int64_t> replica_devices;
  // Null for a graph that runs no device op (views, reshapes and metadata of
  // its inputs): its replays launch nothing and return the views again.
  std::shared_ptr<pjrt::LoadedExecutable> executable;
  SignatureRecord signature;  // of the inputs (csrc/exec/call_signature.h)
  std::vector<Param> params;
  std::vector<Sink> sinks;
  std::vector<Output> outputs;
  std::vector<RangeCheckInfo> checks;  // the program's range checks, outputs after the sinks
  // What torch.profiler shows for its launches (device/program_profiler.h);
  // its ops are also what an injected fault matches (ProgramLaunch::op_names).
  std::string trace_name;
  std::vector<std::string> op_names;

 private:
  bool matches(const std::vector<c10::IValue>& inputs);
  std::string mismatch_;
};

// A replay's inputs, made as recording made them: a CPU tensor's values,
// a Python float as a 0-d buffer of `dtype` (converted as CPU converts it,
// without making CPU tensors), a fresh random state drawn from `generator`.
runtime::BufferPtr upload_host(const at::Tensor& cpu, int device);
runtime::BufferPtr upload_number(double value, hlo::ElementType dtype, int device);
runtime::BufferPtr draw_rng_state(const at::Generator& generator, int device);

// Starts recording a graph's ops on `device` (flushing earlier eager work).
void begin_capture(int device);
// Ends the recording: runs the program once with `inputs`' buffers and
// writes the graph's `outputs` (tensors the graph returned, created while
// recording). Returns the capture, or null (with `why`) when the graph
// cannot be replayed (it was split by a flush, kept intermediates alive,
// returned views across dtypes...); its results are correct either way.
std::shared_ptr<CapturedProgram> end_capture(int device, const std::vector<c10::IValue>& inputs,
                                             const std::vector<c10::IValue>& outputs, std::string* why);
void abort_capture();

// The capture of a recorded program `state` (a graph's, or one Strict op's:
// csrc/exec/op_cache.h): runs it once with the recorded buffers, writes
// its results, and returns the capture, or null (with `why`) when it cannot
// be replayed. `broken`: a flush split the recording. `name`: the
// program's name in torch.profiler (its op, or the graph's).
std::shared_ptr<CapturedProgram> capture_program(std::unique_ptr<ProgramState> state, bool broken, int device,
                                                 const std::vector<c10::IValue>& inputs,
                                                 const std::vector<c10::IValue>& outputs, std::string* why,
                                                 const std::string& name);

}  // namespace torch_tpu::device
