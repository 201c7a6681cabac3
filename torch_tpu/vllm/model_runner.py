"""vLLM's model runner for tpu.

vLLM's CPU runner keeps the whole step's bookkeeping on the host (its
device-side buffers are its host buffers), which is what we want on the
host side; what differs: the model and its paged KV cache are tpu tensors,
the step's token ids and positions are copied to tpu before the forward, and
the sampled rows' logits are copied back for vLLM's sampler."""

import os

import torch
from vllm.logger import init_logger
from vllm.v1.kv_cache_interface import AttentionSpec
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

import torch_tpu

from .attention import new_kv_cache

logger = init_logger(__name__)

EAGER_MODE_ENV = "TORCH_TPU_VLLM_EAGER_MODE"


class TpuModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, device):
        super().__init__(vllm_config, device)
        self.tpu = torch.device("tpu", torch.tpu.current_device())
        # DeferAndFuse: a step's ops, from the KV cache writes to the
        # sampled rows' logits, become one program, run when the host reads
        # the logits; a step of a shape seen before replays it from the cache.
        self.eager_mode = os.environ.get(EAGER_MODE_ENV, "defer_and_fuse")
        # The logits are sampled on the host: with vLLM's CPU sampler, whose
        # seeded streams (per-token SplitMix64 Gumbel noise) are the CPU
        # platform's, rather than the one vLLM picks for an unknown platform.
        top_k_top_p = self.sampler.topk_topp_sampler
        top_k_top_p.forward = top_k_top_p.forward_cpu

    def load_model(self, load_dummy_weights: bool = False) -> None:
        # vLLM's loader places the weights on device_config's device: tpu.
        super().load_model(load_dummy_weights)
        model_logits = self.model.compute_logits

        def host_logits(hidden_states):
            # vLLM's sampler, its penalties and grammar masks run on the host.
            return model_logits(hidden_states.to(self.tpu)).cpu()

        self.model.compute_logits = host_logits

    def _model_forward(self, input_ids=None, positions=None, intermediate_tensors=None, inputs_embeds=None, **kwargs):
        def to_tpu(t):
            return None if t is None else t.to(self.tpu)

        # The mode is per thread: set it on the thread that runs the steps.
        if torch_tpu.get_eager_mode() != self.eager_mode:
            torch_tpu.set_eager_mode(self.eager_mode)
        return super()._model_forward(
            input_ids=to_tpu(input_ids),
            positions=to_tpu(positions),
            intermediate_tensors=intermediate_tensors,
            inputs_embeds=to_tpu(inputs_embeds),
            **kwargs,
        )

    def initialize_kv_cache_tensors(self, kv_cache_config, kernel_block_sizes, kv_cache_allocation_context=None):
        """One tpu tensor per attention layer in our layout (attention.new_kv_cache),
        in place of vLLM's byte buffer with per-layer strided views."""
        num_blocks = kv_cache_config.num_blocks
        kv_caches = {}
        for group in kv_cache_config.kv_cache_groups:
            spec = group.kv_cache_spec
            if not isinstance(spec, AttentionSpec):
                raise NotImplementedError(f"tpu serves attention KV caches only, not {type(spec).__name__}")
            for layer_name in group.layer_names:
                if layer_name in self.shared_kv_cache_layers:
                    continue
                kv_caches[layer_name] = new_kv_cache(spec, num_blocks, self.tpu)
        for layer_name, target_layer_name in self.shared_kv_cache_layers.items():
            kv_caches[layer_name] = kv_caches[target_layer_name]
        bind_kv_cache(
            kv_caches,
            self.compilation_config.static_forward_context,
            self.kv_caches,
            kv_cache_groups=kv_cache_config.kv_cache_groups,
        )
        return kv_caches

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        # Stale rows of a reused block are masked out by position, never read.
        pass
