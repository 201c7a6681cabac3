"""Memory format on tpu follows CPU's and CUDA's rules: a convolution of a
channels_last input (or weight) returns channels_last, and the ops that
commonly follow it (batch norm, relu, pooling, add) keep it, so that
`y.permute(0, 2, 3, 1).view(n, -1)` works on tpu as on CPU: in eager, in
the gradients, and in the fake tensors torch.compile traces with."""

import copy

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close

import torch_tpu

CL, CL3D = torch.channels_last, torch.channels_last_3d


def stem():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.AvgPool2d(2),
        torch.nn.AdaptiveAvgPool2d(2),
    )


def layer_strides(model, x):
    """Each layer's result's strides, then a residual add's."""
    strides, h = [], x
    for layer in model:
        h = layer(h)
        strides.append(h.stride())
    return strides + [(h + h).stride()], h


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_channels_last_flows_through_a_conv_stem_as_on_cpu(mode):
    model = stem()
    x = torch.randn(2, 3, 8, 8).to(memory_format=CL).requires_grad_()
    on_tpu = copy.deepcopy(model).to("tpu")
    xt = x.detach().to("tpu").requires_grad_()
    expected_strides, expected = layer_strides(model, x)
    with torch_tpu.eager_mode(mode):
        strides, actual = layer_strides(on_tpu, xt)
        assert strides == expected_strides
        flat = actual.permute(0, 2, 3, 1).view(2, -1)  # raises unless channels_last
        flat.sum().backward()
    expected.permute(0, 2, 3, 1).view(2, -1).sum().backward()
    assert_close(flat, expected.permute(0, 2, 3, 1).reshape(2, -1), atol=1e-5, rtol=1e-4)
    assert xt.grad.stride() == x.grad.stride()
    assert_close(xt.grad, x.grad, atol=1e-5, rtol=1e-4)
    for p, q in zip(on_tpu.parameters(), model.parameters()):
        assert p.grad.stride() == q.grad.stride()
        assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "conv, x_shape, w_shape, x_format, w_format",
    [
        (F.conv2d, (2, 3, 7, 6), (4, 3, 3, 3), CL, torch.contiguous_format),
        (F.conv2d, (2, 3, 7, 6), (4, 3, 3, 3), torch.contiguous_format, CL),  # the weight alone decides too
        (F.conv2d, (2, 3, 7, 6), (4, 3, 3, 3), torch.contiguous_format, torch.contiguous_format),
        (F.conv3d, (2, 3, 4, 5, 4), (4, 3, 3, 3, 3), CL3D, torch.contiguous_format),
        (F.conv_transpose2d, (2, 3, 5, 4), (3, 4, 3, 3), CL, torch.contiguous_format),
    ],
)
def test_convolution_result_and_gradient_formats_match_cpu(conv, x_shape, w_shape, x_format, w_format):
    x = torch.randn(x_shape).to(memory_format=x_format)
    w = torch.randn(w_shape).to(memory_format=w_format)
    expected = conv(x, w)
    actual = conv(x.to("tpu"), w.to("tpu"))
    assert actual.stride() == expected.stride()
    assert_close(actual, expected, atol=1e-5, rtol=1e-4)
    grad = torch.randn(expected.shape)
    mask = [True, True, False]
    args = ([1] * (x.dim() - 2), [0] * (x.dim() - 2), [1] * (x.dim() - 2), conv is F.conv_transpose2d)
    rest = ([0] * (x.dim() - 2), 1, mask)
    gi, gw, _ = torch.ops.aten.convolution_backward(grad, x, w, None, *args, *rest)
    gi_t, gw_t, _ = torch.ops.aten.convolution_backward(grad.to("tpu"), x.to("tpu"), w.to("tpu"), None, *args, *rest)
    assert (gi_t.stride(), gw_t.stride()) == (gi.stride(), gw.stride())
    assert_close([gi_t, gw_t], [gi, gw], atol=1e-4, rtol=1e-4)


def test_compiled_stem_traces_channels_last_like_eager():
    model = stem()
    head = torch.nn.Linear(4 * 2 * 2, 3)

    def forward(m, h, x):
        y = m(x)
        return h(y.permute(0, 2, 3, 1).view(y.shape[0], -1)), y

    x = torch.randn(2, 3, 8, 8).to(memory_format=CL)
    on_tpu, head_tpu = copy.deepcopy(model).to("tpu"), copy.deepcopy(head).to("tpu")
    compiled = torch.compile(forward, backend="tpu")
    expected, y = forward(model, head, x)
    actual, yt = compiled(on_tpu, head_tpu, x.to("tpu"))
    assert yt.stride() == y.stride()
    assert_close(actual, expected, atol=1e-5, rtol=1e-4)
    expected.sum().backward()
    actual.sum().backward()
    for p, q in zip([*on_tpu.parameters(), *head_tpu.parameters()], [*model.parameters(), *head.parameters()]):
        assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


def test_fake_convolution_formats_match_eager():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(2, 3, 8, 8, device="tpu").to(memory_format=CL)
    w = torch.randn(4, 3, 3, 3, device="tpu")
    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    eager = torch.ops.aten.convolution(x, w, None, *args)
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        fake = torch.ops.aten.convolution(fx, fw, None, *args)
        grads = torch.ops.aten.convolution_backward(fake, fx, fw, [4], *args, [True, True, True])
    assert fake.stride() == eager.stride()
    eager_grads = torch.ops.aten.convolution_backward(eager, x, w, [4], *args, [True, True, True])
    assert [g.stride() for g in grads] == [g.stride() for g in eager_grads]
    # CPU fake tensors keep PyTorch's own rule.
    xc, wc = x.cpu(), w.cpu()
    with FakeTensorMode() as mode:
        cpu_fake = torch.ops.aten.convolution(mode.from_tensor(xc), mode.from_tensor(wc), None, *args)
    assert cpu_fake.stride() == torch.ops.aten.convolution(xc, wc, None, *args).stride()
