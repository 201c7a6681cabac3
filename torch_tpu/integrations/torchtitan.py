"""TorchTitan on tpu (docs/torchtitan.md).

TorchTitan finds the device by itself (`torch._utils._get_available_device_type()`
is "tpu", its process groups use `tpu_dist`, PyTorch's backend for the
device); what it cannot do unaided is FlexAttention, the attention of its
language models (0.3.0 dropped SDPA for them), because
`torch.nn.attention.flex_attention` refuses tpu tensors (torch_tpu/flex_attention.py).

TorchTitan swaps components through its own override mechanism
(`--override.imports module.function`, torchtitan/config/override.py);
`tpu_flex_attention` is one: it replaces each `FlexAttention.Config` of the
model with `TpuFlexAttention.Config`, the same attention through
`torch_tpu.flex_attention` compiled for tpu. BlockMasks are TorchTitan's own
(`create_block_mask` compiled, on the positions' device).

    python -m torchtitan.train --module llama3 --config llama3_debugmodel \\
        --override.imports torch_tpu.integrations.torchtitan.tpu_flex_attention

This module imports TorchTitan, so it is imported only by whoever names it.
"""

from dataclasses import dataclass

import torch
from torchtitan.config import override
from torchtitan.models.common.attention import FlexAttention

from ..flex_attention import flex_attention

__all__ = ["TpuFlexAttention", "tpu_flex_attention"]

_compiled_flex_attention = None


def _compiled():
    # One compiled function for every layer (as TorchTitan's FlexAttention
    # keeps one), made at first use so importing this module compiles nothing.
    global _compiled_flex_attention
    if _compiled_flex_attention is None:
        _compiled_flex_attention = torch.compile(flex_attention)
    return _compiled_flex_attention


class TpuFlexAttention(FlexAttention):
    """TorchTitan's FlexAttention inner attention, computed by
    `torch_tpu.flex_attention.flex_attention` under torch.compile: same
    inputs (B, L, N, H) and BlockMask, same outputs."""

    @dataclass(kw_only=True, slots=True)
    class Config(FlexAttention.Config):
        pass

    def forward(
        self,
        q_BLNH,
        k_BLNH,
        v_BLNH,
        *,
        attention_masks,
        score_mod=None,
        scale=None,
        enable_gqa=False,
        out_transform=None,
        **kwargs,
    ):
        from torch.nn.attention.flex_attention import AuxRequest, BlockMask

        if not isinstance(attention_masks, BlockMask):
            raise TypeError(f"attention_masks must be a BlockMask, got {type(attention_masks).__name__}")
        out_BNLH, aux = _compiled()(
            q_BLNH.transpose(1, 2),
            k_BLNH.transpose(1, 2),
            v_BLNH.transpose(1, 2),
            score_mod=score_mod,
            block_mask=attention_masks,
            scale=scale,
            enable_gqa=enable_gqa,
            kernel_options=self.kernel_options,
            return_aux=AuxRequest(lse=out_transform is not None),
        )
        out_BLNH = out_BNLH.transpose(1, 2)
        if out_transform is None:
            return out_BLNH
        return out_transform(out_BLNH, aux.lse.transpose(1, 2))


@override(
    target=FlexAttention.Config,
    exact=True,
    description="FlexAttention through torch_tpu.flex_attention (torch's refuses tpu tensors)",
)
def tpu_flex_attention(config: FlexAttention.Config) -> TpuFlexAttention.Config:
    return TpuFlexAttention.Config(
        block_size=config.block_size,
        kernel_options=dict(config.kernel_options),
        param_init=config.param_init,
        sharding_config=config.sharding_config,
    )
