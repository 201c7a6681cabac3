// Ops whose result size depends on tensor values (unique, bincount,
// repeat_interleave) or whose result is a host value (equal): the host
// waits, as CUDA does, for the number that decides the size (bincount,
// unique, unique_consecutive: the rest runs on the device) or for the whole
// input (unique along a dim, repeat_interleave without output_size: CPU's
// kernel computes; given it, repeat_interleave waits for nothing).
// Also the tril/triu index factories, which have no tensor input at all.
// Registered in op_table.cpp.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace torch_tpu::device {

bool equal(const at::Tensor& self, const at::Tensor& other);
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength);
at::Tensor repeat_interleave_tensor(const at::Tensor& repeats, std::optional<int64_t> output_size);
// tril_indices / triu_indices: factories with no tensor input, whose values
// follow from the ints alone; computed on the host and uploaded.
at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory);
at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory);
std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse);
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts);
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim);
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts);

}  // namespace torch_tpu::device
