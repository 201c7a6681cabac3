#include "device/meta_inference.h"

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "device/storage_buffer.h"

namespace torch_tpu::device {

namespace {

// Meta twins: same sizes, strides, offsets, and one meta storage per device
// storage, so PyTorch's overlap checks see aliasing.
class MetaMirror {
 public:
  at::Tensor mirror(const at::Tensor& t) {
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

// ---- cache key ----------------------------------------------------------
class KeyWriter {
 public:
  void add(const c10::IValue& v) {
    if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTensorList()) {
      key_ += "[";
      for (const at::Tensor& t : v.toTensorVector()) tensor(t);
      key_ += "]";
    } else if (v.isList()) {
      auto list = v.toList();
      key_ += "[";
      for (size_t i = 0; i < list.size(); ++i) add(list.get(i));
      key_ += "]";
    } else if (v.isNone()) {
      key_ += "N,";
    } else if (v.isInt()) {
      key_ += "i" + (scalar_values_matter_ ? std::to_string(v.toInt()) : std::string()) + ",";
    } else if (v.isDouble()) {
      double d = v.toDouble();
      key_ += "d";
      if (scalar_values_matter_) key_.append(reinterpret_cast<const char*>(&d), sizeof(d));
      key_ += ",";
    } else if (v.isBool()) {
      key_ += v.toBool() ? "T," : "F,";
    } else if (v.isString()) {
      key_ += "s" + v.toStringRef() + ",";
    } else if (v.isIntList()) {
      key_ += "I";
      for (int64_t x : v.toIntVector()) key_ += std::to_string(x) + ".";
      key_ += ",";
    } else if (v.isDoubleList()) {
      key_ += "D";
      for (double d : v.toDoubleVector()) key_.append(reinterpret_cast<const char*>(&d), sizeof(d));
      key_ += ",";
    } else if (v.isGenerator()) {
      key_ += "G,";
    } else if (v.isDevice()) {
      key_ += "v" + v.toDevice().str() + ",";
    } else {
      ok_ = false;  // something we do not know how to key: no caching
    }
  }
  bool ok() const { return ok_; }
  const std::string& str() const { return key_; }
  // `scalar_values_matter` false: numbers are keyed by kind (int, float)
  // only, for ops whose result metadata cannot depend on their values.
  KeyWriter(const std::string& op, bool scalar_values_matter)
      : key_(op + "|"), scalar_values_matter_(scalar_values_matter) {}

 private:
  void tensor(const at::Tensor& t) {
    if (!t.defined()) {
      key_ += "u,";
      return;
    }
    key_ += is_tpu(t) ? "t" : (t.unsafeGetTensorImpl()->is_wrapped_number() ? "w" : "c");
    key_ += std::to_string(static_cast<int>(t.scalar_type())) + ":";
    for (int64_t s : t.sizes()) key_ += std::to_string(s) + ".";
    key_ += ":";
    for (int64_t s : t.strides()) key_ += std::to_string(s) + ".";
    key_ += ":" + std::to_string(t.storage_offset());
    if (is_tpu(t)) {  // which earlier argument shares the storage, and its size
      const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
      auto it = storage_ids_.find(s);
      if (it == storage_ids_.end()) it = storage_ids_.emplace(s, storage_ids_.size()).first;
      key_ += "@" + std::to_string(it->second) + "/" + std::to_string(t.storage().nbytes());
    }
    key_ += ",";
  }
  std::string key_;
  bool ok_ = true;
  bool scalar_values_matter_ = true;
  std::map<const c10::StorageImpl*, size_t> storage_ids_;
};

MetaResult run_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  const c10::FunctionSchema& schema = op.schema();
  MetaMirror mm;
  torch::jit::Stack stack;
  for (const auto& v : args) stack.push_back(mm.mirror(v));
  std::vector<c10::IValue> meta_args = stack;
  op.callBoxed(&stack);
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
    if (info && info->isWrite() && meta_args[i].isTensor()) r.written_args.emplace_back(i, meta_of(meta_args[i].toTensor()));
  }
  return r;
}

}  // namespace

MetaResult infer_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args, bool reads_numbers) {
  static std::mutex mutex;
  static std::unordered_map<std::string, MetaResult> cache;
  const std::string name = c10::toString(op.schema().operator_name());
  KeyWriter key(name, reads_numbers);
  for (const auto& v : args) key.add(v);
  if (key.ok()) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key.str());
    if (it != cache.end()) return it->second;
  }
  MetaResult r = run_meta(op, args);  // raises PyTorch's error for bad input
  if (!key.ok()) return r;
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() > 100000) cache.clear();  // bound memory for shape-polymorphic workloads
  cache.emplace(key.str(), r);
  return r;
}

void empty_statistics_in_evaluation(const std::vector<c10::IValue>& args, MetaResult& meta) {
  const bool training = !(args.size() > 5 && args[5].isBool() && !args[5].toBool());
  if (training || meta.returns.size() != 3) return;
  for (size_t r = 1; r < 3; ++r) meta.returns[r][0].sizes = {0}, meta.returns[r][0].strides = {1};
}

}  // namespace torch_tpu::device
