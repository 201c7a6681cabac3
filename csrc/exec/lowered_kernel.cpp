#include "exec/lowered_kernel.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <set>

#include "device/argument_checks.h"
#include "device/generator.h"
#include "device/meta_inference.h"
#include "device/missing_meta_kernels.h"
#include "exec/mode_executor.h"
#include "exec/op_cache.h"
#include "exec/step_replay.h"
#include "exec/tensor_program.h"
#include "lower/common/reduction.h"
#include "runtime/device_runtime.h"
#include "runtime/eager_mode.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

using lower::Arg;

// The loaded plugin's kind of device, for the few lowerings that differ by
// it (lower::Platform); TORCH_TPU_LOWERING_PLATFORM=tpu|gpu|cpu lowers as for
// another (the tests run a TPU's programs on the CPU plugin that way). One
// plugin serves the process.
lower::Platform lowering_platform() {
  static const lower::Platform platform = [] {
    const char* forced = std::getenv("TORCH_TPU_LOWERING_PLATFORM");
    const std::string name =
        forced && *forced ? std::string(forced) : runtime::DeviceRuntime::get().client().platform_name();
    if (name == "cpu") return lower::Platform::Cpu;
    if (name == "cuda" || name == "rocm" || name == "gpu") return lower::Platform::Gpu;
    TORCH_CHECK(!forced || !*forced || name == "tpu", "TORCH_TPU_LOWERING_PLATFORM must be tpu, gpu or cpu, not ",
                name);
    return lower::Platform::Tpu;
  }();
  // Shared reduction helpers lower without a LowerContext; every lowering
  // comes here first, so they learn the platform before any reduce.
  static const bool reductions_told = (lower::set_reduction_platform(platform), true);
  (void)reductions_told;
  return platform;
}

// Device of the op: the first tpu tensor's. Mixing devices raises as CUDA does.
int op_device(const std::vector<at::Tensor>& tensors) {
  int device = -1;
  c10::Device first = c10::Device(c10::DeviceType::CPU);
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (is_tpu(t)) {
      if (device < 0) {
        device = t.device().index();
        first = t.device();
      } else {
        TORCH_CHECK(t.device().index() == device,
                    "Expected all tensors to be on the same device, but found at least two devices, ", first, " and ",
                    t.device(), "!");
      }
    }
  }
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || is_tpu(t)) continue;
    // CPU 0-dim tensors act as scalars, as with CUDA.
    TORCH_CHECK(t.device().is_cpu() && t.dim() == 0,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                device >= 0 ? first : t.device(), " and ", t.device(), "!");
  }
  return device < 0 ? current_device() : device;
}

// Argument index a return aliases (in-place and out= ops), or -1.
int aliased_argument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  if (!info || !info->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* a = schema.arguments()[i].alias_info();
    if (a && a->isWrite() && a->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

// The values a tensor with the conjugate bit stands for. PyTorch's Conjugate
// fallback lets mm, addmm, bmm, baddbmm, dot, vdot, linalg_vector_norm,
// linalg_solve_triangular and clone through with the bit set (the CPU and
// CUDA kernels fold it into their BLAS calls), so a lowering that reads such
// an input must see the conjugated values.
hlo::Value read_resolving_conjugate(TensorProgram& prog, const at::Tensor& t) {
  hlo::Value v = prog.read(t);
  if (!t.is_conj() || !hlo::is_complex(v.dtype())) return v;
  return prog.builder().conjugate(v);
}

// `flat_start`: where the argument begins in the call's flat signature
// (csrc/exec/call_signature.h), or -1; Python floats keep it as their origin.
Arg to_arg(TensorProgram& prog, const c10::Argument& schema_arg, const c10::IValue& v, bool read_tensors,
           int flat_start) {
  Arg a;
  auto tensor_value = [&](const at::Tensor& t, int origin = -1) -> std::optional<hlo::Value> {
    if (!t.defined() || !read_tensors) return std::nullopt;
    return is_tpu(t) ? read_resolving_conjugate(prog, t) : prog.host_input(t, origin);
  };
  if (v.isNone()) return a;
  if (v.isTensor()) {
    a.kind = Arg::Kind::Tensor;
    // A wrapped number's value follows the tensor in the flat signature.
    const bool wrapped = v.toTensor().defined() && v.toTensor().unsafeGetTensorImpl()->is_wrapped_number();
    a.tensor = tensor_value(v.toTensor(), wrapped && flat_start >= 0 ? flat_start + 1 : -1);
    a.contiguous = v.toTensor().defined() && v.toTensor().is_contiguous();
    if (!v.toTensor().defined()) a.kind = Arg::Kind::None;
  } else if (v.isTensorList()) {
    a.kind = Arg::Kind::TensorList;
    for (const at::Tensor& t : v.toTensorVector()) a.tensors.push_back(tensor_value(t));
  } else if (v.isList() && schema_arg.type()->containedTypes().size() == 1 &&
             schema_arg.type()->containedType(0)->kind() == c10::TypeKind::OptionalType) {
    a.kind = Arg::Kind::TensorList;
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue e = list.get(i);
      a.tensors.push_back(e.isNone() ? std::nullopt : tensor_value(e.toTensor()));
    }
  } else if (v.isList() && schema_arg.type()->kind() == c10::TypeKind::ListType &&
             schema_arg.type()->containedType(0)->kind() == c10::TypeKind::NumberType) {
    // Scalar[] (_foreach_* ScalarList overloads): an all-integer list as ints,
    // any other as doubles.
    auto list = v.toList();
    bool all_int = true;
    for (size_t i = 0; i < list.size(); ++i) all_int = all_int && (list.get(i).isInt() || list.get(i).isBool());
    a.kind = all_int ? Arg::Kind::IntList : Arg::Kind::DoubleList;
    for (size_t i = 0; i < list.size(); ++i) {
      const c10::Scalar s = list.get(i).toScalar();
      if (all_int) {
        a.ints.push_back(s.toLong());
      } else {
        a.doubles.push_back(s.toDouble());
        // A list's elements follow its length in the flat signature.
        const int origin = flat_start + 1 + static_cast<int>(i);
        if (flat_start >= 0) a.double_origins.push_back(list.get(i).isDouble() ? origin : -1);
      }
    }
  } else if (schema_arg.type()->kind() == c10::TypeKind::NumberType ||
             (schema_arg.real_type()->kind() == c10::TypeKind::OptionalType &&
              schema_arg.real_type()->containedType(0)->kind() == c10::TypeKind::NumberType)) {
    a.kind = Arg::Kind::Scalar;
    if (v.isDouble()) {
      a.scalar.kind = lower::ScalarArg::Kind::Float;
      a.scalar.f = v.toDouble();
      a.scalar.origin = flat_start;
    } else if (v.isBool()) {
      a.scalar.kind = lower::ScalarArg::Kind::Bool;
      a.scalar.i = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.scalar.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
    } else if (v.isUnsigned()) {  // past int64's range
      a.scalar.kind = lower::ScalarArg::Kind::UInt;
      a.scalar.i = static_cast<int64_t>(v.toUInt());
    } else {
      const c10::complex<double> z = v.toComplexDouble();
      a.scalar.kind = lower::ScalarArg::Kind::Complex;
      a.scalar.f = z.real();
      a.scalar.imag = z.imag();
    }
  } else if (v.isInt() || v.isSymInt()) {
    a.kind = Arg::Kind::Int;
    a.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
  } else if (v.isDouble()) {
    a.kind = Arg::Kind::Double;
    a.d = v.toDouble();
  } else if (v.isBool()) {
    a.kind = Arg::Kind::Bool;
    a.b = v.toBool();
  } else if (v.isIntList() || v.isSymIntList()) {
    a.kind = Arg::Kind::IntList;
    if (v.isIntList()) {
      a.ints = v.toIntVector();
    } else {
      for (const auto& s : v.toSymIntVector()) a.ints.push_back(s.guard_int(__FILE__, __LINE__));
    }
  } else if (v.isBoolList()) {
    // bool[N] (output_mask): read as 0/1 ints.
    a.kind = Arg::Kind::IntList;
    for (bool x : v.toBoolList()) a.ints.push_back(x);
  } else if (v.isDoubleList()) {
    a.kind = Arg::Kind::DoubleList;
    a.doubles = v.toDoubleVector();
  } else if (v.isString()) {
    a.kind = Arg::Kind::String;
    a.s = v.toStringRef();
  } else {
    a.kind = Arg::Kind::Other;
  }
  return a;
}

// Whether the op makes or writes tensors and every one has no elements:
// then there is nothing to compute, and no program with a zero-size result
// reaches XLA (a gather over an empty dim, whose slice XLA refuses). The
// checks and the meta kernel have already raised what CPU raises for such a
// call. An op that makes nothing (_assert_async) runs for its check.
bool makes_only_empty_tensors(const OpSpec& spec, const c10::FunctionSchema& schema,
                              const std::vector<c10::IValue>& args, const MetaResult& meta) {
  bool makes_any = false;
  for (const auto& ret : meta.returns) {
    for (const TensorMeta& m : ret) {
      if (!m.defined) continue;
      makes_any = true;
      if (c10::multiply_integers(m.sizes) != 0) return false;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!writes_argument(schema.arguments()[i]) && !spec.writes_unmarked(i)) continue;
    std::vector<at::Tensor> written;
    collect_tensors(args[i], written);
    for (const at::Tensor& t : written) {
      if (!t.defined()) continue;
      makes_any = true;
      if (t.numel() != 0) return false;
    }
  }
  return makes_any;
}

// The op's returns when it makes only empty tensors: fresh empty tensors,
// the written arguments, the meta kernel's numbers.
std::vector<c10::IValue> empty_returns(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                       const MetaResult& meta, int device) {
  std::vector<c10::IValue> returns;
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    const int alias = aliased_argument(schema, r);
    if (!meta.values[r].isNone()) {
      returns.push_back(meta.values[r]);
    } else if (alias >= 0) {
      returns.push_back(args[alias]);
    } else if (meta.return_is_list[r]) {
      std::vector<at::Tensor> outs;
      for (const TensorMeta& m : meta.returns[r]) outs.push_back(empty_tpu(m.sizes, m.strides, m.dtype, device));
      returns.push_back(outs);
    } else if (!meta.returns[r][0].defined) {
      returns.push_back(at::Tensor());
    } else {
      const TensorMeta& m = meta.returns[r][0];
      returns.push_back(empty_tpu(m.sizes, m.strides, m.dtype, device));
    }
  }
  return returns;
}

}  // namespace

void LoweredKernel::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  const ModeExecutor& mode = current_mode_executor();
  runtime::metrics().ops_dispatched++;
  runtime::metrics().count_op_in_mode(runtime::eager_mode_name(mode.mode()));
  const c10::FunctionSchema& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - num_args, stack->end());
  stack->erase(stack->end() - num_args, stack->end());

  if (spec_->normalize_arguments) spec_->normalize_arguments(args);

  // A signature seen before replays its captured program (Strict).
  const std::optional<OpCall> cached_call = mode.cache_record(op, *spec_, args);
  if (cached_call) {
    if (auto replayed = op_cache_replay(op, *cached_call)) {
      for (auto& r : *replayed) stack->push_back(std::move(r));
      return;
    }
  }

  // DeferAndFuse: the next op of a remembered step replays without recording.
  std::optional<OpCall> step_call;
  if (mode.defers_programs()) {
    step_call = step_op_call(op, *spec_, args);
    if (step_call) {
      if (auto replayed = step_replay_op(op, *step_call, args)) {
        for (auto& r : *replayed) stack->push_back(std::move(r));
        return;
      }
    }
  }

  std::vector<at::Tensor> tensors;
  at::Generator generator;
  for (const auto& v : args) {
    collect_tensors(v, tensors);
    if (v.isGenerator()) generator = v.toGenerator();
  }
  const int device = op_device(tensors);

  check_arguments(*spec_, schema, args);
  mode.check_arguments(*spec_, schema, args);

  // 1. PyTorch's meta kernel: argument checks, result shapes and dtypes.
  MetaResult meta;
  try {
    meta = infer_meta(op, args, spec_->meta_reads_numbers, replacement_meta_kernel(spec_->meta));
  } catch (const std::exception& e) {  // c10::Error, or a Python meta kernel's error
    check_arguments_after_meta_refusal(*spec_, schema, args, e.what());
    throw;
  }
  if (spec_->correct_meta) spec_->correct_meta(args, meta);
  check_arguments_after_meta(*spec_, schema, args);

  // 2. out= arguments take the meta kernel's resize (a step replay does it
  // again: its key keeps the call as it was before).
  std::optional<SignatureRecord> step_record_before;
  std::vector<StepOpKey::Resize> step_resizes;
  if (step_call && !meta.written_args.empty()) {
    step_record_before = step_record(*step_call);
    for (const auto& [i, m] : meta.written_args) step_resizes.push_back({static_cast<int>(i), m.sizes, m.strides});
  }
  for (const auto& [i, m] : meta.written_args) {
    at::Tensor real = args[i].toTensor();
    if (real.sizes() != m.sizes || real.strides() != m.strides) {
      real.resize_(m.sizes);
      if (real.strides() != m.strides) real.as_strided_(m.sizes, m.strides, real.storage_offset());
    }
  }

  // 3. Lower.
  TensorProgram prog(device);
  std::vector<lower::TensorType> out_types;
  for (const auto& ret : meta.returns) {
    for (const TensorMeta& m : ret) {
      if (m.defined) out_types.push_back({element_type(m.dtype), m.sizes});  // undefined: no lowering result
    }
  }
  std::vector<Arg> largs;
  largs.reserve(num_args);
  const OpCall* signed_call = cached_call ? &*cached_call : step_call ? &*step_call : nullptr;
  const bool origins = signed_call && signed_call->floats_are_inputs;  // floats may feed replays
  for (size_t i = 0; i < num_args; ++i) {
    const c10::Argument& sa = schema.arguments()[i];
    // A pure out= argument (written, listed after `*` as `out`) is not read.
    bool pure_out = writes_argument(sa) && sa.is_out();
    largs.push_back(to_arg(prog, sa, args[i], !pure_out, origins ? signed_call->arg_start[i] : -1));
  }
  lower::LowerContext ctx(prog.builder(), std::move(largs), std::move(out_types));
  ctx.matmul_precision = runtime::matmul_precision();
  ctx.platform = lowering_platform();
  std::vector<hlo::Value> results;
  try {
    results = spec_->lowering(ctx);
  } catch (const std::out_of_range& e) {
    // Lowerings know no torch: std::out_of_range is their IndexError.
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const lower::NotImplementedForDtype& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  } catch (const lower::ScalarOverflow& e) {
    TORCH_CHECK(false, e.what());
  }
  // The lowering ran for what it checks (a dtype without a kernel raises for
  // empty tensors too, as CPU's dispatch does); the program it built is
  // dropped unlaunched (TensorProgram's destructor rewinds a pending one).
  if (makes_only_empty_tensors(*spec_, schema, args, meta)) {
    for (auto& r : empty_returns(schema, args, meta, device)) stack->push_back(std::move(r));
    return;
  }
  prog.bind_lowering_inputs(ctx, generator);

  // 4. Results: into aliased arguments, or into fresh tensors (and, for a
  // step replay, what each return is).
  std::vector<c10::IValue> returns;
  std::vector<StepOpKey::Result> step_results;
  auto step_result = [&](StepOpKey::Result::Kind kind) -> StepOpKey::Result& {
    step_results.emplace_back();
    step_results.back().kind = kind;
    return step_results.back();
  };
  auto fresh_of = [](const TensorMeta& m) { return StepOpKey::Result::Fresh{m.sizes, m.strides, m.dtype, 0}; };
  size_t k = 0;  // results consumed; results are flat: a Tensor[] return takes one per element
  if (schema.returns().empty()) {
    // In-place ops returning nothing (_foreach_*_): one result per written tensor.
    for (size_t i = 0; i < num_args; ++i) {
      if (!writes_argument(schema.arguments()[i])) continue;
      std::vector<at::Tensor> written;
      collect_tensors(args[i], written);
      for (const at::Tensor& t : written) {
        TORCH_CHECK(k < results.size(), "internal: lowering of ", schema.name(), " returned too few results");
        prog.write(t, results[k++]);
      }
    }
  } else {
    auto next_result = [&]() -> const hlo::Value& {
      TORCH_CHECK(k < results.size(), "internal: lowering of ", schema.name(), " returned too few results");
      return results[k++];
    };
    for (size_t r = 0; r < schema.returns().size(); ++r) {
      int alias = aliased_argument(schema, r);
      if (!meta.values[r].isNone()) {
        returns.push_back(meta.values[r]);  // an int return (SDPA's max_q): the meta kernel's value
        step_result(StepOpKey::Result::Kind::Value).value = meta.values[r];
      } else if (alias >= 0) {
        step_result(StepOpKey::Result::Kind::Argument).argument = alias;
        const at::Tensor& target = args[alias].toTensor();
        const hlo::Value& result = next_result();
        // The first result of an in-place scatter updates self's storage
        // point by point (a functional or out= call writes it whole).
        if (alias == 0 && r == 0 && ctx.point_update()) {
          prog.write_points(target, result, *ctx.point_update());
        } else {
          prog.write(target, result);
        }
        returns.push_back(target);
      } else if (!meta.return_is_list[r] && !meta.returns[r][0].defined) {
        returns.push_back(at::Tensor());  // e.g. a backward's output_mask entry false
        step_result(StepOpKey::Result::Kind::Undefined);
      } else if (meta.return_is_list[r]) {
        std::vector<at::Tensor> outs;
        StepOpKey::Result& described = step_result(StepOpKey::Result::Kind::FreshList);
        for (const TensorMeta& m : meta.returns[r]) {
          outs.push_back(prog.produce(next_result(), m.sizes, m.strides, m.dtype));
          described.fresh.push_back(fresh_of(m));
        }
        returns.push_back(outs);
      } else {
        const TensorMeta& m = meta.returns[r][0];
        returns.push_back(prog.produce(next_result(), m.sizes, m.strides, m.dtype));
        step_result(StepOpKey::Result::Kind::Fresh).fresh.push_back(fresh_of(m));
      }
    }
  }
  // Results past the returns are the new values of arguments written but not
  // returned (_native_batch_norm_legit's running stats; native_batch_norm's,
  // unmarked in its schema), in argument order, for defined tensors only.
  std::set<int> returned;
  for (size_t r = 0; r < schema.returns().size(); ++r) returned.insert(aliased_argument(schema, r));
  for (size_t i = 0; i < num_args && k < results.size() && !schema.returns().empty(); ++i) {
    const bool written = writes_argument(schema.arguments()[i]) || spec_->writes_unmarked(i);
    if (!written || returned.count(static_cast<int>(i)) || !args[i].isTensor() || !args[i].toTensor().defined())
      continue;
    prog.write(args[i].toTensor(), results[k++]);
  }
  if (step_call) {
    prog.set_step_key(make_step_key(op, *step_call, prog, std::move(step_results), returns,
                                    std::move(step_record_before), std::move(step_resizes)));
  }
  mode.launch(op, cached_call, prog, device, returns);
  mode.after_launch(schema.operator_name(), device, returns);
  for (auto& r : returns) stack->push_back(std::move(r));
}

}  // namespace torch_tpu::device
