#include "device/lowered_kernel.h"

#include <ATen/ATen.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/native/TypeProperties.h>

#include <map>
#include <set>

#include "device/debug_checks.h"
#include "device/generator.h"
#include "device/meta_inference.h"
#include "device/tensor_program.h"
#include "runtime/eager_mode.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

using lower::Arg;

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

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

void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  } else if (v.isList()) {
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      if (list.get(i).isTensor()) out.push_back(list.get(i).toTensor());
    }
  }
}

bool writes_argument(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

// Arguments an op writes in place although its schema does not say so:
// native_batch_norm updates running_mean/running_var in training.
bool writes_unmarked(const c10::FunctionSchema& schema, size_t i) {
  return schema.name() == "aten::native_batch_norm" && (i == 3 || i == 4);
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

// Advanced indexing as CUDA accepts it: index tensors may live on the CPU,
// and a boolean mask in `index` becomes the coordinates of its true elements
// (a data-dependent size: the host waits for the mask, as CUDA does).
void normalize_index_arguments(const c10::FunctionSchema& schema, std::vector<c10::IValue>& args) {
  const bool is_index = schema.name() == "aten::index";
  if (!is_index && schema.name() != "aten::_index_put_impl_") return;
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isList()) return;
  const at::Tensor& self = args[0].toTensor();
  if (!is_tpu(self)) return;
  auto list = args[1].toList();
  c10::List<std::optional<at::Tensor>> normalized;
  bool changed = false;
  for (size_t i = 0; i < list.size(); ++i) {
    c10::IValue e = list.get(i);
    if (e.isNone() || !e.toTensor().defined()) {
      normalized.push_back(std::nullopt);
      continue;
    }
    at::Tensor idx = e.toTensor();
    const bool is_mask = idx.scalar_type() == at::kBool || idx.scalar_type() == at::kByte;
    if (is_index && is_mask) {
      at::Tensor coords = idx.cpu().nonzero();  // [n, mask.dim()]
      for (int64_t d = 0; d < idx.dim(); ++d) normalized.push_back(coords.select(1, d).to(self.device()));
      changed = true;
      continue;
    }
    if (!is_tpu(idx) && idx.dim() > 0) {
      idx = idx.to(self.device());
      changed = true;
    }
    normalized.push_back(idx);
  }
  if (changed) args[1] = normalized;
}

// In-place elementwise ops whose result must be castable to self's dtype
// (TensorIterator's rule on CPU and CUDA; PyTorch's Python meta kernels do
// not check it when the other operand is a wrapped number).
bool is_promoting_inplace(const std::string& name) {
  static const std::set<std::string> kOps = {
      "aten::add_", "aten::sub_", "aten::mul_", "aten::div_", "aten::pow_", "aten::remainder_", "aten::fmod_",
      "aten::atan2_", "aten::clamp_", "aten::clamp_min_", "aten::clamp_max_", "aten::lerp_", "aten::addcmul_",
      "aten::addcdiv_", "aten::bitwise_and_", "aten::bitwise_or_", "aten::bitwise_xor_"};
  return kOps.count(name) > 0;
}

at::ScalarType promoted_type(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  at::native::ResultTypeState state{};
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (schema.arguments()[i].name() == "alpha") continue;  // a multiplier, not an operand
    if (v.isTensor() && v.toTensor().defined()) {
      state = at::native::update_result_type_state(v.toTensor(), state);
    } else if (v.isScalar()) {
      state = at::native::update_result_type_state(v.toScalar(), state);
    }
  }
  at::ScalarType t = at::native::result_type(state);
  // True division of integers gives the default float type.
  bool true_div = schema.name() == "aten::div_" && schema.overload_name() == "Tensor";
  if (true_div && at::isIntegralType(t, /*includeBool=*/true)) t = at::typeMetaToScalarType(at::get_default_dtype());
  return t;
}

// multinomial's distribution checks, as PyTorch makes them on every device
// (native/Distributions.cpp): they read reductions of the probabilities back
// to the host, so a call waits for its input like CUDA's does. CUDA checks
// only the no-replacement / single-sample path on the host (the other path
// asserts inside its kernel, which would abort); we check every path and
// raise CPU's RuntimeError.
void check_multinomial_distribution(const at::Tensor& probs) {
  if (probs.numel() == 0 || !at::isFloatingType(probs.scalar_type())) return;
  const at::Tensor valid = (probs.max() < INFINITY).logical_and(probs.min() >= 0);
  TORCH_CHECK(valid.item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  const at::Tensor row_sums = probs.dim() == 1 ? probs.sum() : probs.sum(1);
  TORCH_CHECK(!(row_sums == 0).any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
}

// Checks CUDA makes before any kernel runs that the meta kernels skip.
void check_arguments(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  std::vector<at::Tensor> inputs;  // tensors the op reads
  for (size_t i = 0; i < args.size(); ++i) {
    if (!(writes_argument(schema.arguments()[i]) && schema.arguments()[i].is_out())) collect_tensors(args[i], inputs);
  }
  // Ops whose CPU kernels refuse an out= that aliases an input even exactly.
  const bool no_alias_at_all = schema.name() == "aten::take" || schema.name() == "aten::cat";
  // fill_ with a number, zero_ and masked_fill_ write one value wherever they
  // write, so CPU and CUDA let them write an expanded tensor (masked_fill_
  // with a deprecation warning).
  const bool writes_one_value = (schema.name() == "aten::fill_" && schema.overload_name() == "Scalar") ||
                                schema.name() == "aten::zero_" || schema.name() == "aten::masked_fill_";
  for (size_t i = 0; i < args.size(); ++i) {
    if (!writes_argument(schema.arguments()[i]) || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    TORCH_CHECK(writes_one_value || at::has_internal_overlap(t) != at::MemOverlap::Yes,
                "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location. Please clone() the tensor before performing the operation.");
    // TensorIterator's rule: a written tensor may be an input exactly
    // (x.add_(y), add(x, y, out=x)) but may not overlap one partially.
    for (const at::Tensor& in : inputs) {
      if (!in.defined() || !is_tpu(in)) continue;
      if (no_alias_at_all && schema.arguments()[i].is_out()) {
        at::assert_no_overlap(t, in);
      } else if (!in.is_same(t)) {
        at::assert_no_partial_overlap(t, in);
      }
    }
  }
  // Advanced indexing: PyTorch raises IndexError for float indices (the
  // Python meta kernel raises RuntimeError, CUDA and CPU IndexError).
  if (schema.name() == "aten::index" || schema.name() == "aten::_index_put_impl_" || schema.name() == "aten::index_put_") {
    std::vector<at::Tensor> indices;
    if (args.size() > 1) collect_tensors(args[1], indices);
    for (const at::Tensor& idx : indices) {
      if (!idx.defined()) continue;
      at::ScalarType t = idx.scalar_type();
      TORCH_CHECK_INDEX(t == at::kLong || t == at::kInt || t == at::kByte || t == at::kBool,
                        "tensors used as indices must be long, int, byte or bool tensors");
    }
  }
  // amax/amin over an explicitly named empty dim: CPU and CUDA raise
  // IndexError (the Python meta kernel RuntimeError, which is also what CPU
  // raises when no dim is named).
  if ((schema.name() == "aten::amax" || schema.name() == "aten::amin" || schema.name() == "aten::aminmax") &&
      args.size() > 1 && args[0].isTensor() && args[0].toTensor().numel() == 0 &&
      (args[1].isIntList() || args[1].isInt())) {
    const at::Tensor& self = args[0].toTensor();
    std::vector<int64_t> dims = args[1].isInt() ? std::vector<int64_t>{args[1].toInt()} : args[1].toIntVector();
    for (int64_t d : dims) {
      const int64_t w = at::maybe_wrap_dim(d, self.dim());
      TORCH_CHECK_INDEX(self.size(w) != 0, schema.name().substr(6), "(): Expected reduction dim ", w,
                        " to have non-zero size.");
    }
  }
  // cat of 0-d tensors: CPU raises RuntimeError (the Python meta kernel IndexError).
  if (schema.name() == "aten::cat" && !args.empty()) {
    std::vector<at::Tensor> inputs;
    collect_tensors(args[0], inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(!inputs[i].defined() || inputs[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                  ") cannot be concatenated");
    }
  }
  // cat's out= may not alias any input, even fully (CPU's kernel checks).
  if (schema.name() == "aten::cat" && schema.overload_name() == "out" && args.size() > 2) {
    std::vector<at::Tensor> inputs;
    collect_tensors(args[0], inputs);
    for (const at::Tensor& t : inputs) at::assert_no_overlap(args[2].toTensor(), t);
  }
  // complex(real, imag): CPU's kernel checks the parts (the Python meta
  // kernel asserts, or promotes float32 with float64 to complex128).
  if (schema.name() == "aten::complex" && args.size() > 1 && args[0].isTensor() && args[1].isTensor()) {
    const at::Tensor &re = args[0].toTensor(), &im = args[1].toTensor();
    TORCH_CHECK(re.is_floating_point() && im.is_floating_point(),
                "Expected both inputs to be Half, Float or Double tensors but got ", re.scalar_type(), " and ",
                im.scalar_type());
    TORCH_CHECK(re.scalar_type() == im.scalar_type(), "Expected object of scalar type ", re.scalar_type(),
                " but got scalar type ", im.scalar_type(), " for second argument");
  }
  if (schema.name() == "aten::multinomial" && !args.empty() && args[0].isTensor()) {
    check_multinomial_distribution(args[0].toTensor());
  }
  if (schema.name() == "aten::index_select" && args.size() > 2 && args[2].isTensor()) {
    at::ScalarType t = args[2].toTensor().scalar_type();
    TORCH_CHECK(t == at::kLong || t == at::kInt, "index_select(): Expected dtype int32 or int64 for index");
  }
  if (is_promoting_inplace(schema.name()) && !args.empty() && args[0].isTensor()) {
    at::ScalarType self_t = args[0].toTensor().scalar_type();
    at::ScalarType result = promoted_type(schema, args);
    TORCH_CHECK(at::canCast(result, self_t), "result type ", result, " can't be cast to the desired output type ",
                self_t);
  }
}

Arg to_arg(TensorProgram& prog, const c10::Argument& schema_arg, const c10::IValue& v, bool read_tensors) {
  Arg a;
  auto tensor_value = [&](const at::Tensor& t) -> std::optional<hlo::Value> {
    if (!t.defined() || !read_tensors) return std::nullopt;
    return is_tpu(t) ? prog.read(t) : prog.host_input(t);
  };
  if (v.isNone()) return a;
  if (v.isTensor()) {
    a.kind = Arg::Kind::Tensor;
    a.tensor = tensor_value(v.toTensor());
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
      }
    }
  } else if (schema_arg.type()->kind() == c10::TypeKind::NumberType ||
             (schema_arg.real_type()->kind() == c10::TypeKind::OptionalType &&
              schema_arg.real_type()->containedType(0)->kind() == c10::TypeKind::NumberType)) {
    a.kind = Arg::Kind::Scalar;
    if (v.isDouble()) {
      a.scalar.kind = lower::ScalarArg::Kind::Float;
      a.scalar.f = v.toDouble();
    } else if (v.isBool()) {
      a.scalar.kind = lower::ScalarArg::Kind::Bool;
      a.scalar.i = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.scalar.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
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

}  // namespace

void LoweredKernel::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  runtime::metrics().ops_dispatched++;
  runtime::metrics().count_op_in_mode(runtime::eager_mode_name(runtime::eager_mode()));
  const c10::FunctionSchema& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - num_args, stack->end());
  stack->erase(stack->end() - num_args, stack->end());

  normalize_index_arguments(schema, args);
  std::vector<at::Tensor> tensors;
  at::Generator generator;
  for (const auto& v : args) {
    collect_tensors(v, tensors);
    if (v.isGenerator()) generator = v.toGenerator();
  }
  const int device = op_device(tensors);

  check_arguments(schema, args);
  const bool debug = runtime::eager_mode() == runtime::EagerMode::Debug;
  if (debug) check_index_ranges(schema, args);

  // 1. PyTorch's meta kernel: argument checks, result shapes and dtypes.
  MetaResult meta = infer_meta(op, args);
  // Batch norm in evaluation saves no statistics: CPU and CUDA return empty
  // save_mean/save_invstd where the Python meta kernel gives (C,).
  if ((schema.name() == "aten::_native_batch_norm_legit" || schema.name() == "aten::native_batch_norm") &&
      schema.overload_name().empty() && args.size() > 5 && args[5].isBool() && !args[5].toBool() &&
      meta.returns.size() == 3) {
    for (size_t r = 1; r < 3; ++r) meta.returns[r][0].sizes = {0}, meta.returns[r][0].strides = {1};
  }

  // 2. out= arguments take the meta kernel's resize.
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
  for (size_t i = 0; i < num_args; ++i) {
    const c10::Argument& sa = schema.arguments()[i];
    // A pure out= argument (written, listed after `*` as `out`) is not read.
    bool pure_out = writes_argument(sa) && sa.is_out();
    largs.push_back(to_arg(prog, sa, args[i], !pure_out));
  }
  lower::LowerContext ctx(prog.builder(), std::move(largs), std::move(out_types));
  ctx.matmul_precision = runtime::matmul_precision();
  std::vector<hlo::Value> results;
  try {
    results = fn_(ctx);
  } catch (const std::out_of_range& e) {
    // Lowerings know no torch: std::out_of_range is their IndexError.
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const lower::NotImplementedForDtype& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  }
  prog.bind_lowering_inputs(ctx, generator);

  // 4. Results: into aliased arguments, or into fresh tensors.
  std::vector<c10::IValue> returns;
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
      if (alias >= 0) {
        const at::Tensor& target = args[alias].toTensor();
        prog.write(target, next_result());
        returns.push_back(target);
      } else if (!meta.return_is_list[r] && !meta.returns[r][0].defined) {
        returns.push_back(at::Tensor());  // e.g. a backward's output_mask entry false
      } else if (meta.return_is_list[r]) {
        std::vector<at::Tensor> outs;
        for (const TensorMeta& m : meta.returns[r]) outs.push_back(prog.produce(next_result(), m.sizes, m.strides, m.dtype));
        returns.push_back(outs);
      } else {
        const TensorMeta& m = meta.returns[r][0];
        returns.push_back(prog.produce(next_result(), m.sizes, m.strides, m.dtype));
      }
    }
  }
  // Results past the returns are the new values of arguments written but not
  // returned (_native_batch_norm_legit's running stats; native_batch_norm's,
  // unmarked in its schema), in argument order, for defined tensors only.
  std::set<int> returned;
  for (size_t r = 0; r < schema.returns().size(); ++r) returned.insert(aliased_argument(schema, r));
  for (size_t i = 0; i < num_args && k < results.size() && !schema.returns().empty(); ++i) {
    const bool written = writes_argument(schema.arguments()[i]) || writes_unmarked(schema, i);
    if (!written || returned.count(static_cast<int>(i)) || !args[i].isTensor() || !args[i].toTensor().defined()) continue;
    prog.write(args[i].toTensor(), results[k++]);
  }
  prog.run();
  if (debug) {
    runtime::DeviceRuntime::get().synchronize(device);  // errors surface at this op
    if (runtime::check_nans()) check_finite_results(schema, returns);
  }
  for (auto& r : returns) stack->push_back(std::move(r));
}

}  // namespace torch_tpu::device
