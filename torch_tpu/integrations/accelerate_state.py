"""accelerate's process state on tpu: the device a script trains on.

accelerate (1.15) picks its device and its torchrun backend from fixed lists
(mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron) in `PartialState`. On a
machine whose accelerator is tpu it therefore trains on CPU, while
transformers' `TrainingArguments` (which knows tpu) has moved the model to
tpu:0: the first batch meets the model on another device. Under torchrun it
starts no process group at all, so each rank trains alone.

Here `PartialState` learns tpu as it knows those devices:
- one process: `default_device` is the current tpu device;
- under torchrun (LOCAL_RANK set): the backend is `tpu_dist` (the one
  transformers maps device "tpu" to) and each process takes tpu:LOCAL_RANK
  (torch_tpu gives a process LOCAL_WORLD_SIZE devices; with fewer, a clear
  error before the process group starts). The distributed type
  is MULTI_GPU, accelerate's "one accelerator per process, DDP over a c10d
  backend" type: its code for that type (DDP with device_ids, barriers, RNG
  broadcast on `state.device`, bf16 autocast) is device-generic once the
  device is tpu, which is what the other devices' types add besides.

Only when tpu is the current accelerator and the script did not ask for CPU;
otherwise accelerate's own code runs unchanged.
"""

import functools
import os

import torch

from .accelerate import tpu_is_the_accelerator


def _torchrun_rank_on_tpu(cpu, sagemaker_dp):
    return not cpu and not sagemaker_dp and int(os.environ.get("LOCAL_RANK", -1)) != -1 and tpu_is_the_accelerator()


def _check_local_device():
    """accelerate's DDP runs local rank r on device r (device_ids=[r]), so a
    process needs LOCAL_RANK + 1 devices; say so before the process group
    starts rather than fail in DDP's first forward."""
    local_rank, count = int(os.environ["LOCAL_RANK"]), torch.tpu.device_count()
    if local_rank >= count:
        raise RuntimeError(
            f"accelerate runs local rank {local_rank} on tpu:{local_rank}, but this process has {count} tpu "
            "device(s): leave TORCH_TPU_NUM_DEVICES unset under torchrun (each process then gets "
            "LOCAL_WORLD_SIZE devices) or set it to at least LOCAL_WORLD_SIZE"
        )


def _patch_state(state):
    partial = state.PartialState
    if getattr(partial, "_torch_tpu", False):
        return
    from accelerate.utils import DistributedType

    prepare_backend = partial._prepare_backend
    set_device = partial.set_device
    default_device = partial.default_device.fget

    @functools.wraps(prepare_backend)
    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        found, distributed_type = prepare_backend(self, cpu, sagemaker_dp, backend)
        if distributed_type == DistributedType.NO and _torchrun_rank_on_tpu(cpu, sagemaker_dp):
            _check_local_device()
            return backend or "tpu_dist", DistributedType.MULTI_GPU
        return found, distributed_type

    @functools.wraps(set_device)
    def _set_device(self):
        if self.device is None and self.distributed_type == DistributedType.MULTI_GPU and tpu_is_the_accelerator():
            self.device = torch.device("tpu", self.local_process_index % torch.tpu.device_count())
            torch.tpu.set_device(self.device)
            return
        set_device(self)

    @functools.wraps(default_device)
    def _default_device(self):
        if tpu_is_the_accelerator():
            return torch.device("tpu", torch.tpu.current_device())
        return default_device(self)

    partial._prepare_backend = _prepare_backend
    partial.set_device = _set_device
    partial.default_device = property(_default_device)
    partial._torch_tpu = True


def install(when_imported):
    when_imported("accelerate.state", _patch_state)
