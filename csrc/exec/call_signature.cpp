#include "exec/call_signature.h"

#include <c10/util/SmallVector.h>

#include <cstring>
#include <unordered_map>

#include "device/storage_buffer.h"
#include "exec/pending_work.h"

namespace torch_tpu::device {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

bool is_device_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

bool is_host_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu();
}

// Floats by their bits, as they are hashed: NaN is NaN (a program that baked
// one in serves the next), -0.0 is not 0.0.
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

bool same_value(const c10::IValue& a, const c10::IValue& b) {
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (a.isBool() || b.isBool()) return a.isBool() && b.isBool() && a.toBool() == b.toBool();
  if (a.isInt() || b.isInt()) return a.isInt() && b.isInt() && a.toInt() == b.toInt();
  if (a.isDouble() || b.isDouble()) return a.isDouble() && b.isDouble() && same_bits(a.toDouble(), b.toDouble());
  if (a.isString() || b.isString()) return a.isString() && b.isString() && a.toStringRef() == b.toStringRef();
  if (a.isDevice() || b.isDevice()) return a.isDevice() && b.isDevice() && a.toDevice() == b.toDevice();
  return false;  // anything else (SymInts, lists...): never assumed equal
}

bool same_kind(const c10::IValue& a, const c10::IValue& b) {
  return (a.isInt() && b.isInt()) || (a.isDouble() && b.isDouble());
}

// The first flat position of each storage a call's tpu tensors view, by
// storage id. Every op a replay matches asks (a step replays hundreds of
// ops), so the few storages most ops take are a short list scanned in
// place, with no allocation; past that (a foreach op over every parameter)
// a hash map keeps the lookup linear.
class FirstPositions {
 public:
  // The position `id` was first seen at; -1 when it is new, noting `position`.
  int find_or_add(uint64_t id, int position) {
    if (by_id_.empty()) {
      for (const auto& [seen, first] : few_) {
        if (seen == id) return first;
      }
      if (few_.size() < kFew) {
        few_.emplace_back(id, position);
        return -1;
      }
      by_id_.reserve(4 * kFew);
      by_id_.insert(few_.begin(), few_.end());
    }
    auto [it, fresh] = by_id_.emplace(id, position);
    return fresh ? -1 : it->second;
  }

 private:
  static constexpr size_t kFew = 16;
  c10::SmallVector<std::pair<uint64_t, int>, kFew> few_;
  std::unordered_map<uint64_t, int> by_id_;
};

}  // namespace

bool append_signature(const c10::IValue& v, std::vector<c10::IValue>& flat, const SignaturePolicy& policy) {
  if (v.isNone() || v.isInt() || v.isDouble() || v.isBool() || v.isString() || v.isDevice()) {
    flat.push_back(v);
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    flat.push_back(t.defined() ? c10::IValue(t) : c10::IValue());
    if (policy.wrapped_values && t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the dispatcher wrapped (x * 2.5): a program keeps
      // the value as a constant (graph_capture.cpp), so it is signature.
      // Read in place: the dispatcher wraps a Python float as a double, an
      // int as a long, a bool as a bool (item() would be a dispatcher call).
      switch (t.scalar_type()) {
        case at::kDouble:
          flat.emplace_back(*t.const_data_ptr<double>());
          break;
        case at::kLong:
          flat.emplace_back(*t.const_data_ptr<int64_t>());
          break;
        case at::kBool:
          flat.emplace_back(*t.const_data_ptr<bool>());
          break;
        default: {
          if (t.scalar_type() == at::kUInt64) return false;  // an integer past int64
          const c10::Scalar value = t.item();
          if (value.isComplex()) return false;
          if (value.isFloatingPoint()) {
            flat.emplace_back(value.toDouble());
          } else if (value.isBoolean()) {
            flat.emplace_back(value.toBool());
          } else {
            flat.emplace_back(value.toLong());
          }
        }
      }
    }
  } else if (v.isSymInt()) {
    flat.emplace_back(v.toSymInt().guard_int(__FILE__, __LINE__));
  } else if (v.isList()) {  // every list: Tensor[], Tensor?[], int[], float[], bool[], Scalar[]
    auto list = v.toListRef();
    flat.emplace_back(static_cast<int64_t>(list.size()));
    for (const c10::IValue& e : list) {
      if (e.isList() || !append_signature(e, flat, policy)) return false;
    }
  } else {
    return false;  // a Generator (its own state), complex numbers, anything else
  }
  return true;
}

uint64_t signature_hash(const void* op, const std::vector<c10::IValue>& flat, const SignaturePolicy& policy) {
  using Numbers = SignaturePolicy::Numbers;
  uint64_t h = reinterpret_cast<uintptr_t>(op);
  FirstPositions first_of_storage;  // aliasing between inputs
  for (size_t k = 0; k < flat.size(); ++k) {
    const c10::IValue& v = flat[k];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      const bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
      h = mix(h, static_cast<uint64_t>(t.scalar_type()) + (is_tpu(t) ? 1000 : wrapped ? 3000 : 2000));
      for (int64_t s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
      if (!is_tpu(t)) continue;
      for (int64_t s : t.strides()) h = mix(h, static_cast<uint64_t>(s));
      StorageBuffer& sb = storage_buffer(t);
      const int64_t offset = policy.offsets_by_value ? t.storage_offset() : t.storage_offset() != 0;
      h = mix(h, static_cast<uint64_t>(offset) * 4 + t.is_conj() * 2 + t.is_neg());
      if (policy.buffers) {
        // another thread's pending program writes it: its buffer is not current yet
        if (!policy.keeps_own_pending || !pending_in_this_thread(sb)) settle_pending_writes(sb);
        hlo::ElementType buffer_dtype = hlo::ElementType::U8;
        const bool has_buffer = sb.current(&buffer_dtype) != nullptr;
        h = mix(h, sb.nbytes * 4 + static_cast<uint64_t>(has_buffer) * 2);
        if (has_buffer) h = mix(h, static_cast<uint64_t>(buffer_dtype));  // the program's parameter type
      } else {
        h = mix(h, sb.nbytes * 4);
      }
      h = mix(h, static_cast<uint64_t>(first_of_storage.find_or_add(sb.id, static_cast<int>(k))));
    } else if (v.isInt()) {
      h = mix(h, policy.numbers == Numbers::ByKind ? 0x1a7 : static_cast<uint64_t>(v.toInt()));
    } else if (v.isDouble()) {
      // Floats that feed inputs by kind: a capture may take any other
      // number as an input (its record checks the ones its program baked in).
      double d = v.toDouble();
      uint64_t bits = 0x5ca1a4;
      if (policy.numbers == Numbers::ByValue) std::memcpy(&bits, &d, sizeof(bits));
      h = mix(h, bits);
    } else if (v.isBool()) {
      h = mix(h, v.toBool() ? 3 : 5);
    } else if (v.isString()) {
      h = mix(h, std::hash<std::string>()(v.toStringRef()));
    } else if (v.isDevice()) {
      h = mix(h, static_cast<uint64_t>(v.toDevice().index()) * 131 + static_cast<uint64_t>(v.toDevice().type()));
    } else {
      h = mix(h, 7);  // None
    }
  }
  return h;
}

SignatureRecord record_signature(const std::vector<c10::IValue>& flat, const SignaturePolicy& policy) {
  SignatureRecord record;
  record.buffers = policy.buffers;
  record.keeps_own_pending = policy.keeps_own_pending;
  record.entries.reserve(flat.size());
  FirstPositions first_of_storage;
  for (size_t k = 0; k < flat.size(); ++k) {
    const c10::IValue& v = flat[k];
    SignatureEntry in;
    if (is_device_tensor(v)) {
      const at::Tensor& t = v.toTensor();
      StorageBuffer& sb = storage_buffer(t);
      in.kind = SignatureEntry::Kind::DeviceTensor;
      in.dtype = t.scalar_type();
      in.sizes = t.sizes().vec();
      in.strides = t.strides().vec();
      in.offset = t.storage_offset();
      in.conj = t.is_conj();
      in.neg = t.is_neg();
      in.storage_nbytes = sb.nbytes;
      in.device = sb.device;
      if (policy.buffers) in.has_buffer = sb.current(&in.buffer_dtype) != nullptr;
      in.alias_of = first_of_storage.find_or_add(sb.id, static_cast<int>(k));
    } else if (is_host_tensor(v)) {
      const at::Tensor& t = v.toTensor();
      in.kind = SignatureEntry::Kind::HostTensor;
      in.dtype = t.scalar_type();
      in.wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
      in.sizes = t.sizes().vec();
    } else {
      const bool number = v.isInt() || v.isDouble();
      if (number && policy.numbers == SignaturePolicy::Numbers::ByKind) in.kind = SignatureEntry::Kind::AnyNumber;
      in.value = v;
    }
    record.entries.push_back(std::move(in));
  }
  return record;
}

int position_of_tensor(const std::vector<c10::IValue>& flat, const c10::TensorImpl* t) {
  for (size_t k = 0; k < flat.size(); ++k) {
    if (is_device_tensor(flat[k]) && flat[k].toTensor().unsafeGetTensorImpl() == t) return static_cast<int>(k);
  }
  return -1;
}

bool views_storage(const std::vector<c10::IValue>& flat, uint64_t storage_id) {
  for (const c10::IValue& v : flat) {
    if (is_device_tensor(v) && storage_buffer(v.toTensor()).id == storage_id) return true;
  }
  return false;
}

void free_offsets(SignatureRecord& record) {
  for (SignatureEntry& e : record.entries) e.free_offset = e.kind == SignatureEntry::Kind::DeviceTensor;
}

bool SignatureRecord::matches(const std::vector<c10::IValue>& values, std::string* why) const {
  auto fail = [&](size_t k, const std::string& what) {
    if (why) *why = "input " + std::to_string(k) + ": " + what;
    return false;
  };
  if (values.size() != entries.size()) {
    if (why) *why = "number of inputs changed";
    return false;
  }
  FirstPositions first_of_storage;
  for (size_t k = 0; k < values.size(); ++k) {
    const SignatureEntry& in = entries[k];
    const c10::IValue& v = values[k];
    switch (in.kind) {
      case SignatureEntry::Kind::DeviceTensor: {
        if (!is_device_tensor(v)) return fail(k, "no longer a tpu tensor");
        const at::Tensor& t = v.toTensor();
        if (t.scalar_type() != in.dtype) return fail(k, "dtype changed");
        if (t.sizes() != in.sizes) return fail(k, "sizes changed");
        if (t.strides() != in.strides) return fail(k, "strides changed");
        if (!in.free_offset) {
          if (t.storage_offset() != in.offset) return fail(k, "offset changed");
        } else if ((t.storage_offset() != 0) != (in.offset != 0)) {
          return fail(k, "offset became 0, or stopped being 0");
        } else if (in.alias_of >= 0 && t.storage_offset() - values[in.alias_of].toTensor().storage_offset() !=
                                           in.offset - entries[in.alias_of].offset) {
          // values[alias_of] is a tpu tensor: that position matched earlier
          return fail(k, "offset from another view of its storage changed");
        }
        if (t.is_conj() != in.conj || t.is_neg() != in.neg) return fail(k, "conjugate or negative bit changed");
        StorageBuffer& sb = storage_buffer(t);
        if (sb.device != in.device) return fail(k, "device changed");
        if (sb.nbytes != in.storage_nbytes) return fail(k, "storage size changed");
        if (buffers) {
          // another thread's pending program writes it: run that first
          if (!keeps_own_pending || !pending_in_this_thread(sb)) settle_pending_writes(sb);
          hlo::ElementType buffer_dtype = hlo::ElementType::U8;
          if ((sb.current(&buffer_dtype) != nullptr) != in.has_buffer) {
            return fail(k, "storage materialization changed");
          }
          if (in.has_buffer && buffer_dtype != in.buffer_dtype) return fail(k, "storage buffer element type changed");
        }
        if (first_of_storage.find_or_add(sb.id, static_cast<int>(k)) != in.alias_of) {
          return fail(k, "aliasing between inputs changed");
        }
        break;
      }
      case SignatureEntry::Kind::HostTensor: {
        if (!is_host_tensor(v)) return fail(k, "no longer a CPU tensor");
        const at::Tensor& t = v.toTensor();
        if (t.scalar_type() != in.dtype || t.sizes() != in.sizes) return fail(k, "CPU tensor dtype or sizes changed");
        if (t.unsafeGetTensorImpl()->is_wrapped_number() != in.wrapped) {
          return fail(k, "a wrapped number became a CPU tensor, or back");
        }
        break;
      }
      case SignatureEntry::Kind::Other:
        if (!same_value(v, in.value)) return fail(k, "value changed");
        break;
      case SignatureEntry::Kind::FreeFloat:
        if (!v.isDouble()) return fail(k, "no longer a float");
        break;
      case SignatureEntry::Kind::AnyNumber:
        if (!same_kind(v, in.value)) return fail(k, "kind of number changed");
        break;
    }
  }
  return true;
}

}  // namespace torch_tpu::device
