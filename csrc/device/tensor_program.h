// Building and running one program over `tpu` tensors: storages become
// parameters (deduplicated, so `x.add_(x)` reads one buffer), views are read
// and written through their layouts, fresh outputs get new storages. Used by
// every kernel: lowered ops, copies, factories.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "device/storage_buffer.h"
#include "hlo/builder.h"
#include "lower/lowering.h"
#include "runtime/view_layout.h"

namespace torch_tpu::device {

runtime::ViewLayout layout_of(const at::Tensor& t);

class TensorProgram {
 public:
  explicit TensorProgram(int device) : device_(device) {}

  hlo::Builder& builder() { return b_; }
  int device() const { return device_; }

  // The tensor's elements (its view), in its own dtype.
  hlo::Value read(const at::Tensor& t);
  // A CPU tensor (a wrapped scalar, say) as a program input.
  hlo::Value host_input(const at::Tensor& cpu);
  // Writes `v` (converted to t's dtype) into t's view of its storage.
  void write(const at::Tensor& t, const hlo::Value& v);
  // A new tensor with `sizes`/`strides`/`dtype` holding `v`.
  at::Tensor produce(const hlo::Value& v, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);
  void produce_into(const at::Tensor& fresh, const hlo::Value& v);

  // Host scalars and RNG states that a lowering asked for.
  void bind_lowering_inputs(lower::LowerContext& ctx, const at::Generator& generator);

  // Compiles (or finds) and launches the program; does not wait.
  void run();

 private:
  struct Slot {
    StorageBuffer* sb;
    c10::Storage keep_alive;
    std::optional<hlo::Value> param;
    std::optional<hlo::Value> current;  // flat value after this program's writes
    bool written = false;
  };
  Slot& slot_for(const at::Tensor& t);
  hlo::Value flat_as(Slot& slot, hlo::ElementType dtype);

  int device_;
  hlo::Builder b_;
  std::vector<Slot> slots_;
  std::vector<runtime::BufferPtr> args_;
  std::vector<std::pair<StorageBuffer*, c10::Storage>> fresh_;
  std::vector<hlo::Value> fresh_values_;
};

at::Tensor empty_tpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype, int device);
int current_device();
int checked_device_index(const c10::Device& d);  // raises for an index >= device_count()

}  // namespace torch_tpu::device
