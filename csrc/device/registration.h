// What the Python module needs from the device layer, without torch headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::device {

void register_hooks();                        // hooks.cpp
std::vector<std::string> lowered_op_names();  // op_table.cpp
// op_table.cpp: the overloads implemented for nested tensors on tpu.
std::vector<std::string> nested_tensor_op_names();
// op_table.cpp: the Meta kernels PyTorch lacks for lowered ops (OpSpec::meta),
// registered where it has none; once, at import, after torch's own.
void register_missing_meta_kernels();
// op_table.cpp: the device's kernels for namespace `ns`'s operators (fbgemm),
// once, when that library is imported (torch_tpu/integrations/).
void register_library_ops(const std::string& ns);

// tensor_program.cpp: DeferAndFuse's pending programs run now.
void flush_deferred(const char* reason);

// guard.cpp: the calling thread's current device
void set_current_device(int index);
int get_current_device();

// generator.cpp
void manual_seed(int device, uint64_t seed);
uint64_t initial_seed(int device);
std::string get_rng_state(int device);
void set_rng_state(int device, const std::string& state);

}  // namespace torch_tpu::device
