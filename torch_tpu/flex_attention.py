"""FlexAttention on tpu.

`torch.nn.attention.flex_attention.flex_attention` checks its inputs'
device against a fixed set (`_validate_device`: cuda, cpu, xpu, hpu, mps in
torch 2.13 to 2.15), with no registry or hook a backend could extend, so it
raises ValueError for tpu tensors, eagerly and under torch.compile alike
(Dynamo runs the check while tracing). Everything after that check is
device-neutral: the `flex_attention` higher-order operator (HOP), whose
dense implementation is ordinary ATen ops, its autograd, and BlockMask
(`create_block_mask(..., device="tpu")` works as is).

`flex_attention` here is the same call for tpu tensors: it validates the
arguments as torch's does, minus the device list, and calls the HOP, so
torch.compile traces one HOP node that the tpu backend runs like any graph.
For other devices it is torch's function, unchanged.

Two kernels make the HOPs replay inside captured programs: the forward and
backward HOPs' tpu kernels are torch's own dense ones (their
CompositeExplicitAutograd kernels), run with scalar constants made on the
device. torch's dense kernels create them with `torch.tensor(-inf,
device=...)` and `torch.tensor(0)`, host-to-device copies that end a
captured program (a compiled flex_attention was traced again on every
call); `torch.full` on the device is the same value, written in the
program.
"""

import math

import torch
from torch.nn.attention import flex_attention as _torch_flex
from torch.overrides import TorchFunctionMode

__all__ = ["flex_attention"]


class _ConstantsOnDevice(TorchFunctionMode):
    """`torch.tensor(number)` for a CPU or tpu scalar becomes `torch.full`
    on the tpu device: inside a flex HOP kernel every tensor is on that
    device, and a CPU scalar operand would be copied there anyway."""

    def __init__(self, device):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            func is torch.tensor
            and len(args) == 1
            and isinstance(args[0], (bool, int, float))
            and set(kwargs) <= {"dtype", "device"}
            and (kwargs.get("device") is None or torch.device(kwargs["device"]).type == "tpu")
        ):
            return torch.full((), args[0], dtype=kwargs.get("dtype"), device=self.device)
        return func(*args, **kwargs)


_registered = False


def _register_tpu_kernels():
    global _registered
    if _registered:
        return
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention as forward_hop
    from torch._higher_order_ops.flex_attention import flex_attention_backward as backward_hop

    for hop in (forward_hop, backward_hop):
        dense = hop.py_kernels[DispatchKey.CompositeExplicitAutograd]

        def tpu_kernel(query, *args, _dense=dense, **kwargs):
            with _ConstantsOnDevice(query.device):
                return _dense(query, *args, **kwargs)

        hop.py_impl(DispatchKey.PrivateUse1)(tpu_kernel)
    _registered = True


def _call_operator(*args):
    from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_hop

    return flex_attention_hop(*args)


def _validate(query, key, value, block_mask, enable_gqa):
    """torch's checks of flex_attention's arguments other than its device
    list, with its exception types and messages."""
    from torch.nn.attention._utils import _validate_sdpa_input

    if query.is_nested or key.is_nested or value.is_nested:
        raise NotImplementedError("flex_attention does not support NestedTensor inputs")
    _validate_sdpa_input(query, key, value, allow_lowp_kv=True)
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "Expect query and key/value to have the same embedding dimension "
            f"but got E={query.size(-1)} and E={key.size(-1)}."
        )
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(
            "Expect query and key/value to have the same number of heads "
            f"but got Hq={query.size(-3)} and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA."
        )
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(
            "Expect number of query heads to be a multiple of kv heads for GQA "
            f"but got Hq={query.size(1)} and Hkv={key.size(1)}."
        )
    if query.size(0) != key.size(0) and (block_mask is None or block_mask.kv_num_blocks.size(0) != query.size(0)):
        raise ValueError(
            "Expect query and key/value to have the same batch size, or a block_mask with the query's batch size, "
            f"but got Bq={query.size(0)}, Bkv={key.size(0)}."
        )
    if block_mask is None:
        return
    if block_mask.mask_mod is getattr(_torch_flex, "_sliced_mask_mod_error", None):
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    large = _torch_flex._LARGE_SPARSE_BLOCK_SIZE
    lengths = (query.size(-2), key.size(-2))
    if tuple(block_mask.BLOCK_SIZE) != (large, large) and tuple(block_mask.shape[-2:]) != lengths:
        check_shape = getattr(_torch_flex, "_validate_block_mask_shape", None)
        if check_shape is not None:  # torch 2.14 and later: RuntimeError
            check_shape(query, key, *lengths, *block_mask.shape[-2:])
        raise ValueError(  # torch 2.13's
            f"block_mask was created for block_mask.shape={block_mask.shape} but got "
            f"q_len={lengths[0]} and kv_len={lengths[1]}."
        )
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(
            "Expect q/k/v and block_mask to be on the same device "
            f"but got {query.device} and {block_mask.kv_num_blocks.device}."
        )


def flex_attention(
    query,
    key,
    value,
    score_mod=None,
    block_mask=None,
    scale=None,
    enable_gqa=False,
    return_lse=False,
    kernel_options=None,
    *,
    return_aux=None,
):
    """`torch.nn.attention.flex_attention.flex_attention`, which also takes
    tpu tensors. Returns what torch's returns for the same arguments: the
    output, with `return_aux` an `AuxOutput` (logsumexp, max scores) too."""
    if query.device.type != "tpu":
        return _torch_flex.flex_attention(
            query,
            key,
            value,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=scale,
            enable_gqa=enable_gqa,
            return_lse=return_lse,
            kernel_options=kernel_options,
            return_aux=return_aux,
        )
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux.")
    _validate(query, key, value, block_mask, enable_gqa)
    _register_tpu_kernels()
    from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_hop

    if score_mod is None:
        score_mod = _torch_flex._identity
    if block_mask is None:
        block_mask = _torch_flex._create_empty_block_mask(query, key)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    if torch.compiler.is_dynamo_compiling():
        # As torch's: head count and head size are static in the graph.
        for x in (query, key, value):
            torch._dynamo.mark_static(x, -3)
            torch._dynamo.mark_static(x, -1)
    kernel_options = _torch_flex._apply_kernel_options(query, key, value, return_lse, kernel_options, return_aux)
    args = (query, key, value, score_mod, block_mask.as_tuple(), scale, kernel_options)
    if torch.compiler.is_dynamo_compiling():
        out, lse, max_scores = flex_attention_hop(*args)
    else:
        # Eagerly, as torch's: the operator goes through Dynamo (its eager
        # backend), which makes the tensors score_mod and mask_mod close over
        # inputs of the operator, so gradients reach them.
        from torch._higher_order_ops.utils import setup_compilation_env

        with setup_compilation_env() as backend:
            out, lse, max_scores = torch.compile(_call_operator, backend=backend, fullgraph=True)(*args)
    # The dense kernels give the statistics in base 2 (the fused kernels'
    # convention); torch's flex_attention returns them in base e.
    ln2 = math.log(2.0)
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = lse * ln2 if want_lse and lse.numel() > 0 else None
    max_scores = max_scores * ln2 if want_max and max_scores.numel() > 0 else None
    if return_aux is not None:
        return out, _torch_flex.AuxOutput(lse=lse, max_scores=max_scores)
    if return_lse:
        return out, lse
    return out
