"""Layer norm (native_layer_norm and its backward), rms_norm (composite) and
the nll_loss family behind F.cross_entropy / F.nll_loss, against CPU."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, check_op

FLOAT_DTYPES = [torch.float32, torch.bfloat16]


# ---- layer norm ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(
    "shape,normalized", [((4, 6), (6,)), ((2, 3, 8), (8,)), ((2, 3, 4, 5), (4, 5)), ((5,), (5,)), ((3, 1), (1,))]
)
def test_layer_norm_with_affine_forward_and_backward(shape, normalized, dtype):
    x = torch.randn(shape).to(dtype)
    w = (1 + 0.1 * torch.randn(normalized)).to(dtype)
    b = (0.1 * torch.randn(normalized)).to(dtype)
    # With one normalized element x_hat is 0 up to the rounding of the mean,
    # which CPU amplifies by rstd = 1/sqrt(eps) into grad_weight.
    atol = 1e-4 if normalized == (1,) else None
    check_op(lambda x_, w_, b_: F.layer_norm(x_, normalized, w_, b_, eps=1e-5), x, w, b, grad=True, atol=atol)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,normalized", [((4, 6), (6,)), ((2, 3, 4, 5), (4, 5))])
def test_layer_norm_without_affine_forward_and_backward(shape, normalized, dtype):
    # Autograd asks only for grad_input: output_mask [True, False, False].
    check_op(lambda x_: F.layer_norm(x_, normalized), torch.randn(shape).to(dtype), grad=True)


def test_layer_norm_weight_only_and_frozen_input():
    x, w = torch.randn(3, 7), torch.randn(7)
    check_op(lambda x_, w_: F.layer_norm(x_, (7,), w_), x, w, grad=True)
    # Input without grad: grad_input is not requested (output_mask [False, True, True]).
    w2, b2 = torch.randn(7, requires_grad=True), torch.randn(7, requires_grad=True)
    wt, bt = [t.detach().to("tpu").requires_grad_() for t in (w2, b2)]
    (F.layer_norm(x, (7,), w2, b2) * torch.arange(21.0).reshape(3, 7)).sum().backward()
    (F.layer_norm(x.to("tpu"), (7,), wt, bt) * torch.arange(21.0).reshape(3, 7).to("tpu")).sum().backward()
    assert_close(wt.grad, w2.grad)
    assert_close(bt.grad, b2.grad)


def test_native_layer_norm_returns_float32_statistics_for_bfloat16():
    # The meta kernel (and CUDA) keep mean/rstd in float32; CPU's kernel
    # returns them in bfloat16, so values are compared after upcasting.
    x = torch.randn(2, 3, 8).to(torch.bfloat16)
    out, mean, rstd = torch.ops.aten.native_layer_norm(x.to("tpu"), [3, 8], None, None, 1e-5)
    e_out, e_mean, e_rstd = torch.ops.aten.native_layer_norm(x, [3, 8], None, None, 1e-5)
    assert (out.dtype, mean.dtype, rstd.dtype) == (torch.bfloat16, torch.float32, torch.float32)
    assert mean.shape == (2, 1, 1) and rstd.shape == (2, 1, 1)
    assert_close(out, e_out)
    assert_close(mean, e_mean.float(), atol=1e-2, rtol=1e-2)
    assert_close(rstd, e_rstd.float(), atol=1e-2, rtol=1e-2)
    x32 = x.float()
    assert_close(mean, x32.mean((1, 2), keepdim=True))
    assert_close(rstd, x32.var((1, 2), keepdim=True, unbiased=False).add(1e-5).rsqrt(), rtol=1e-5)


def test_layer_norm_of_constant_rows_uses_eps():
    # Zero variance: rstd = 1/sqrt(eps), output = bias.
    x = torch.full((3, 4), 2.5)
    check_op(lambda x_, b_: F.layer_norm(x_, (4,), None, b_, eps=1e-3), x, torch.randn(4))


def test_layer_norm_of_non_contiguous_input_and_empty_batch():
    check_op(lambda x_: F.layer_norm(x_.transpose(0, 1), (5,)), torch.randn(5, 6), grad=True)
    check_op(lambda x_, w_: F.layer_norm(x_, (5,), w_), torch.randn(0, 5), torch.randn(5), grad=True)


def test_layer_norm_module_matches_cpu():
    torch.manual_seed(2)
    cpu = torch.nn.LayerNorm(16)
    with torch.no_grad():
        cpu.weight.normal_()
        cpu.bias.normal_()
    dev = torch.nn.LayerNorm(16).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(4, 16)
    cpu(x).pow(2).sum().backward()
    dev(x.to("tpu")).pow(2).sum().backward()
    assert_close(dev.weight.grad, cpu.weight.grad, atol=1e-4, rtol=1e-5)
    assert_close(dev.bias.grad, cpu.bias.grad, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_forward_and_backward(affine, dtype):
    x = torch.randn(3, 4, 8).to(dtype)
    if affine:
        check_op(lambda x_, w_: F.rms_norm(x_, (8,), w_, eps=1e-6), x, torch.randn(8).to(dtype), grad=True)
    else:
        check_op(lambda x_: F.rms_norm(x_, (4, 8)), x, grad=True)


# ---- nll_loss / cross_entropy --------------------------------------------------
REDUCTIONS = ["mean", "sum", "none"]


def logits_and_target(*shape, classes=5, dtype=torch.float32):
    x = torch.randn(shape[0], classes, *shape[1:]).to(dtype) if shape else torch.randn(classes).to(dtype)
    t = torch.randint(0, classes, shape)
    return x, t


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_2d(reduction, dtype):
    x, t = logits_and_target(6, dtype=dtype)
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), reduction=reduction), x, grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_unbatched_input(reduction):
    x, t = logits_and_target(classes=7)
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), reduction=reduction), x, grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_ignore_index_excluded_from_mean(reduction):
    x, t = logits_and_target(8)
    t[::3] = -100
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), reduction=reduction), x, grad=True)
    t2 = torch.where(t == -100, 2, t)
    check_op(lambda x_: F.cross_entropy(x_, t2.to(x_.device), ignore_index=2, reduction=reduction), x, grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_weights(reduction):
    x, t = logits_and_target(8)
    t[0] = -100
    w = torch.rand(5) + 0.1  # class weights take no gradient
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), weight=w.to(x_.device), reduction=reduction), x, grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_label_smoothing(reduction):
    x, t = logits_and_target(6)
    t[2] = -100
    w = torch.rand(5) + 0.1
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), label_smoothing=0.1, reduction=reduction), x, grad=True)
    check_op(
        lambda x_: F.cross_entropy(
            x_, t.to(x_.device), weight=w.to(x_.device), label_smoothing=0.2, reduction=reduction
        ),
        x,
        grad=True,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("spatial", [(4,), (3, 2)])
def test_cross_entropy_spatial_inputs_use_nll_loss2d(spatial, reduction):
    # (N, C, d...) inputs reach the device as nll_loss2d_forward/backward.
    x, t = logits_and_target(2, *spatial)
    t[0, 0] = -100
    w = torch.rand(5) + 0.1
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), reduction=reduction), x, grad=True)
    check_op(lambda x_: F.cross_entropy(x_, t.to(x_.device), weight=w.to(x_.device), reduction=reduction), x, grad=True)


def test_nll_loss_forward_returns_total_weight():
    lp = torch.randn(6, 4).log_softmax(1)
    t = torch.tensor([0, 3, -100, 1, 1, 2])
    w = torch.rand(4)
    for reduction in (0, 1, 2):
        for weight in (None, w):
            dev_w = None if weight is None else weight.to("tpu")
            out, total = torch.ops.aten.nll_loss_forward(lp.to("tpu"), t.to("tpu"), dev_w, reduction, -100)
            e_out, e_total = torch.ops.aten.nll_loss_forward(lp, t, weight, reduction, -100)
            assert_close(out, e_out)
            assert_close(total, e_total)


def test_nll_loss_mean_with_every_target_ignored_is_nan():
    lp = torch.randn(3, 4).log_softmax(1)
    t = torch.full((3,), -100)
    assert torch.isnan(F.nll_loss(lp, t)).item()
    assert torch.isnan(F.nll_loss(lp.to("tpu"), t.to("tpu")).cpu()).item()
    assert F.nll_loss(lp.to("tpu"), t.to("tpu"), reduction="sum").cpu().item() == 0


def test_nll_loss_backward_out_variant():
    lp = torch.randn(4, 3).log_softmax(1)
    t = torch.tensor([0, 2, 1, 2])
    total = torch.tensor(4.0)
    g = torch.tensor(0.5)
    out = torch.empty(0, device="tpu")
    torch.ops.aten.nll_loss_backward.grad_input(
        g.to("tpu"), lp.to("tpu"), t.to("tpu"), None, 1, -100, total.to("tpu"), grad_input=out
    )
    assert_close(out, torch.ops.aten.nll_loss_backward(g, lp, t, None, 1, -100, total))
