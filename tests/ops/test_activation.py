"""Activation functions (elu family, hardtanh/relu6, shrinks, hard sigmoid and
swish, leaky/parametric/randomized relu, mish, softplus, logsigmoid,
threshold, glu) and their backward ops, against CPU."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, check_op

FLOAT_DTYPES = [torch.float32, torch.bfloat16]

# name -> F call; every one has a native forward and backward lowering.
ACTIVATIONS = {
    "elu": lambda x: F.elu(x, alpha=0.7),
    "celu": lambda x: F.celu(x, alpha=1.3),
    "selu": F.selu,
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.8),
    "relu6": F.relu6,
    "hardshrink": lambda x: F.hardshrink(x, 0.4),
    "softshrink": lambda x: F.softshrink(x, 0.4),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "mish": F.mish,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "logsigmoid": F.logsigmoid,
    "threshold": lambda x: F.threshold(x, 0.3, -2.0),
    "rrelu_eval": lambda x: F.rrelu(x, 0.1, 0.3, training=False),
}


def spread(shape, dtype=torch.float32):
    """Values across every kink of the activations above (|x| up to 5)."""
    return (torch.randn(shape) * 2.5).to(dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_and_backward_match_cpu(name, dtype):
    check_op(ACTIVATIONS[name], spread((4, 7), dtype), grad=True)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 3, 5)])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_on_scalar_empty_and_3d_shapes(name, shape):
    check_op(ACTIVATIONS[name], spread(shape), grad=True)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_reads_non_contiguous_views(name):
    check_op(lambda x: ACTIVATIONS[name](x.t()[1:, ::2]), spread((6, 5)), grad=True)


def test_kink_points_take_cpu_side():
    # Exactly at the thresholds each CPU kernel picks one side; the gradient
    # there says which one.
    x = torch.tensor([-3.0, -1.0, -0.5, -0.4, 0.0, 0.4, 0.5, 1.0, 3.0, 6.0])
    for fn in [
        F.hardtanh,
        F.relu6,
        lambda t: F.hardshrink(t, 0.4),
        lambda t: F.softshrink(t, 0.4),
        F.hardsigmoid,
        F.hardswish,
        F.elu,
        lambda t: F.leaky_relu(t, 0.1),
        lambda t: F.threshold(t, 0.5, 9.0),
        lambda t: F.softplus(t, beta=2.0, threshold=2.0),
    ]:
        check_op(fn, x, grad=True)


def test_nan_propagates_as_on_cpu():
    x = torch.tensor([float("nan"), -1.0, 2.0])
    for fn in ACTIVATIONS.values():
        check_op(fn, x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_hardtanh_relu6_and_threshold_on_integers(dtype):
    x = torch.arange(-8, 9, dtype=dtype)
    check_op(lambda t: F.hardtanh(t, -3, 4), x)
    check_op(F.relu6, x)
    check_op(lambda t: F.threshold(t, 2, -7), x)
    # Float bounds on integers: the CPU kernel casts them to the integer type.
    check_op(lambda t: F.hardtanh(t, -2.5, 2.5), x)


def test_hard_activation_gradients_round_one_sixth_as_cpu_does():
    # CPU's and CUDA's hardsigmoid backward multiply by 1/6 rounded to
    # float32 in every dtype: float64 gradients agree to float64's rounding
    # (the exact g / 6 is 3e-8 away from theirs).
    x = torch.linspace(-4, 4, 97, dtype=torch.float64)
    check_op(F.hardsigmoid, x, grad=True, atol=1e-15, rtol=0)
    check_op(F.hardswish, x, grad=True, atol=1e-15, rtol=0)


@pytest.mark.parametrize(
    "fn", [F.softplus, F.mish, F.hardswish, F.hardsigmoid, F.logsigmoid, F.glu, F.hardshrink], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=str)
def test_float_only_activations_reject_integers_like_cpu(fn, dtype):
    # bool included: logsigmoid of bool raised the meta kernel's negation
    # RuntimeError before CPU's NotImplementedError (found by the op fuzz,
    # seed 13, through binary_cross_entropy_with_logits).
    x = torch.arange(4).to(dtype)
    with pytest.raises(NotImplementedError):
        fn(x)
    with pytest.raises(NotImplementedError):
        fn(x.to("tpu"))


def test_bce_with_logits_of_bool_logits_raises_cpus_not_implemented():
    x, t = torch.ones(1, 5, dtype=torch.bool), torch.ones(1, 5)
    with pytest.raises(NotImplementedError, match="log_sigmoid"):
        F.binary_cross_entropy_with_logits(x, t)
    with pytest.raises(NotImplementedError, match="log_sigmoid"):
        F.binary_cross_entropy_with_logits(x.to("tpu"), t.to("tpu"))


@pytest.mark.parametrize(
    "inplace",
    [
        lambda x: F.elu(x, 0.5, inplace=True),
        lambda x: F.celu(x, 2.0, inplace=True),
        lambda x: F.selu(x, inplace=True),
        lambda x: F.hardtanh(x, -0.5, 0.5, inplace=True),
        lambda x: F.relu6(x, inplace=True),
        lambda x: F.hardsigmoid(x, inplace=True),
        lambda x: F.hardswish(x, inplace=True),
        lambda x: F.leaky_relu(x, 0.3, inplace=True),
        lambda x: F.mish(x, inplace=True),
        lambda x: F.threshold(x, 0.1, 5.0, inplace=True),
        lambda x: F.rrelu(x, 0.2, 0.4, inplace=True),
    ],
)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_inplace_variants_write_into_input_and_views(inplace, dtype):
    x = spread((5, 6), dtype)
    expected = x.clone()
    inplace(expected[:, 1::2])
    actual = x.to("tpu")
    out = inplace(actual[:, 1::2])
    assert_close(actual, expected)
    assert_close(out, expected[:, 1::2])


@pytest.mark.parametrize(
    "op,args",
    [
        (torch.ops.aten.elu.out, (1.5, 1.0, 1.0)),
        (torch.ops.aten.hardtanh.out, (-0.3, 0.3)),
        (torch.ops.aten.hardshrink.out, (0.3,)),
        (torch.ops.aten.softshrink.out, (0.3,)),
        (torch.ops.aten.hardsigmoid.out, ()),
        (torch.ops.aten.hardswish.out, ()),
        (torch.ops.aten.leaky_relu.out, (0.05,)),
        (torch.ops.aten.mish.out, ()),
        (torch.ops.aten.softplus.out, (1.5, 10.0)),
        (torch.ops.aten.threshold.out, (0.0, 1.0)),
        (torch.ops.aten.glu.out, (0,)),
    ],
)
def test_out_variants_resize_and_fill_out(op, args):
    x = spread((4, 3))
    expected = op(x, *args, out=torch.empty(0))
    out = torch.empty(0).to("tpu")
    result = op(x.to("tpu"), *args, out=out)
    assert result is out
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,dim", [((4, 6), -1), ((6, 3), 0), ((2, 4, 5), 1), ((2,), 0)])
def test_glu_halves_along_dim(shape, dim, dtype):
    check_op(lambda x: F.glu(x, dim), spread(shape, dtype), grad=True)


def test_glu_odd_dim_raises_like_cpu():
    with pytest.raises(RuntimeError):
        F.glu(torch.randn(3, 5).to("tpu"))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,channels", [((3, 4, 5), 4), ((2, 3), 3), ((5,), 1), ((2, 3, 4), 1), ((), 1)])
def test_prelu_per_channel_weight_and_its_gradient(shape, channels, dtype):
    w = (torch.rand(channels) * 0.5).to(dtype)
    check_op(F.prelu, spread(shape, dtype), w, grad=True)


def test_log_sigmoid_forward_returns_cpu_buffer():
    x = spread((3, 4))
    out, buffer = torch.ops.aten.log_sigmoid_forward(x.to("tpu"))
    e_out, e_buffer = torch.ops.aten.log_sigmoid_forward(x)
    assert_close(out, e_out)
    assert buffer.shape == e_buffer.shape
    if buffer.numel():
        assert_close(buffer, e_buffer)


def test_logsigmoid_is_stable_for_large_magnitudes():
    check_op(F.logsigmoid, torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0]), grad=True)


def test_elu_backward_from_result_matches_cpu():
    g, x = spread((3, 5)), spread((3, 5))
    for is_result in (False, True):
        y = F.elu(x, 0.8) if is_result else x
        args = (0.8, 1.0, 1.0, is_result)
        expected = torch.ops.aten.elu_backward(g, *args, y)
        actual = torch.ops.aten.elu_backward(g.to("tpu"), *args, y.to("tpu"))
        assert_close(actual, expected)


def test_rrelu_training_draws_slopes_in_range_and_backward_uses_them():
    x = spread((64, 32)).to("tpu").requires_grad_()
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.sum().backward()
    xc, yc, gc = x.detach().cpu(), y.detach().cpu(), x.grad.cpu()
    pos = xc > 0
    assert torch.equal(yc[pos], xc[pos])
    slopes = yc[~pos] / xc[~pos]
    assert ((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)).all()
    assert slopes.std() > 0.01  # drawn, not one mean slope
    torch.testing.assert_close(gc[~pos], slopes, atol=1e-5, rtol=1e-4)
    assert torch.equal(gc[pos], torch.ones(int(pos.sum())))


def test_rrelu_with_noise_writes_noise():
    x = spread((8, 8)).to("tpu")
    noise = torch.empty(8, 8).to("tpu")
    torch.ops.aten.rrelu_with_noise(x, noise, 0.2, 0.5, True)
    n, xc = noise.cpu(), x.cpu()
    assert torch.equal(n[xc > 0], torch.ones(int((xc > 0).sum())))
    assert ((n[xc <= 0] >= 0.2) & (n[xc <= 0] < 0.5)).all()


def test_leaky_relu_backward_rejects_negative_slope_on_result_like_cpu():
    g, y = torch.randn(3), torch.randn(3)
    with pytest.raises(RuntimeError):
        torch.ops.aten.leaky_relu_backward(g, y, -0.1, True)
    with pytest.raises(RuntimeError):
        torch.ops.aten.leaky_relu_backward(g.to("tpu"), y.to("tpu"), -0.1, True)
