"""vLLM's worker for tpu: vLLM's CPU worker (host memory accounting, process
group setup, warm-up) with our model runner in place of the CPU one."""

from contextlib import nullcontext

import torch
from vllm.v1.worker.cpu_worker import CPUWorker

from .model_runner import TpuModelRunner


class TpuWorker(CPUWorker):
    def init_device(self):
        super().init_device()
        # The CPU worker made its runner with the host as its device: the
        # bookkeeping stays there; the model and KV cache go to tpu.
        self.model_runner = TpuModelRunner(self.vllm_config, torch.device("cpu"))

    def _should_warm_up_model(self) -> bool:
        # Prefill runs eagerly, each decode bucket is captured on its first
        # step (TpuModelRunner), and the KV cache size is set by the
        # platform: a warm-up run would only compile programs of shapes
        # the requests may never have.
        return False

    def _maybe_get_memory_pool_context(self, tag: str):
        # vLLM's sleep-mode memory pools are CUDA's; tpu has none.
        return nullcontext()
