// torch.tpu.set_sync_debug_mode, as torch.cuda's: whether an operation that
// makes the host wait for the device to read its data (`.cpu()`, `.item()`,
// printing, a data-dependent size such as nonzero's) passes silently (0,
// "default"), warns (1, "warn") or raises (2, "error"). An explicit wait
// the user asks for (torch.tpu.synchronize, an event's or a stream's) is
// never reported, as on CUDA.
#pragma once

namespace torch_tpu::device {

// 0, 1 or 2; anything else raises std::invalid_argument.
void set_sync_debug_mode(int mode);
int sync_debug_mode();

// Called where a host read is about to wait for the device: warns or raises
// (c10::Error, before any copy starts) as the mode says.
void warn_or_error_on_sync();

}  // namespace torch_tpu::device
