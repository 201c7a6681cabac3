#include "device/generator.h"

#include <ATen/ATen.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include <cstring>
#include <deque>
#include <random>

#include "runtime/device_runtime.h"

namespace torch_tpu::device {

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  counter_ = 0;
}

uint64_t TpuGeneratorImpl::seed() {
  uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  set_current_seed(s);
  return s;
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "tpu RNG state must be a uint8 tensor of 16 bytes, got ", new_state.numel(), " elements");
  const auto* bytes = static_cast<const uint64_t*>(new_state.data());
  seed_ = bytes[0];
  counter_ = bytes[1];
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  auto* bytes = static_cast<uint64_t*>(state.data_ptr());
  bytes[0] = seed_;
  bytes[1] = counter_;
  return state.getIntrusivePtr();
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index(), seed_);
  g->counter_ = counter_;
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::deque<at::Generator> generators;  // stable addresses
  std::lock_guard<std::mutex> lock(mutex);
  int count = runtime::DeviceRuntime::get().device_count();
  if (device < 0) device = 0;
  TORCH_CHECK(device < count, "tpu error: invalid device ordinal ", static_cast<int>(device));
  while (static_cast<int>(generators.size()) < count) {
    generators.push_back(at::make_generator<TpuGeneratorImpl>(static_cast<c10::DeviceIndex>(generators.size())));
  }
  return generators[device];
}

TpuGeneratorImpl* tpu_generator(const at::Generator& generator, int device) {
  if (generator.defined()) {
    TORCH_CHECK(generator.device().type() == c10::DeviceType::PrivateUse1,
                "Expected a 'tpu' device type for generator but found '", generator.device().type(), "'");
    return at::check_generator<TpuGeneratorImpl>(generator);
  }
  return at::check_generator<TpuGeneratorImpl>(default_generator(static_cast<c10::DeviceIndex>(device)));
}

}  // namespace torch_tpu::device

namespace torch_tpu::device {

// Plain-typed entry points for torch.tpu's RNG functions (python/module.cpp).
void manual_seed(int device, uint64_t seed) {
  auto* g = tpu_generator(at::Generator(), device);
  std::lock_guard<std::mutex> lock(g->mutex_);
  g->set_current_seed(seed);
}

uint64_t initial_seed(int device) { return tpu_generator(at::Generator(), device)->current_seed(); }

std::string get_rng_state(int device) {
  auto* g = tpu_generator(at::Generator(), device);
  std::lock_guard<std::mutex> lock(g->mutex_);
  uint64_t words[2] = {g->current_seed(), g->get_offset()};
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

void set_rng_state(int device, const std::string& state) {
  TORCH_CHECK(state.size() == 16, "tpu RNG state must be 16 bytes, got ", state.size());
  auto* g = tpu_generator(at::Generator(), device);
  std::lock_guard<std::mutex> lock(g->mutex_);
  uint64_t words[2];
  std::memcpy(words, state.data(), 16);
  g->set_current_seed(words[0]);
  g->set_offset(words[1]);
}

}  // namespace torch_tpu::device
