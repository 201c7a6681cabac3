"""F.scaled_dot_product_attention on tpu: the fused kernel
(_scaled_dot_product_fused_attention_overrideable and its backward, one
lowering each) where it covers the call, the math path elsewhere, against
CPU. The math path itself is tested in test_matmul.py."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, check_op
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu

FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default"
FUSED_BACKWARD = "aten._scaled_dot_product_fused_attention_overrideable_backward.default"


class OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_run_by(fn, *args):
    with OpRecorder() as rec:
        out = fn(*args)
        if out.requires_grad:
            out.sum().backward()
    return rec.ops


def qkv(batch=(2, 3), tq=5, tk=7, d=8, dv=6, dtype=torch.float32):
    return (
        torch.randn(*batch, tq, d, dtype=dtype),
        torch.randn(*batch, tk, d, dtype=dtype),
        torch.randn(*batch, tk, dv, dtype=dtype),
    )


def sdpa(**kwargs):
    def run(q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, **kwargs)

    return run


def test_sdpa_runs_the_fused_kernel_forward_and_backward():
    q, k, v = (t.to("tpu").requires_grad_() for t in qkv())
    ops = ops_run_by(sdpa(is_causal=True), q, k, v)
    assert FUSED in ops and FUSED_BACKWARD in ops
    assert not any("_safe_softmax" in op or "bmm" in op for op in ops)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"is_causal": True}, {"scale": 0.3}, {"is_causal": True, "scale": 2.0}],
    ids=["plain", "causal", "scale", "causal_scale"],
)
@pytest.mark.parametrize("batch", [(2, 3), (4,)], ids=["4d", "3d_math_path"])
def test_fused_sdpa_matches_cpu_with_gradients(kwargs, batch):
    check_op(sdpa(**kwargs), *qkv(batch=batch), grad=True)


def test_fused_sdpa_causal_with_more_keys_than_queries():
    # is_causal is the top-left aligned lower triangle, as on CPU.
    check_op(sdpa(is_causal=True), *qkv(tq=3, tk=9), grad=True)


def test_fused_sdpa_with_a_bool_mask_and_a_fully_masked_row():
    q, k, v = qkv()
    keep = torch.rand(5, 7) > 0.4
    keep[2] = False  # query 2 sees no key: zeros out, zero gradients, as the math path's _safe_softmax
    out = check_op(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=keep.to(a.device)), q, k, v, grad=True
    )
    assert torch.equal(out[:, :, 2].cpu(), torch.zeros(2, 3, 6))


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (1, 3, 1, 7)])
def test_fused_sdpa_with_a_float_mask_gets_its_broadcast_gradient(mask_shape):
    q, k, v = qkv()
    check_op(sdpa(), q, k, v, torch.randn(mask_shape), grad=True)


def test_fused_sdpa_in_bfloat16_accumulates_in_float32():
    q, k, v = qkv(dtype=torch.bfloat16)
    check_op(sdpa(is_causal=True), q, k, v, grad=True, atol=2e-2, rtol=2e-2)


def test_fused_sdpa_in_float16_is_as_accurate_as_cpu_at_the_default_precision():
    # At "medium" (tpu's default) the products of float16 inputs, upcast to
    # float32, used to be rounded to bf16 like float32 tensors: 13x CPU's error.
    torch.manual_seed(0)
    q, k, v, g = (torch.randn(2, 4, 64, 16, dtype=torch.float64) * 3 for _ in range(4))

    def run(device, dtype):
        inputs = [t.detach().to(dtype).to(device).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*inputs, is_causal=True)
        out.backward(g.to(dtype).to(device))
        return [out.detach().cpu().double()] + [t.grad.cpu().double() for t in inputs]

    exact, cpu = run("cpu", torch.float64), run("cpu", torch.float16)
    with torch_tpu.matmul_precision("medium"):  # conftest runs the other tests at "highest"
        tpu = run("tpu", torch.float16)
    for name, e, c, t in zip(("out", "dq", "dk", "dv"), exact, cpu, tpu):
        cpu_error, tpu_error = (c - e).abs().max().item(), (t - e).abs().max().item()
        assert tpu_error <= 2 * cpu_error + 1e-3, (name, tpu_error, cpu_error)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("mask_shape", [None, (5, 7), (2, 1, 5, 7)], ids=["no_mask", "float_mask", "broadcast_mask"])
def test_fused_sdpa_in_float64_has_float64_gradients(mode, mask_shape):
    # The meta kernel saves logsumexp as float32 whatever the inputs' dtype:
    # probabilities recomputed from it carried float32 rounding into every
    # float64 gradient (5e-8 of its scale; nemotron3_5_asr's float64 gradients
    # in the HF sweep), while the forward agreed to 1e-16.
    q, k, v = (t * 3 for t in qkv(dtype=torch.float64))
    mask = [] if mask_shape is None else [torch.randn(mask_shape, dtype=torch.float64)]
    on_tpu = [t.to("tpu").requires_grad_() for t in (q, k, v)] + [m.to("tpu") for m in mask]
    assert FUSED_BACKWARD in ops_run_by(sdpa(), *on_tpu)
    torch_tpu.set_eager_mode(mode)
    try:
        check_op(sdpa(), q, k, v, *mask, grad=True, atol=1e-12, rtol=1e-10)
    finally:
        torch_tpu.set_eager_mode("strict")


@pytest.mark.parametrize("mode", ["defer_and_fuse", "debug"])
def test_fused_sdpa_in_other_eager_modes(mode):
    torch_tpu.set_eager_mode(mode)
    try:
        check_op(sdpa(is_causal=True), *qkv(), grad=True)
    finally:
        torch_tpu.set_eager_mode("strict")


def test_calls_the_fused_kernel_does_not_cover_take_the_math_path():
    # Dropout draws its mask in the math path; grouped-query attention
    # broadcasts heads there; a mask together with is_causal raises there.
    q, k, v = (t.to("tpu") for t in qkv())
    assert FUSED not in ops_run_by(sdpa(dropout_p=0.5), q, k, v)
    q4, kv2 = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 7, 8)
    assert FUSED not in ops_run_by(sdpa(enable_gqa=True), q4.to("tpu"), kv2.to("tpu"), kv2.to("tpu"))
    check_op(sdpa(enable_gqa=True), q4, kv2, kv2, grad=True)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.bool, device="tpu"), is_causal=True
        )
    bad_mask = torch.zeros(5, 6)  # does not broadcast to (5, 7) scores
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), attn_mask=bad_mask)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=bad_mask.to("tpu"))


def test_sdpa_kernel_context_chooses_the_backend():
    q, k, v = (t.to("tpu") for t in qkv())
    with sdpa_kernel(SDPBackend.MATH):
        assert FUSED not in ops_run_by(sdpa(), q, k, v)
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        assert FUSED in ops_run_by(sdpa(), q, k, v)
        # Dropout is not covered and math is disabled: no viable backend, as on CUDA.
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)


def test_mismatched_head_dims_raise_as_on_cpu():
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 4), torch.randn(2, 7, 4)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"))


def test_compiled_graphs_call_the_fused_kernel(monkeypatch):
    # Dynamo and AOTAutograd trace with fake tensors, whose SDPA choice is
    # the device's: the forward and backward graphs hold the fused op.
    import torch_tpu.compile as tpu_compile

    seen = []
    original = tpu_compile._graph_compiler

    def recording_compiler(gm, example_inputs, **kwargs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return original(gm, example_inputs, **kwargs)

    monkeypatch.setattr(tpu_compile, "_graph_compiler", recording_compiler)
    tpu_compile._aot_backend.cache_clear()
    torch._dynamo.reset()
    try:
        q, k, v = qkv()
        inputs = [t.to("tpu").requires_grad_() for t in (q, k, v)]
        fn = torch.compile(sdpa(is_causal=True), backend="tpu")
        out = fn(*inputs)
        out.sum().backward()
        cpu_inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        expected = sdpa(is_causal=True)(*cpu_inputs)
        expected.sum().backward()
        assert_close(out, expected)
        for t, c in zip(inputs, cpu_inputs):
            assert_close(t.grad, c.grad)
    finally:
        monkeypatch.undo()
        tpu_compile._aot_backend.cache_clear()
        torch._dynamo.reset()
    assert FUSED in seen and FUSED_BACKWARD in seen
