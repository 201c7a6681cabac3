#include "device/meta_inference.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "device/storage_buffer.h"
#include "exec/call_signature.h"

namespace torch_tpu::device {

namespace {

// Meta twins: same sizes, strides, offsets, and one meta storage per device
// storage, so PyTorch's overlap checks see aliasing.
class MetaMirror {
 public:
  at::Tensor mirror(const at::Tensor& t) {
    // A CPU scalar tensor beside tpu ones (masked_fill's value, SEW-D's
    // torch.tensor(finfo.min)) is read on the host, as CUDA reads it; its
    // meta kernel, a Python reference checking that `value` is a CPU scalar
    // or on `a`'s device, must see it on the meta device too. Wrapped
    // numbers stay: type promotion treats them apart.
    if (t.defined() && t.device().is_cpu() && t.dim() == 0 && !t.unsafeGetTensorImpl()->is_wrapped_number()) {
      return at::empty({}, t.options().device(at::kMeta));
    }
    if (!is_tpu(t)) return t;
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      at::Tensor base = at::empty({static_cast<int64_t>(t.storage().nbytes())},
                                  at::TensorOptions().dtype(at::kByte).device(at::kMeta));
      it = storages_.emplace(key, base.storage()).first;
    }
    at::Tensor m = at::empty({0}, t.options().device(at::kMeta));
    m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    return m;
  }

  c10::IValue mirror(const c10::IValue& v) {
    if (v.isTensor()) return mirror(v.toTensor());
    if (v.isTensorList()) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) out.push_back(mirror(t));
      return out;
    }
    if (v.isList()) {
      auto list = v.toList();
      if (list.size() > 0 && (list.get(0).isTensor() || list.get(0).isNone())) {
        c10::List<std::optional<at::Tensor>> out;
        for (size_t i = 0; i < list.size(); ++i) {
          c10::IValue e = list.get(i);
          out.push_back(e.isNone() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(mirror(e.toTensor())));
        }
        return out;
      }
    }
    if (v.isGenerator()) return c10::IValue();  // meta kernels draw nothing
    return v;
  }

 private:
  std::map<const c10::StorageImpl*, c10::Storage> storages_;
};

TensorMeta meta_of(const at::Tensor& t) {
  if (!t.defined()) return {{}, {}, at::ScalarType::Undefined, /*defined=*/false};
  return {t.sizes().vec(), t.strides().vec(), t.scalar_type()};
}

MetaResult run_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                    void (*kernel)(const c10::OperatorHandle&, torch::jit::Stack*)) {
  const c10::FunctionSchema& schema = op.schema();
  MetaMirror mm;
  torch::jit::Stack stack;
  for (const auto& v : args) stack.push_back(mm.mirror(v));
  std::vector<c10::IValue> meta_args = stack;
  if (kernel) {
    kernel(op, &stack);
  } else {
    op.callBoxed(&stack);
  }
  MetaResult r;
  for (const auto& ret : stack) {
    std::vector<TensorMeta> metas;
    c10::IValue value;
    if (ret.isTensor()) {
      metas.push_back(meta_of(ret.toTensor()));
      r.return_is_list.push_back(false);
    } else if (ret.isTensorList()) {
      for (const at::Tensor& t : ret.toTensorVector()) metas.push_back(meta_of(t));
      r.return_is_list.push_back(true);
    } else if (ret.isNone()) {  // an undefined Tensor return
      metas.push_back(meta_of(at::Tensor()));
      r.return_is_list.push_back(false);
    } else if (ret.isInt() || ret.isSymInt()) {
      value = ret.isInt() ? ret.toInt() : ret.toSymInt().guard_int(__FILE__, __LINE__);
      r.return_is_list.push_back(false);
    } else {
      TORCH_CHECK(false, "tpu: ", schema.name(), " returns a non-tensor value; not a lowered op");
    }
    r.returns.push_back(std::move(metas));
    r.values.push_back(std::move(value));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info && info->isWrite() && meta_args[i].isTensor())
      r.written_args.emplace_back(i, meta_of(meta_args[i].toTensor()));
  }
  return r;
}

}  // namespace

MetaResult infer_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args, bool reads_numbers,
                      void (*kernel)(const c10::OperatorHandle&, torch::jit::Stack*)) {
  struct Entry {
    SignatureRecord signature;
    MetaResult result;
  };
  static std::mutex mutex;
  static std::unordered_map<uint64_t, std::vector<Entry>> cache;
  static size_t entries = 0;
  const SignaturePolicy policy = meta_signature(reads_numbers);
  std::vector<c10::IValue> flat;
  flat.reserve(args.size() + 2);
  bool keyed = true;
  for (const auto& v : args) {
    // Meta kernels draw nothing: a Generator is None to them (MetaMirror).
    if (!append_signature(v.isGenerator() ? c10::IValue() : v, flat, policy)) {
      keyed = false;  // something without a signature: no caching
      break;
    }
  }
  const uint64_t key = keyed ? signature_hash(&op.schema(), flat, policy) : 0;
  if (keyed) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      for (const Entry& e : it->second) {
        if (e.signature.matches(flat, nullptr)) return e.result;
      }
    }
  }
  MetaResult r = run_meta(op, args, kernel);  // raises PyTorch's error for bad input
  if (!keyed) return r;
  SignatureRecord signature = record_signature(flat, policy);
  std::lock_guard<std::mutex> lock(mutex);
  if (entries > 100000) {  // bound memory for shape-polymorphic workloads
    cache.clear();
    entries = 0;
  }
  cache[key].push_back({std::move(signature), r});
  ++entries;
  return r;
}

at::MemoryFormat convolution_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  const at::MemoryFormat in = input.suggest_memory_format(), w = weight.suggest_memory_format();
  if (weight.dim() == 4 && (in == at::MemoryFormat::ChannelsLast || w == at::MemoryFormat::ChannelsLast))
    return at::MemoryFormat::ChannelsLast;
  if (weight.dim() == 5 && (in == at::MemoryFormat::ChannelsLast3d || w == at::MemoryFormat::ChannelsLast3d))
    return at::MemoryFormat::ChannelsLast3d;
  return at::MemoryFormat::Contiguous;
}

}  // namespace torch_tpu::device
