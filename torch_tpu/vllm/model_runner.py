"""vLLM's model runner for tpu.

vLLM's CPU runner keeps the whole step's bookkeeping on the host (its
device-side buffers are its host buffers), which is what we want on the
host side; what differs: the model and its paged KV cache are tpu tensors,
the step's token ids and positions are copied to tpu before the forward, and
the sampled rows' logits are copied back for vLLM's sampler.

Decode steps (every request one token) run as ONE captured program per
batch-size bucket, as vLLM's CUDA graphs do on GPU: the batch is padded to
the next bucket (powers of two up to max_num_seqs), and the bucket's first
step records the forward and the logits of every row into one program
(csrc/exec/graph_capture.h), whose later steps bind the step's buffers and
replay it: nothing is lowered, no program text is built or hashed. The KV
caches are inputs the program writes in place (their buffers are donated);
the weights are inputs it only reads. Prefill and mixed steps run eagerly
(DeferAndFuse). TORCH_TPU_VLLM_CAPTURE_DECODE=0 runs decode steps eagerly too."""

import collections
import itertools
import os

import torch
from vllm.logger import init_logger
from vllm.v1.kv_cache_interface import AttentionSpec
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

import torch_tpu

from . import attention
from .attention import new_kv_cache

logger = init_logger(__name__)

EAGER_MODE_ENV = "TORCH_TPU_VLLM_EAGER_MODE"
CAPTURE_DECODE_ENV = "TORCH_TPU_VLLM_CAPTURE_DECODE"

# Decode steps of this process, per bucket: {"replayed": {bucket: steps},
# "captured": {bucket: steps}, "eager": steps}; tests/integrations/vllm_jobs.py reads it.
decode_steps = {"replayed": collections.Counter(), "captured": collections.Counter(), "eager": 0}


def decode_buckets(max_num_seqs: int) -> list[int]:
    """Powers of two below max_num_seqs, then max_num_seqs: at most twice
    the rows a step needs, and one capture (one compile) per bucket."""
    sizes = list(itertools.takewhile(lambda b: b < max_num_seqs, (1 << k for k in itertools.count())))
    return sizes + [max_num_seqs]


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
        self.capture_decode = os.environ.get(CAPTURE_DECODE_ENV, "1") != "0"
        self.decode_buckets = decode_buckets(self.scheduler_config.max_num_seqs)
        self._decode_programs = {}  # bucket -> CapturedProgram, or None where capture was refused
        self._program_inputs = None  # weights, buffers and KV caches: the inputs every decode program reads
        self._forward_made_logits = False

    def load_model(self, load_dummy_weights: bool = False) -> None:
        # vLLM's loader places the weights on device_config's device: tpu.
        super().load_model(load_dummy_weights)
        model_logits = self._model_logits = self.model.compute_logits

        def host_logits(hidden_states):
            if self._forward_made_logits:  # a captured decode step returned the sampled rows' logits
                self._forward_made_logits = False
                return hidden_states
            # vLLM's sampler, its penalties and grammar masks run on the host.
            return model_logits(hidden_states.to(self.tpu)).cpu()

        self.model.compute_logits = host_logits

    def _model_forward(self, input_ids=None, positions=None, intermediate_tensors=None, inputs_embeds=None, **kwargs):
        def to_tpu(t):
            return None if t is None else t.to(self.tpu)

        # The mode is per thread: set it on the thread that runs the steps.
        if torch_tpu.get_eager_mode() != self.eager_mode:
            torch_tpu.set_eager_mode(self.eager_mode)
        metadata = self._step_attention_metadata()
        bucket = self._decode_bucket(metadata, input_ids, positions, intermediate_tensors, inputs_embeds, kwargs)
        if bucket is not None:
            return self._decode_step(metadata, input_ids, positions, bucket)
        if metadata and metadata[0].decode_only:
            decode_steps["eager"] += 1
        for m in metadata:  # before the forward's first op: an upload inside it would split its program
            if m.slot_mapping is None:
                m.upload(self.tpu)
        return super()._model_forward(
            input_ids=to_tpu(input_ids),
            positions=to_tpu(positions),
            intermediate_tensors=intermediate_tensors,
            inputs_embeds=to_tpu(inputs_embeds),
            **kwargs,
        )

    @staticmethod
    def _step_attention_metadata() -> list[attention.TpuPagedAttentionMetadata]:
        """The step's metadata objects (one per KV cache group; vLLM maps every layer of a group to its group's)."""
        from vllm.forward_context import get_forward_context, is_forward_context_available

        if not is_forward_context_available():
            return []
        per_layer = get_forward_context().attn_metadata
        if not isinstance(per_layer, dict):  # None (a dummy run), or micro-batches: eager
            return []
        unique = {id(m): m for m in per_layer.values()}
        return list(unique.values())

    def _decode_bucket(self, metadata, input_ids, positions, intermediate_tensors, inputs_embeds, kwargs):
        """The bucket a step runs in as a captured program, or None to run it eagerly."""
        if not self.capture_decode or not metadata or intermediate_tensors is not None or inputs_embeds is not None:
            return None
        if kwargs or input_ids is None or positions is None or positions.dim() != 1:  # multimodal, M-RoPE: eager
            return None
        if not all(isinstance(m, attention.TpuPagedAttentionMetadata) and m.decode_only for m in metadata):
            return None
        if self.num_prompt_logprobs:  # they read every row's hidden state
            return None
        n = metadata[0].num_actual_tokens
        bucket = next((b for b in self.decode_buckets if b >= n), None)
        if bucket is None or self._decode_programs.get(bucket, True) is None:
            return None
        return bucket

    def _decode_step(self, metadata, input_ids, positions, bucket):
        """Runs a decode step as its bucket's captured program (capturing it
        the first time); returns the logits of every row, on the host, in
        place of the hidden states (vLLM then takes the sampled rows)."""
        n = metadata[0].num_actual_tokens
        pad = bucket - n
        ids = torch.cat([input_ids[:n], input_ids.new_zeros(pad)]).to(self.tpu)
        pos = torch.cat([positions[:n], positions.new_zeros(pad)]).to(self.tpu)
        for m in metadata:
            m.upload(self.tpu, rows=bucket)
        if self._program_inputs is None:
            self._program_inputs = self._weights_and_caches()
        inputs = [ids, pos] + [t for m in metadata for t in m.device_tensors()] + self._program_inputs
        program = self._decode_programs.get(bucket)
        out = program.replay(inputs) if program is not None else None
        if out is not None:
            decode_steps["replayed"][bucket] += 1
            logits = out[0]
        else:
            decode_steps["captured"][bucket] += 1
            logits = self._capture_decode(bucket, inputs, ids, pos)
        self._forward_made_logits = True
        return logits.cpu()

    def _capture_decode(self, bucket, inputs, ids, pos):
        device = self.tpu.index or 0
        previous_mode = torch_tpu._C._get_eager_mode()
        torch_tpu._C._set_eager_mode("defer_and_fuse")  # the capture records one pending program
        try:
            torch_tpu._C._capture_begin(device)
            try:
                logits = self._model_logits(self.model(input_ids=ids, positions=pos))
            except BaseException:
                torch_tpu._C._capture_abort()
                raise
            program, why = torch_tpu._C._capture_end(device, inputs, [logits])
        finally:
            torch_tpu._C._set_eager_mode(previous_mode)
        if program is None:
            logger.warning("tpu: decode steps of %d rows run eagerly: %s", bucket, why)
        self._decode_programs[bucket] = program
        return logits

    def _weights_and_caches(self) -> list[torch.Tensor]:
        """Every tpu tensor the forward reads besides the step's own: the
        model's parameters and buffers, and the KV caches, each once."""
        tensors = itertools.chain(self.model.parameters(), self.model.buffers(), self.kv_caches)
        unique = {}
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device.type == "tpu":
                unique.setdefault(id(t), t)
        return list(unique.values())

    def initialize_kv_cache_tensors(self, kv_cache_config, kernel_block_sizes, kv_cache_allocation_context=None):
        """One tpu tensor per attention layer in our layout (attention.new_kv_cache),
        in place of vLLM's byte buffer with per-layer strided views."""
        num_blocks = kv_cache_config.num_blocks
        # Decode programs read the caches they were captured with: new caches, new captures.
        self._decode_programs.clear()
        self._program_inputs = None
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
