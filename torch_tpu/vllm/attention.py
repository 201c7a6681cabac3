"""Paged attention on tpu, as torch_tpu ops, in vLLM v1's model: one flat
batch of query tokens from any mix of prefills, chunked prefills and decodes;
a block table per request; a slot per new token.

Our KV cache layout, per layer: `[2, num_blocks * block_size, num_kv_heads,
head_size]` (keys, then values), so a slot number (block * block_size +
offset, vLLM's slot mapping) is a row. Each step the new keys and values are
written to their slots (index_copy_, in place: the cache's buffer is donated
to the program that writes it), then each query token reads every slot of
its request's block table row (one gather) and masks the slots past its own
position: causal attention over prefix-cached blocks, earlier chunks and the
tokens of this step alike. The block table has a fixed width
(max_model_len / block_size), so a step's programs depend only on its token
and request counts: decode steps of one batch size replay the same programs.
"""

from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)


def new_kv_cache(spec, num_blocks: int, device: torch.device) -> torch.Tensor:
    """A layer's paged KV cache in our layout, zeroed (a masked slot is never NaN)."""
    if spec.head_size_v != spec.head_size:
        raise NotImplementedError("tpu attention needs keys and values of one head size")
    slots = num_blocks * spec.block_size
    return torch.zeros(2, slots, spec.num_kv_heads, spec.head_size, dtype=spec.dtype, device=device)


class TpuPagedAttentionBackend(AttentionBackend):
    # The layer hands us keys and values; we write the cache in forward.
    forward_includes_kv_cache_update: bool = True
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return "TORCH_TPU_PAGED"

    @staticmethod
    def get_impl_cls() -> type["TpuPagedAttentionImpl"]:
        return TpuPagedAttentionImpl

    @staticmethod
    def get_builder_cls() -> type["TpuPagedAttentionMetadataBuilder"]:
        return TpuPagedAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None) -> list[int | MultipleOf]:
        return [MultipleOf(1)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []  # any

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER


@dataclass
class TpuPagedAttentionMetadata:
    """A step's attention inputs, made on the host by the builder and
    copied to tpu by `upload` (the runner's, padded to a decode bucket, or
    the first layer's, as they are)."""

    num_actual_tokens: int
    decode_only: bool  # every request of the step has one query token
    host_slot_mapping: torch.Tensor  # [T] int64: where each new token's key and value go
    host_token_slots: torch.Tensor  # [T, S] int64: the slots of each token's request
    host_visible: torch.Tensor  # [T, S] bool: slot s holds a position <= the token's
    slot_mapping: torch.Tensor | None = None  # the same three on tpu, once uploaded
    token_slots: torch.Tensor | None = None
    visible: torch.Tensor | None = None

    def upload(self, device: torch.device, rows: int | None = None) -> None:
        """Copies the step's tensors to `device`, padded to `rows` tokens.

        A padding row writes its key and value to slot 0 and reads only
        slot 0: slot 0 is in vLLM's null block (the block pool's first,
        never given to a request), and a real token's mask never makes a
        slot of the null block visible (block table entries past a
        request's length are null, and lie past its position)."""
        n = self.num_actual_tokens
        rows = n if rows is None else rows
        pad = rows - n
        slot_mapping, token_slots, visible = self.host_slot_mapping, self.host_token_slots, self.host_visible
        if pad:
            slot_mapping = torch.cat([slot_mapping, slot_mapping.new_zeros(pad)])
            token_slots = torch.cat([token_slots, token_slots.new_zeros(pad, token_slots.shape[1])])
            padding_visible = visible.new_zeros(pad, visible.shape[1])
            padding_visible[:, 0] = True  # one visible slot: a padding row's softmax stays finite
            visible = torch.cat([visible, padding_visible])
        self.num_actual_tokens = rows
        self.slot_mapping = slot_mapping.to(device)
        self.token_slots = token_slots.to(device)
        self.visible = visible.to(device)

    def device_tensors(self) -> list[torch.Tensor]:
        return [self.slot_mapping, self.token_slots, self.visible]


class TpuPagedAttentionMetadataBuilder(AttentionMetadataBuilder[TpuPagedAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False
    ) -> TpuPagedAttentionMetadata:
        # The runner's metadata is on the host (TpuModelRunner); what the
        # layers read is made there once per step and uploaded once.
        m = common_attn_metadata
        num_reqs, num_tokens = m.num_reqs, m.num_actual_tokens
        query_start = m.query_start_loc_cpu[: num_reqs + 1].to(torch.int64)
        query_lens = query_start[1:] - query_start[:-1]
        seq_lens = m.seq_lens[:num_reqs].cpu().to(torch.int64)
        token_req = torch.repeat_interleave(torch.arange(num_reqs), query_lens)
        # A token's position: its request's context length before this step plus its index in the step's query.
        token_pos = (seq_lens - query_lens)[token_req] + (torch.arange(num_tokens) - query_start[token_req])
        block_table = m.block_table_tensor[:num_reqs].cpu().to(torch.int64)
        offsets = torch.arange(self.block_size)
        req_slots = (block_table[:, :, None] * self.block_size + offsets).flatten(1)
        num_slots = req_slots.shape[1]
        visible = torch.arange(num_slots)[None, :] <= token_pos[:, None]
        return TpuPagedAttentionMetadata(
            num_actual_tokens=num_tokens,
            decode_only=bool((query_lens == 1).all()),
            host_slot_mapping=m.slot_mapping[:num_tokens].cpu().to(torch.int64),
            host_token_slots=req_slots[token_req],
            host_visible=visible,
        )


class TpuPagedAttentionImpl(AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes: list[float] | None = None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        unsupported = {
            "alibi_slopes": alibi_slopes,
            "sliding_window": sliding_window,
            "logits_soft_cap": logits_soft_cap,
            "sinks": sinks,
        }
        named = [name for name, value in unsupported.items() if value]
        if named or kv_cache_dtype != "auto":
            raise NotImplementedError(f"tpu paged attention does not support {named or kv_cache_dtype}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def forward(
        self,
        layer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: TpuPagedAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("tpu paged attention has no fused output quantization")
        if attn_metadata is None:  # vLLM's profiling run
            return output
        if attn_metadata.slot_mapping is None:  # the step's first layer; a captured step uploads before
            attn_metadata.upload(kv_cache.device)
        n = attn_metadata.num_actual_tokens
        num_kv_heads, head_size = self.num_kv_heads, self.head_size
        if self.kv_sharing_target_layer_name is None:
            # One scatter into the whole cache (a graph input, written in
            # place), not one into each of its key and value views.
            new_kv = torch.stack((key[:n].view(n, num_kv_heads, head_size), value[:n].view(n, num_kv_heads, head_size)))
            kv_cache.index_copy_(1, attn_metadata.slot_mapping, new_kv.to(kv_cache.dtype))
        slots = attn_metadata.token_slots
        num_slots = slots.shape[1]
        groups = self.num_heads // num_kv_heads
        # [2, T, S, Hkv, D] -> keys and values [T, Hkv, S, D] of each token's request.
        kv = kv_cache.index_select(1, slots.flatten()).view(2, n, num_slots, num_kv_heads, head_size)
        keys, values = kv[0].transpose(1, 2), kv[1].transpose(1, 2)
        q = query[:n].view(n, num_kv_heads, groups, head_size).float()
        scores = torch.matmul(q, keys.float().transpose(-1, -2)) * self.scale  # [T, Hkv, G, S]
        scores = scores.masked_fill(~attn_metadata.visible[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attended = torch.matmul(probs, values.float())  # [T, Hkv, G, D]
        out = output[:n]
        out.copy_(attended.reshape(out.shape).to(out.dtype))
        return output
