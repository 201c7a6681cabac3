"""Matrix products (mm, bmm, addmm, baddbmm, dot) and what decomposes into
them (torch.matmul, nn.Linear, scaled_dot_product_attention), against CPU."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, check_op

import torch_tpu

FLOAT_DTYPES = [torch.float32, torch.bfloat16]


def rand(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-8, 8, shape, dtype=dtype)


# ---- mm ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 1, 1), (7, 33, 2), (1, 16, 9)])
def test_mm_matches_cpu_with_gradients(m, k, n, dtype):
    check_op(torch.mm, rand(m, k, dtype=dtype), rand(k, n, dtype=dtype), grad=True)


def test_mm_of_int64_is_exact():
    check_op(torch.mm, rand(4, 6, dtype=torch.int64), rand(6, 3, dtype=torch.int64))


@pytest.mark.parametrize("m,k,n", [(0, 4, 5), (3, 0, 5), (3, 4, 0)])
def test_mm_with_empty_dims(m, k, n):
    # k == 0 gives a zero matrix, as an empty sum.
    check_op(torch.mm, rand(m, k), rand(k, n))


def test_mm_of_transposed_and_sliced_views():
    a = torch.randn(6, 4)
    b = torch.randn(12, 8)
    check_op(lambda x, y: torch.mm(x.t(), y[::2, 1:7]), a, b, grad=True)


def test_mm_out_writes_into_given_tensor():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    out = torch.empty(3, 5, device="tpu")
    r = torch.mm(a.to("tpu"), b.to("tpu"), out=out)
    assert r is out
    assert_close(out, a @ b)


def test_mm_rejects_mismatched_shapes():
    # The message is the meta kernel's ("a and b must have same reduction
    # dim"), not CUDA's ("mat1 and mat2 shapes cannot be multiplied").
    a, b = torch.randn(3, 4), torch.randn(5, 6)
    with pytest.raises(RuntimeError):
        torch.mm(a.to("tpu"), b.to("tpu"))
    with pytest.raises(RuntimeError):
        torch.bmm(torch.randn(2, 3, 4).to("tpu"), torch.randn(3, 4, 5).to("tpu"))


def test_mm_bfloat16_accumulates_in_float32():
    # 256 products of 1/256-ish values: a bf16 running sum would lose most of them.
    a = torch.full((1, 4096), 1.0, dtype=torch.bfloat16)
    b = torch.full((4096, 1), 1.0 / 256, dtype=torch.bfloat16)
    r = torch.mm(a.to("tpu"), b.to("tpu"))
    assert r.dtype == torch.bfloat16
    assert r.cpu().item() == 16.0


# ---- bmm / baddbmm ---------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("b,m,k,n", [(2, 3, 4, 5), (1, 1, 1, 1), (4, 2, 7, 3)])
def test_bmm_matches_cpu_with_gradients(b, m, k, n, dtype):
    check_op(torch.bmm, rand(b, m, k, dtype=dtype), rand(b, k, n, dtype=dtype), grad=True)


def test_bmm_of_int64_and_empty_batch():
    check_op(torch.bmm, rand(3, 2, 4, dtype=torch.int64), rand(3, 4, 5, dtype=torch.int64))
    check_op(torch.bmm, rand(0, 2, 4), rand(0, 4, 5))


def test_bmm_of_transposed_views_and_out():
    x, y = torch.randn(2, 4, 3), torch.randn(5, 4, 2)
    check_op(lambda p, q: torch.bmm(p.transpose(1, 2), q.permute(2, 1, 0)), x, y, grad=True)
    out = torch.empty(0, device="tpu")
    torch.bmm(x.transpose(1, 2).to("tpu"), torch.randn(2, 4, 6).to("tpu"), out=out)
    assert out.shape == (2, 3, 6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5), (-1, -1)])
def test_baddbmm_matches_cpu_with_gradients(beta, alpha, dtype):
    self_ = rand(2, 3, 5, dtype=dtype)
    check_op(
        lambda s, p, q: torch.baddbmm(s, p, q, beta=beta, alpha=alpha),
        self_,
        rand(2, 3, 4, dtype=dtype),
        rand(2, 4, 5, dtype=dtype),
        grad=True,
    )


def test_baddbmm_broadcasts_self_and_runs_in_place():
    check_op(
        lambda s, p, q: torch.baddbmm(s, p, q, alpha=0.25),
        torch.randn(5),
        torch.randn(2, 3, 4),
        torch.randn(2, 4, 5),
        grad=True,
    )
    s, p, q = torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    t = s.to("tpu")
    t.baddbmm_(p.to("tpu"), q.to("tpu"), beta=2.0)
    assert_close(t, s.baddbmm(p, q, beta=2.0))


def test_baddbmm_beta_zero_ignores_nan_in_self():
    s = torch.full((2, 3, 5), float("nan"))
    check_op(lambda s_, p, q: torch.baddbmm(s_, p, q, beta=0), s, torch.randn(2, 3, 4), torch.randn(2, 4, 5))


# ---- addmm -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("self_shape", [(5,), (1, 5), (3, 5), (3, 1), ()])
def test_addmm_broadcasts_self_with_gradients(self_shape, dtype):
    check_op(torch.addmm, rand(*self_shape, dtype=dtype), rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype), grad=True)


@pytest.mark.parametrize("beta,alpha", [(0.5, 2.0), (0, 1), (2, 0), (1, -3.25)])
def test_addmm_scales_by_beta_and_alpha(beta, alpha):
    check_op(
        lambda s, p, q: torch.addmm(s, p, q, beta=beta, alpha=alpha),
        torch.randn(3, 5),
        torch.randn(3, 4),
        torch.randn(4, 5),
        grad=True,
    )


def test_addmm_beta_zero_ignores_nan_and_inf_in_self():
    s = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, 2.0]).expand(3, 5).contiguous()
    r = check_op(lambda s_, p, q: torch.addmm(s_, p, q, beta=0), s, torch.randn(3, 4), torch.randn(4, 5))
    assert torch.isfinite(r.cpu()).all()


def test_addmm_of_int64_with_integer_scalars():
    check_op(
        lambda s, p, q: torch.addmm(s, p, q, beta=2, alpha=3),
        rand(3, 5, dtype=torch.int64),
        rand(3, 4, dtype=torch.int64),
        rand(4, 5, dtype=torch.int64),
    )


def test_addmm_in_place_and_out():
    s, p, q = torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5)
    t = s.to("tpu")
    t.addmm_(p.to("tpu"), q.to("tpu"), alpha=0.5)
    assert_close(t, s.addmm(p, q, alpha=0.5))
    out = torch.empty(3, 5, device="tpu")
    torch.addmm(s.to("tpu"), p.to("tpu"), q.to("tpu"), beta=0.25, out=out)
    assert_close(out, torch.addmm(s, p, q, beta=0.25))


def test_addmm_changing_alpha_gives_new_values():
    # alpha is a runtime input of the compiled program, not baked into it.
    s, p, q = torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2)
    for alpha in (0.3, 0.7, 1.9):
        check_op(lambda s_, a, b: torch.addmm(s_, a, b, alpha=alpha), s, p, q)


# ---- addmv (torch.mv, matrix @ vector) ----------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_mv_matches_cpu_with_gradients(dtype):
    check_op(torch.mv, rand(3, 4, dtype=dtype), rand(4, dtype=dtype), grad=True)
    check_op(lambda m, v: torch.mv(m.t(), v), rand(4, 3, dtype=dtype), rand(4, dtype=dtype), grad=True)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, -1)])
def test_addmv_scales_and_broadcasts_self(beta, alpha):
    check_op(
        lambda s, m, v: torch.addmv(s, m, v, beta=beta, alpha=alpha),
        torch.randn(3),
        torch.randn(3, 4),
        torch.randn(4),
        grad=True,
    )
    check_op(
        lambda s, m, v: torch.addmv(s, m, v, beta=beta, alpha=alpha),
        torch.randn(1),
        torch.randn(3, 4),
        torch.randn(4),
        grad=True,
    )


def test_addmv_beta_zero_ignores_nan_and_int64():
    check_op(
        lambda s, m, v: torch.addmv(s, m, v, beta=0), torch.full((3,), float("nan")), torch.randn(3, 4), torch.randn(4)
    )
    check_op(torch.mv, rand(3, 4, dtype=torch.int64), rand(4, dtype=torch.int64))


# ---- dot ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int64])
@pytest.mark.parametrize("n", [1, 7, 0])
def test_dot_matches_cpu(n, dtype):
    check_op(torch.dot, rand(n, dtype=dtype), rand(n, dtype=dtype), grad=dtype.is_floating_point)


def test_dot_of_strided_vectors():
    check_op(lambda a, b: torch.dot(a[::2], b[:, 1]), torch.randn(10), torch.randn(5, 3), grad=True)


# ---- matmul and what decomposes into these ops ---------------------------------
MATMUL_SHAPES = [
    ((4,), (4,)),  # dot
    ((3, 4), (4,)),  # mv (as mm)
    ((4,), (4, 5)),  # vector @ matrix
    ((3, 4), (4, 5)),  # mm
    ((2, 3, 4), (4, 5)),  # batch @ matrix: folded into one mm
    ((4,), (2, 4, 5)),  # vector @ batch
    ((2, 3, 4), (4,)),  # batch @ vector
    ((3, 4), (2, 4, 5)),  # matrix @ batch
    ((2, 3, 4), (2, 4, 5)),  # bmm
    ((2, 1, 3, 4), (1, 5, 4, 6)),  # broadcast batch dims
    ((6, 2, 3, 4), (4, 1)),
    ((1, 3, 4), (7, 4, 2)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_broadcast_cases_with_gradients(sa, sb, dtype):
    check_op(torch.matmul, rand(*sa, dtype=dtype), rand(*sb, dtype=dtype), grad=True)


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES[:5])
def test_matmul_of_int64(sa, sb):
    check_op(torch.matmul, rand(*sa, dtype=torch.int64), rand(*sb, dtype=torch.int64))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_and_backward(bias, dtype):
    torch.manual_seed(3)
    lin = torch.nn.Linear(6, 4, bias=bias).to(dtype)
    x = rand(5, 3, 6, dtype=dtype)
    params = [lin.weight.detach()] + ([lin.bias.detach()] if bias else [])
    check_op(lambda inp, w, *b: F.linear(inp, w, *b), x, *params, grad=True)


def test_linear_module_gradients_on_device():
    torch.manual_seed(4)
    cpu = torch.nn.Linear(8, 3)
    dev = torch.nn.Linear(8, 3).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(4, 8)
    cpu(x).square().sum().backward()
    dev(x.to("tpu")).square().sum().backward()
    assert_close(dev.weight.grad, cpu.weight.grad)
    assert_close(dev.bias.grad, cpu.bias.grad)


# ---- attention (math path: bmm/baddbmm + softmax) ------------------------------
def sdpa_math(q, k, v, **kwargs):
    # The math backend is the one decomposed into device ops; pin it on both sides.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


@pytest.mark.parametrize("is_causal", [False, True])
def test_scaled_dot_product_attention(is_causal):
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    check_op(lambda a, b, c: sdpa_math(a, b, c, is_causal=is_causal), q, k, v, grad=True)


def test_scaled_dot_product_attention_with_masks():
    q, k, v = torch.randn(2, 4, 6), torch.randn(2, 7, 6), torch.randn(2, 7, 3)
    additive = torch.randn(4, 7)
    check_op(lambda a, b, c, m: sdpa_math(a, b, c, attn_mask=m), q, k, v, additive, grad=True)
    keep = torch.rand(4, 7) > 0.3
    keep[:, 0] = True  # every query sees at least one key
    check_op(lambda a, b, c: sdpa_math(a, b, c, attn_mask=keep.to(a.device), scale=0.5), q, k, v, grad=True)


# ---- float32 matmul precision "medium": one bf16 multiply, f32 accumulation ----
def _products(a, b, bias, x, w):
    return [a @ b, torch.bmm(a.expand(2, -1, -1), b.expand(2, -1, -1)), F.linear(a, b.t(), bias), F.conv2d(x, w)]


@pytest.mark.parametrize("run", ["strict", "defer_and_fuse", "compiled"])
def test_medium_precision_rounds_float32_operands_to_bf16(run):
    # Every platform computes what a TPU computes at DEFAULT precision: the
    # product of bf16-rounded operands, accumulated in f32 (XLA:CPU ignores
    # the precision attribute, so the lowering rounds explicitly). CPU
    # PyTorch's own "medium" rounds the same way on bf16-capable CPUs.
    a, b, bias = torch.randn(16, 96), torch.randn(96, 24), torch.randn(24)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    rounded = _products(*[t.bfloat16().float() for t in (a, b)], bias, *[t.bfloat16().float() for t in (x, w)])
    exact = _products(a.double(), b.double(), bias.double(), x.double(), w.double())
    torch.set_float32_matmul_precision("medium")
    fn = torch.compile(_products, backend="tpu") if run == "compiled" else _products
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("defer_and_fuse" if run == "defer_and_fuse" else "strict")
    try:
        got = fn(*[t.to("tpu") for t in (a, b, bias, x, w)])
    finally:
        torch_tpu.set_eager_mode(previous)
    for g, r, e in zip(got, rounded, exact):
        assert_close(g, r, atol=1e-4, rtol=1e-5)
        assert (g.cpu().double() - e).abs().max() > 1e-3  # the rounding was not skipped


# ---- torch.tpu.precision: the calling thread's own matmul precision ----------
def _square(x):
    return x @ x


# Under DEFAULT (one bf16 pass) 1 + 2**-8 rounds to 1 before the product; at
# HIGH and HIGHEST it is kept (XLA:CPU computes both in float32).
_KEPT = (1 + 2**-8) ** 2


def _diagonal(device="tpu"):
    return torch.eye(16, device=device) * (1 + 2**-8)


def _corner(y):
    return y[0, 0].item()


@pytest.mark.parametrize("run", ["strict", "defer_and_fuse", "compiled"])
def test_thread_precision_overrides_the_process_setting_and_nests(run):
    P = torch.tpu.Precision
    fn = torch.compile(_square, backend="tpu") if run == "compiled" else _square
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("defer_and_fuse" if run == "defer_and_fuse" else "strict")
    try:
        x = _diagonal()
        torch.set_float32_matmul_precision("medium")
        seen = [_corner(fn(x))]
        with torch.tpu.precision(P.HIGHEST):
            seen.append(_corner(fn(x)))
            with torch.tpu.precision(P.DEFAULT):
                seen.append(_corner(fn(x)))
            seen.append(_corner(fn(x)))
        seen.append(_corner(fn(x)))
        torch.set_float32_matmul_precision("highest")
        with torch.tpu.precision(P.DEFAULT):
            seen.append(_corner(fn(x)))
        seen.append(_corner(fn(x)))
    finally:
        torch_tpu.set_eager_mode(previous)
    assert seen == [1.0, _KEPT, 1.0, _KEPT, 1.0, 1.0, _KEPT]
    assert torch_tpu.get_matmul_precision() == "highest"  # the process setting was never touched by the blocks


@pytest.mark.parametrize("run", ["strict", "defer_and_fuse"])
def test_a_precision_block_applies_to_the_backward_run_inside_it(run):
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(run)
    try:
        torch.set_float32_matmul_precision("medium")
        grads = []
        for level in (torch.tpu.Precision.DEFAULT, torch.tpu.Precision.HIGHEST):
            w = _diagonal().requires_grad_()
            with torch.tpu.precision(level):
                (w @ _diagonal()).sum().backward()  # d/dw = ones @ x.T
            grads.append(_corner(w.grad))
    finally:
        torch_tpu.set_eager_mode(previous)
    assert grads == [1.0, 1 + 2**-8]


def test_a_compiled_graph_runs_at_the_precision_in_force_at_each_call():
    # It was traced at the setting in force when Dynamo compiled it, and
    # Dynamo's guards do not tell these settings apart, so it reused a graph
    # compiled under another: after "medium" -> "high" -> "highest" ->
    # "medium", "highest" returned medium's product and "medium" high's.
    fn = torch.compile(_square, backend="tpu")
    x = _diagonal()
    seen = []
    for setting in ("medium", "high", "highest", "medium", "highest"):
        torch.set_float32_matmul_precision(setting)
        seen.append((_corner(fn(x)), _corner(_square(x))))
    assert seen == [(1.0, 1.0), (_KEPT, _KEPT), (_KEPT, _KEPT), (1.0, 1.0), (_KEPT, _KEPT)]


def test_thread_precision_stays_on_its_thread_and_is_restored_after_an_exception():
    import threading

    P = torch.tpu.Precision
    torch.set_float32_matmul_precision("medium")
    seen_by_other = []

    def other():
        seen_by_other.append((torch_tpu.precision.current_precision(), _corner(_square(_diagonal()))))
        with torch.tpu.precision(P.HIGH):
            seen_by_other.append((torch_tpu.precision.current_precision(), _corner(_square(_diagonal()))))

    with torch.tpu.precision(P.HIGHEST):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert torch_tpu.precision.current_precision() is P.HIGHEST  # the other thread's block did not touch ours
    assert seen_by_other == [(P.DEFAULT, 1.0), (P.HIGH, _KEPT)]  # a new thread does not inherit the block
    with pytest.raises(ValueError, match="inside"):
        with torch.tpu.precision(P.HIGHEST):
            raise ValueError("inside the block")
    assert torch_tpu.precision.current_precision() is P.DEFAULT
    assert _corner(_square(_diagonal())) == 1.0


def test_thread_precision_takes_only_a_precision():
    for bad in ("highest", 2, None):
        with pytest.raises(TypeError, match="torch.tpu.Precision"):
            torch.tpu.precision(bad)
    assert [p.value for p in torch.tpu.Precision] == ["medium", "high", "highest"]
