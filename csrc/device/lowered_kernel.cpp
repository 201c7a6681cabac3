#include "device/lowered_kernel.h"

#include <ATen/ATen.h>

#include <map>

#include "device/generator.h"
#include "device/tensor_program.h"
#include "runtime/metrics.h"

namespace torch_tpu::device {

namespace {

using lower::Arg;

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// Meta twins of the device tensors: same sizes, strides, offsets, and one
// meta storage per device storage, so PyTorch's overlap checks see aliasing.
class MetaMirror {
 public:
  at::Tensor mirror(const at::Tensor& t) {
    if (!t.defined() || !is_tpu(t)) return t;
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      at::Tensor base = at::empty({static_cast<int64_t>(t.storage().nbytes())}, at::TensorOptions().dtype(at::kByte).device(at::kMeta));
      it = storages_.emplace(key, base.storage()).first;
    }
    at::Tensor m = at::empty({0}, t.options().device(at::kMeta));
    m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    return m;
  }

 private:
  std::map<const c10::StorageImpl*, c10::Storage> storages_;
};

c10::IValue mirror_ivalue(MetaMirror& mm, const c10::IValue& v) {
  if (v.isTensor()) return mm.mirror(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(mm.mirror(t));
    return out;
  }
  if (v.isList()) {
    auto list = v.toList();
    if (list.size() > 0 && (list.get(0).isTensor() || list.get(0).isNone())) {
      c10::List<std::optional<at::Tensor>> out;
      for (size_t i = 0; i < list.size(); ++i) {
        c10::IValue e = list.get(i);
        out.push_back(e.isNone() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(mm.mirror(e.toTensor())));
      }
      return out;
    }
  }
  if (v.isGenerator()) return c10::IValue();
  return v;
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
      TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: complex scalars are not supported yet");
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
  const c10::FunctionSchema& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - num_args, stack->end());
  stack->erase(stack->end() - num_args, stack->end());

  std::vector<at::Tensor> tensors;
  at::Generator generator;
  for (const auto& v : args) {
    collect_tensors(v, tensors);
    if (v.isGenerator()) generator = v.toGenerator();
  }
  const int device = op_device(tensors);

  // 1. PyTorch's meta kernel: argument checks, result shapes and dtypes.
  MetaMirror mm;
  torch::jit::Stack meta_stack;
  for (const auto& v : args) meta_stack.push_back(mirror_ivalue(mm, v));
  std::vector<c10::IValue> meta_args = meta_stack;  // out= mirrors, resized by the meta kernel
  op.callBoxed(&meta_stack);

  // 2. out= arguments take the meta kernel's resize.
  for (size_t i = 0; i < num_args; ++i) {
    if (!writes_argument(schema.arguments()[i]) || !args[i].isTensor()) continue;
    at::Tensor real = args[i].toTensor();
    const at::Tensor& meta = meta_args[i].toTensor();
    if (real.sizes() != meta.sizes() || real.strides() != meta.strides()) {
      real.resize_(meta.sizes());
      if (real.strides() != meta.strides()) real.as_strided_(meta.sizes(), meta.strides(), real.storage_offset());
    }
  }

  // 3. Lower.
  TensorProgram prog(device);
  std::vector<lower::TensorType> out_types;
  for (const auto& r : meta_stack) {
    if (r.isTensor()) {
      const at::Tensor& t = r.toTensor();
      out_types.push_back({element_type(t.scalar_type()), t.sizes().vec()});
    } else if (r.isTensorList()) {
      for (const at::Tensor& t : r.toTensorVector()) out_types.push_back({element_type(t.scalar_type()), t.sizes().vec()});
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
  std::vector<hlo::Value> results = fn_(ctx);
  prog.bind_lowering_inputs(ctx, generator);

  // 4. Results: into aliased arguments, or into fresh tensors.
  std::vector<c10::IValue> returns;
  if (schema.returns().empty()) {
    // In-place ops returning nothing (_foreach_*_): one result per written tensor.
    size_t k = 0;
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
    size_t k = 0;  // results are flat: a Tensor[] return takes one per element
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
      } else if (meta_stack[r].isTensorList()) {
        std::vector<at::Tensor> outs;
        for (const at::Tensor& meta : meta_stack[r].toTensorVector()) {
          outs.push_back(prog.produce(next_result(), meta.sizes(), meta.strides(), meta.scalar_type()));
        }
        returns.push_back(outs);
      } else {
        const at::Tensor& meta = meta_stack[r].toTensor();
        returns.push_back(prog.produce(next_result(), meta.sizes(), meta.strides(), meta.scalar_type()));
      }
    }
  }
  prog.run();
  for (auto& r : returns) stack->push_back(std::move(r));
}

}  // namespace torch_tpu::device
