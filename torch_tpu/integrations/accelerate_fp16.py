"""accelerate's fp16 mixed precision on tpu, as on CUDA.

accelerate (1.15) refuses `mixed_precision="fp16"`, and with it
`TrainingArguments(fp16=True)`, on a device outside a list written into
`Accelerator.__init__` (xpu, cuda, npu, xla, mlu, musa, hpu, sdaa, mps):
"fp16 mixed precision requires a device in (...) (not 'tpu')". Past that
check it would hand the device CUDA's GradScaler (`get_grad_scaler` knows
the same list). Everything else fp16 does on CUDA is device-generic once
the scaler is the device's own: the prepared model's forward runs under
torch.autocast(device_type=state.device.type, dtype=float16),
`Accelerator.backward` scales the loss, `clip_grad_norm_` unscales, the
optimizer wrapper steps through the scaler (skipping a step whose
gradients overflowed, which the Trainer reads to hold its schedule back),
and the Trainer keeps the scaler's state in checkpoints (scaler.pt).

Here `Accelerator.__init__` runs with the state's fp16 hidden from its
device check, then does for tpu what that check's branch does for CUDA:
`native_amp` on and `torch.amp.GradScaler("tpu")` (torch_tpu lowers its
unscale and scale-update ops), with the user's GradScalerKwargs. Only for
one process or DDP over tpu_dist (accelerate's NO and MULTI_GPU types, see
accelerate_state.py); FSDP and DeepSpeed keep accelerate's refusal.
"""

import contextvars
import functools

import torch

# True while Accelerator.__init__ runs for a tpu fp16 state
_hiding_tpu_fp16 = contextvars.ContextVar("torch_tpu_hiding_tpu_fp16", default=False)


def _is_tpu_fp16(state):
    from accelerate.utils import DistributedType

    return (
        state._mixed_precision == "fp16"
        and state.device.type == "tpu"
        and state.distributed_type in (DistributedType.NO, DistributedType.MULTI_GPU)
    )


def _patch_state(state_module):
    state_class = state_module.AcceleratorState
    if getattr(state_class, "_torch_tpu_fp16", False):
        return
    mixed_precision = state_class.mixed_precision.fget

    @functools.wraps(mixed_precision)
    def _mixed_precision(self):
        if _hiding_tpu_fp16.get() and _is_tpu_fp16(self):
            return "no"
        return mixed_precision(self)

    state_class.mixed_precision = property(_mixed_precision)
    state_class._torch_tpu_fp16 = True


def _patch_accelerator(accelerator_module):
    accelerator_class = accelerator_module.Accelerator
    if getattr(accelerator_class, "_torch_tpu_fp16", False):
        return
    init = accelerator_class.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        token = _hiding_tpu_fp16.set(True)
        try:
            init(self, *args, **kwargs)
        finally:
            _hiding_tpu_fp16.reset(token)
        if _is_tpu_fp16(self.state):
            self.native_amp = True
            scaler_kwargs = self.scaler_handler.to_kwargs() if self.scaler_handler is not None else {}
            self.scaler = torch.amp.GradScaler("tpu", **scaler_kwargs)

    accelerator_class.__init__ = __init__
    accelerator_class._torch_tpu_fp16 = True


def install(when_imported):
    when_imported("accelerate.state", _patch_state)
    when_imported("accelerate.accelerator", _patch_accelerator)
