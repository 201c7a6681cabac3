"""Weight normalization on tpu against CPU: ATen's _weight_norm sends a
first- or last-dim normalization to the fused _weight_norm_interface and its
backward (csrc/lower/norm.cpp), and any other dim to the composite
v * g / norm_except_dim. nn.utils.parametrizations.weight_norm reaches it on
every forward (wav2vec2's positional convolution, HiFi-GAN vocoders)."""

import copy

import pytest
import torch
from reference import assert_close, check_op

import torch_tpu

MODES = ["strict", "defer_and_fuse"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,dim", [((6, 4, 3), 0), ((6, 4, 3), 2), ((6, 4, 3), -1), ((5, 7), 0), ((6, 4, 3), 1)])
def test_weight_norm_forward_and_backward(shape, dim, mode):
    v = torch.randn(shape)
    g_shape = [1] * len(shape)
    g_shape[dim] = shape[dim]
    g = torch.rand(g_shape) + 0.5
    with torch_tpu.eager_mode(mode):
        check_op(lambda v_, g_: torch._weight_norm(v_, g_, dim), v, g, grad=True)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_returns_the_norm_in_float32_for_bfloat16(dim):
    v = torch.randn(6, 4, 3).to(torch.bfloat16)
    g = (torch.rand(6, 1, 1) if dim == 0 else torch.rand(1, 1, 3)).to(torch.bfloat16) + 0.5
    w, norm = torch.ops.aten._weight_norm_interface(v.to("tpu"), g.to("tpu"), dim)
    e_w, e_norm = torch.ops.aten._weight_norm_interface(v, g, dim)
    assert (w.dtype, norm.dtype) == (torch.bfloat16, torch.float32)
    assert norm.shape == e_norm.shape
    assert_close(w, e_w, atol=1e-2, rtol=1e-2)
    assert_close(norm, e_norm, rtol=1e-5)


def test_weight_norm_interface_backward_matches_cpu():
    v, g = torch.randn(5, 3, 4, dtype=torch.float64), torch.rand(1, 1, 4, dtype=torch.float64) + 0.5
    grad_w = torch.randn(5, 3, 4, dtype=torch.float64)
    _, norm = torch.ops.aten._weight_norm_interface(v, g, 2)
    expected = torch.ops.aten._weight_norm_interface_backward(grad_w, v, g, norm, 2)
    actual = torch.ops.aten._weight_norm_interface_backward(*(t.to("tpu") for t in (grad_w, v, g, norm)), 2)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        assert_close(a, e, rtol=1e-12, atol=1e-12)


class PositionalConv(torch.nn.Module):
    """wav2vec2's positional embedding: a grouped conv whose weight is normalized over its last dim."""

    def __init__(self):
        super().__init__()
        conv = torch.nn.Conv1d(8, 8, kernel_size=5, padding=2, groups=2)
        self.conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        self.head = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(8, 3))

    def forward(self, x):
        return self.head(torch.nn.functional.gelu(self.conv(x)).transpose(1, 2))


def sgd_step(model, x):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = model(x)
    (out * out).sum().backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    opt.step()
    return out, grads, [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_weight_normalized_model_trains_like_cpu(mode, compiled):
    torch.manual_seed(0)
    model, x = PositionalConv(), torch.randn(2, 8, 10)
    on_tpu = copy.deepcopy(model).to("tpu")
    run = torch.compile(on_tpu, backend="tpu") if compiled else on_tpu
    expected = sgd_step(model, x)
    with torch_tpu.eager_mode(mode):
        actual = sgd_step(run, x.to("tpu"))
        # Parameters are read after the step: the optimizer's updates pass through the same eager mode.
        actual = (actual[0], actual[1], [p.detach() for p in on_tpu.parameters()])
    assert_close(actual[0], expected[0], atol=1e-5, rtol=1e-4)
    for a, e in zip(actual[1], expected[1]):
        assert_close(a, e, atol=1e-5, rtol=1e-4)
    for a, e in zip(actual[2], expected[2]):
        assert_close(a, e, atol=1e-5, rtol=1e-4)
