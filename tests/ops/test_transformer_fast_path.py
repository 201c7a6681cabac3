"""The Transformer inference fast path on tpu against CPU.

In eval under no_grad, nn.TransformerEncoderLayer calls
aten::_transformer_encoder_layer_fwd and nn.MultiheadAttention
aten::_native_multi_head_attention (PrivateUse1 is a fast-path device);
nn.TransformerEncoder with a key padding mask runs its layers on a nested
tensor and pads the result with zeros. tpu runs ATen's composite
implementations on device ops (csrc/device/transformer_kernels.cpp); every
result must equal CPU's as a user sees it (padded positions included), in
each eager mode and compiled. Each test also checks that the fast path ran.
"""

import copy

import pytest
import torch
from reference import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu

ATOL, RTOL = 2e-5, 2e-5  # float32, a few matmuls and layer norms deep
D_MODEL, HEADS, FFN = 8, 2, 16


class OpsCalled(TorchDispatchMode):
    """The ATen overload packets a block calls (the top level only)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def padding_mask(batch, seq):
    """Left-aligned sequences of lengths seq, seq - 1, ... (True pads)."""
    lengths = torch.tensor([max(seq - i, 1) for i in range(batch)])
    return torch.arange(seq).unsqueeze(0) >= lengths.unsqueeze(1)


def run_both(model, *inputs, **kwargs):
    """The model on CPU and a copy on tpu, in eval under no_grad, recording the
    ops each called."""
    on_tpu = copy.deepcopy(model).to("tpu")
    results = []
    for m, device in ((model, "cpu"), (on_tpu, "tpu")):
        args = [t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs]
        kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        ops = OpsCalled()
        with torch.no_grad(), ops:
            results.append((m(*args, **kw), ops.names))
    return results


class SelfAttention(torch.nn.Module):
    """Self-attention: the fast path needs query, key and value to be one tensor."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()

    def forward(self, x, **kwargs):
        return self.mha(x, x, x, **kwargs)


def encoder_layer(norm_first, activation, batch_first=True):
    return torch.nn.TransformerEncoderLayer(
        D_MODEL, HEADS, FFN, dropout=0.0, activation=activation, batch_first=batch_first, norm_first=norm_first
    ).eval()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_cpu(norm_first, activation, batch_first, masked, mode):
    layer = encoder_layer(norm_first, activation, batch_first)
    x = torch.randn((3, 5, D_MODEL) if batch_first else (5, 3, D_MODEL))
    kwargs = {"src_key_padding_mask": padding_mask(3, 5)} if masked else {}
    with torch_tpu.eager_mode(mode):
        (expected, cpu_ops), (actual, tpu_ops) = run_both(layer, x, **kwargs)
        assert_close(actual, expected, ATOL, RTOL)
    # The fast path needs batch_first; otherwise both run the module's Python
    # (and scaled_dot_product_attention picks a kernel per device).
    assert ("_transformer_encoder_layer_fwd" in tpu_ops) == batch_first
    if batch_first:
        assert tpu_ops == cpu_ops


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("final_norm", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_with_padding_mask_matches_cpu(norm_first, activation, final_norm, mode):
    # Without norm_first the encoder runs its layers on a nested tensor and
    # pads the result with zeros: padded positions are zeros (or the final
    # norm of zeros) on CPU, and must be on tpu.
    layer = encoder_layer(norm_first, activation)
    norm = torch.nn.LayerNorm(D_MODEL) if final_norm else None
    encoder = torch.nn.TransformerEncoder(layer, 2, norm=norm, enable_nested_tensor=True).eval()
    x = torch.randn(4, 6, D_MODEL)
    mask = padding_mask(4, 6)
    with torch_tpu.eager_mode(mode):
        (expected, cpu_ops), (actual, tpu_ops) = run_both(encoder, x, src_key_padding_mask=mask)
        assert_close(actual, expected, ATOL, RTOL)
    assert tpu_ops == cpu_ops
    assert ("_nested_tensor_from_mask" in tpu_ops) == (not norm_first)
    if not norm_first and not final_norm:
        assert not actual.cpu()[mask].any()


def test_encoder_without_mask_check_matches_cpu():
    layer = encoder_layer(False, "relu")
    encoder = torch.nn.TransformerEncoder(layer, 2, mask_check=False).eval()
    x = torch.randn(3, 4, D_MODEL)
    (expected, _), (actual, tpu_ops) = run_both(encoder, x, src_key_padding_mask=padding_mask(3, 4))
    assert_close(actual, expected, ATOL, RTOL)
    assert "_nested_tensor_from_mask_left_aligned" not in tpu_ops


def test_encoder_with_gaps_in_the_mask_matches_cpu():
    # A mask that is not left-aligned keeps the dense path, mask per layer.
    layer = encoder_layer(False, "gelu")
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    x = torch.randn(2, 5, D_MODEL)
    mask = torch.tensor([[False, True, False, False, True], [False, False, False, True, True]])
    (expected, cpu_ops), (actual, tpu_ops) = run_both(encoder, x, src_key_padding_mask=mask)
    assert_close(actual, expected, ATOL, RTOL)
    assert tpu_ops == cpu_ops and "_nested_tensor_from_mask" not in tpu_ops


def test_encoder_layer_with_attention_and_padding_masks_matches_cpu():
    layer = encoder_layer(False, "relu")
    x = torch.randn(3, 5, D_MODEL)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)
    (expected, _), (actual, tpu_ops) = run_both(layer, x, src_mask=causal, src_key_padding_mask=padding_mask(3, 5))
    assert_close(actual, expected, ATOL, RTOL)
    assert "_transformer_encoder_layer_fwd" in tpu_ops


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("masks", ["none", "padding", "attention", "both"])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_matches_cpu(need_weights, average, masks, mode):
    mha = SelfAttention().eval()
    x = torch.randn(3, 5, D_MODEL)
    kwargs = {"need_weights": need_weights, "average_attn_weights": average}
    if masks in ("padding", "both"):
        kwargs["key_padding_mask"] = padding_mask(3, 5)
    if masks in ("attention", "both"):
        kwargs["attn_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(5) == float("-inf")
    with torch_tpu.eager_mode(mode):
        (expected, _), (actual, tpu_ops) = run_both(mha, x, **kwargs)
        assert_close(list(actual[:1]), list(expected[:1]), ATOL, RTOL)
        if need_weights:
            assert_close(actual[1], expected[1], ATOL, RTOL)
        else:
            assert actual[1] is None and expected[1] is None
    assert "_native_multi_head_attention" in tpu_ops


def test_multihead_attention_with_float_padding_mask_matches_cpu():
    mha = SelfAttention().eval()
    x = torch.randn(2, 4, D_MODEL)
    mask = torch.zeros(2, 4).masked_fill(padding_mask(2, 4), float("-inf"))
    (expected, cpu_ops), (actual, tpu_ops) = run_both(mha, x, key_padding_mask=mask)
    assert_close(list(actual), list(expected), ATOL, RTOL)
    assert tpu_ops == cpu_ops


@pytest.mark.parametrize("mask_type", [0, 1, 2])
def test_masked_softmax_matches_cpu(mask_type):
    scores = torch.randn(2, 2, 4, 4)
    shapes = {0: (4, 4), 1: (2, 4), 2: (2, 2, 4, 4)}
    mask = torch.rand(shapes[mask_type]) > 0.6
    expected = torch._masked_softmax(scores, mask, 3, mask_type)
    actual = torch._masked_softmax(scores.to("tpu"), mask.to("tpu"), 3, mask_type)
    assert_close(actual, expected)  # a row masked entirely is NaN on both


def test_transform_bias_rescale_qkv_matches_cpu():
    qkv, bias = torch.randn(2, 3, 3 * D_MODEL), torch.randn(3 * D_MODEL)
    expected = torch._transform_bias_rescale_qkv(qkv, bias, HEADS)
    actual = torch._transform_bias_rescale_qkv(qkv.to("tpu"), bias.to("tpu"), HEADS)
    assert_close(list(actual), list(expected))


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation_matches_cpu(use_gelu):
    bias, a, b = torch.randn(5), torch.randn(3, 4), torch.randn(4, 5)
    expected = torch._addmm_activation(bias, a, b, use_gelu=use_gelu)
    actual = torch._addmm_activation(bias.to("tpu"), a.to("tpu"), b.to("tpu"), use_gelu=use_gelu)
    assert_close(actual, expected)


def test_nested_padding_round_trip_matches_cpu():
    x = torch.randn(3, 4, 5)
    keep = ~padding_mask(3, 4)
    expected = torch._nested_tensor_from_mask(x, keep).to_padded_tensor(-1.0, (3, 6, 5))
    actual = torch._nested_tensor_from_mask(x.to("tpu"), keep.to("tpu")).to_padded_tensor(-1.0, (3, 6, 5))
    assert_close(actual, expected)


def raised(fn, device):
    try:
        fn(device)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e)
    return None


def test_bad_masks_raise_as_on_cpu():
    x = torch.randn(2, 3, 4)
    cases = [
        lambda d: torch._nested_tensor_from_mask(x.to(d), torch.ones(2, 3, device=d)),  # not bool
        lambda d: torch._nested_tensor_from_mask(x.to(d), torch.ones(2, 4, dtype=torch.bool, device=d)),
        lambda d: torch._nested_tensor_from_mask(  # a gap
            x.to(d), torch.tensor([[True, False, True], [True, True, False]], device=d)
        ),
        lambda d: torch._masked_softmax(torch.randn(2, 2, 3, 3, device=d), torch.ones(3, 3, device=d), 3, 0),
        lambda d: torch._masked_softmax(
            torch.randn(2, 2, 3, 3, device=d), torch.ones(2, 4, dtype=torch.bool, device=d), 3, 1
        ),
    ]
    for case in cases:
        expected = raised(case, "cpu")
        assert expected is not None
        assert raised(case, "tpu") is expected


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_compiled_encoder_matches_cpu(norm_first, masked):
    # Compiled, the encoder's mask check is not traceable and it keeps the
    # dense path; enable_nested_tensor=False makes eager CPU take it too.
    layer = encoder_layer(norm_first, "gelu")
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(3, 5, D_MODEL)
    kwargs = {"src_key_padding_mask": padding_mask(3, 5)} if masked else {}
    on_tpu = copy.deepcopy(encoder).to("tpu")
    with torch.no_grad():
        expected = encoder(x, **kwargs)
        compiled = torch.compile(on_tpu, backend="tpu")
        tpu_kwargs = {k: v.to("tpu") for k, v in kwargs.items()}
        actual = compiled(x.to("tpu"), **tpu_kwargs)
        again = compiled(x.to("tpu") * 2, **tpu_kwargs)  # replays the captured program
        expected_again = encoder(x * 2, **kwargs)
    assert_close(actual, expected, ATOL, RTOL)
    assert_close(again, expected_again, ATOL, RTOL)


@pytest.mark.parametrize("need_weights", [True, False])
def test_compiled_multihead_attention_matches_cpu(need_weights):
    mha = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
    x = torch.randn(2, 5, D_MODEL)
    mask = padding_mask(2, 5)
    on_tpu = copy.deepcopy(mha).to("tpu")
    with torch.no_grad():
        expected = mha(x, x, x, key_padding_mask=mask, need_weights=need_weights)
        compiled = torch.compile(
            lambda q, m: on_tpu(q, q, q, key_padding_mask=m, need_weights=need_weights), backend="tpu"
        )
        actual = compiled(x.to("tpu"), mask.to("tpu"))
    assert_close(actual[0], expected[0], ATOL, RTOL)
    if need_weights:
        assert_close(actual[1], expected[1], ATOL, RTOL)
