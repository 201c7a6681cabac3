#pragma once

namespace torch_tpu::device {

void set_cpu_fallback(bool enabled);
bool cpu_fallback_enabled();

}  // namespace torch_tpu::device
