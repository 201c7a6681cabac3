"""FlexAttention on tpu (torch_tpu/flex_attention.py): torch's
`flex_attention` refuses tpu tensors by a fixed device list; ours takes them
and equals CPU: the output and logsumexp equal torch's flex_attention on
CPU, the gradients equal CPU's scaled_dot_product_attention under the same
mask made dense, in Strict, DeferAndFuse and compiled. A compiled call
replays its captured programs instead of being traced again."""

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask
from torch.nn.attention.flex_attention import flex_attention as torch_flex_attention

import torch_tpu
import torch_tpu.compile
from torch_tpu.flex_attention import flex_attention

B, HQ, HKV, L, E = 2, 4, 2, 128, 16


def _document_causal(positions):
    """Causal attention within documents, which start where positions are 0
    (TorchTitan's packed-document mask); the mask reads a tensor it closes
    over, as TorchTitan's do."""
    document = torch.cumsum((positions == 0).int(), dim=1)

    def mask_mod(b, h, q, kv):
        return (kv <= q) & (document[b, q] == document[b, kv])

    return mask_mod


def _inputs():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, HQ, L, E, generator=g)
    k = torch.randn(B, HKV, L, E, generator=g)
    v = torch.randn(B, HKV, L, E, generator=g)
    positions = torch.cat([torch.arange(80), torch.arange(48)]).repeat(B, 1)
    positions[1] = torch.cat([torch.arange(30), torch.arange(98)])
    return q, k, v, positions


def _dense_mask(positions):
    document = torch.cumsum((positions == 0).int(), dim=1)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    return (causal & (document[:, :, None] == document[:, None, :]))[:, None]


def _run(fn, q, k, v, positions, device):
    q, k, v = (x.to(device).requires_grad_() for x in (q, k, v))
    positions = positions.to(device)
    mask = create_block_mask(_document_causal(positions), B, None, L, L, device=device)
    out, aux = fn(q, k, v, block_mask=mask, scale=0.3, enable_gqa=True, return_aux=AuxRequest(lse=True))
    (out * torch.linspace(-1, 1, E, device=device)).sum().backward()
    return [t.detach().cpu() for t in (out, aux.lse, q.grad, k.grad, v.grad)]


def _reference(q, k, v, positions):
    with torch.no_grad():
        mask = create_block_mask(_document_causal(positions), B, None, L, L, device="cpu")
        out, aux = torch_flex_attention(
            q, k, v, block_mask=mask, scale=0.3, enable_gqa=True, return_aux=AuxRequest(lse=True)
        )
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=_dense_mask(positions), scale=0.3, enable_gqa=True
    )
    (sdpa * torch.linspace(-1, 1, E)).sum().backward()
    torch.testing.assert_close(sdpa.detach(), out)  # the two CPU references agree
    return [out, aux.lse, q.grad, k.grad, v.grad]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_flex_attention_on_tpu_equals_cpu(mode):
    q, k, v, positions = _inputs()
    expected = _reference(q, k, v, positions)
    if mode == "compiled":
        torch._dynamo.reset()
        got = _run(torch.compile(flex_attention), q, k, v, positions, "tpu")
    else:
        with torch_tpu.eager_mode(mode):
            got = _run(flex_attention, q, k, v, positions, "tpu")
    for name, g, e in zip(["out", "lse", "dq", "dk", "dv"], got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_compiled_flex_attention_replays():
    """torch's dense kernels make their constants with host-to-device copies,
    which end a captured program; on tpu they are made on the device, so
    the forward and backward programs replay."""
    q, k, v, positions = _inputs()
    torch._dynamo.reset()
    compiled = torch.compile(flex_attention)
    torch_tpu.compile.reset_stats()
    first = _run(compiled, q, k, v, positions, "tpu")
    for _ in range(2):
        again = _run(compiled, q, k, v, positions, "tpu")
    stats = torch_tpu.compile.stats()
    assert stats["graphs_compiled"] == 2, stats  # forward, backward
    assert stats["graph_replays"] == 4 and stats["trace_reasons"] == {}, stats
    for g, f in zip(again, first):
        torch.testing.assert_close(g, f, rtol=0, atol=0)


def test_torch_flex_attention_refuses_tpu():
    """What torch_tpu.flex_attention exists for: torch's device list."""
    q = torch.randn(1, 1, 16, 8, device="tpu")
    with pytest.raises(ValueError, match="only supported on"):
        torch_flex_attention(q, q, q)


@pytest.mark.parametrize(
    "case",
    ["embed_dim", "heads", "gqa_heads", "three_dims", "mask_device", "mask_length"],
)
def test_bad_arguments_raise_as_cpu(case):
    def call(device):
        q = torch.randn(1, 4, 128, 8, device=device)
        k = v = torch.randn(1, 4, 128, 8, device=device)
        kwargs = {}
        if case == "embed_dim":
            k = v = torch.randn(1, 4, 128, 4, device=device)
        elif case == "heads":
            k = v = torch.randn(1, 2, 128, 8, device=device)
        elif case == "gqa_heads":
            k = v = torch.randn(1, 3, 128, 8, device=device)
            kwargs["enable_gqa"] = True
        elif case == "three_dims":
            q, k, v = q[0], k[0], v[0]
        elif case == "mask_device":
            other = "cpu" if device == "tpu" else "meta"
            kwargs["block_mask"] = create_block_mask(lambda b, h, q, kv: q >= kv, 1, None, 128, 128, device=other)
        elif case == "mask_length":
            kwargs["block_mask"] = create_block_mask(lambda b, h, q, kv: q >= kv, 1, None, 256, 256, device=device)
        return flex_attention(q, k, v, **kwargs)

    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    with pytest.raises(type(on_cpu.value)):
        call("tpu")


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_score_mod_gradients_reach_the_tensors_it_closes_over(mode):
    """A learned bias read by score_mod gets its gradient, as on CUDA (torch
    lifts the tensors score_mod closes over into the operator's inputs);
    against CPU's SDPA with the same bias as a float mask."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, HQ, L, E, generator=g) for _ in range(3))
    slope = torch.randn(HQ, generator=g)
    i = torch.arange(L)
    causal = torch.ones(L, L, dtype=torch.bool).tril()

    def run(fn, device):
        xs = [x.detach().to(device).requires_grad_() for x in (q, k, v, slope)]
        learned = xs[3]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + learned[h] * (q_idx - kv_idx) / L

        if fn is None:  # the CPU reference
            bias = (learned[:, None, None] * (i[:, None] - i[None, :]) / L).masked_fill(~causal, float("-inf"))
            out = torch.nn.functional.scaled_dot_product_attention(*xs[:3], attn_mask=bias)
        else:
            mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, B, None, L, L, device=device)
            out = fn(*xs[:3], score_mod=score_mod, block_mask=mask)
        (out * out).sum().backward()
        return [out.detach().cpu()] + [x.grad.cpu() for x in xs]

    expected = run(None, "cpu")
    if mode == "compiled":
        torch._dynamo.reset()
        got = run(torch.compile(flex_attention), "tpu")
    else:
        with torch_tpu.eager_mode(mode):
            got = run(flex_attention, "tpu")
    for name, a, e in zip(["out", "dq", "dk", "dv", "dslope"], got, expected):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
