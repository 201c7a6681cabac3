// The per-device random generator: a seed and a counter. Each random op
// draws a fresh (seed, counter) pair as the state of
// stablehlo.rng_bit_generator, so values depend only on the seed and the
// order of random ops, never on host timing.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>

namespace torch_tpu::device {

class TpuGeneratorImpl : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { counter_ = offset; }
  uint64_t get_offset() const override { return counter_; }
  // State: 16 bytes, seed then counter (uint8 CPU tensor, like CUDA's).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  uint64_t next_counter() { return counter_++; }
  std::mutex mutex_;

 private:
  TpuGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t counter_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
// `generator` when defined (must be a tpu generator), else the device default.
TpuGeneratorImpl* tpu_generator(const at::Generator& generator, int device);

}  // namespace torch_tpu::device
