"""Convolution (aten::convolution and convolution_backward): nn.Conv1d/2d/3d
and ConvTranspose with stride, padding, dilation, groups and output_padding,
against CPU, forward and backward."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from reference import assert_close, check_op, in_mode

import torch_tpu

# (input shape, weight shape, kwargs) for F.conv{1,2,3}d; weight is [O, C/groups, *k].
CONV_CASES = [
    ((2, 3, 11), (4, 3, 3), dict(stride=3, padding=1)),
    ((2, 4, 10), (6, 2, 2), dict(stride=3, groups=2)),  # strided windows skip the tail: negative padding in grad_weight
    ((1, 2, 9), (2, 1, 3), dict(dilation=3, padding=2, groups=2)),  # depthwise
    ((2, 3, 9, 9), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((2, 4, 10, 9), (6, 2, 3, 2), dict(stride=(2, 1), padding=(0, 2), dilation=2, groups=2)),
    ((3, 2, 7, 8), (5, 2, 1, 1), dict()),
    ((1, 6, 8, 8), (6, 1, 3, 3), dict(padding=1, groups=6)),  # depthwise
    ((2, 3, 5, 6), (2, 3, 5, 6), dict()),  # kernel covers the input: 1x1 output
    ((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), dict(padding=1)),
    ((2, 4, 6, 5, 7), (4, 2, 2, 3, 2), dict(stride=(2, 1, 3), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2)),
]

CONV_FNS = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}
CONV_T_FNS = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV_CASES)
def test_conv_with_bias_forward_and_backward(x_shape, w_shape, kwargs):
    fn = CONV_FNS[len(x_shape)]
    check_op(
        lambda x, w, b: fn(x, w, b, **kwargs),
        torch.randn(x_shape),
        torch.randn(w_shape),
        torch.randn(w_shape[0]),
        grad=True,
        atol=1e-4,
        rtol=1e-5,
    )


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV_CASES[::3])
def test_conv_without_bias_forward_and_backward(x_shape, w_shape, kwargs):
    # bias_sizes None: convolution_backward returns no grad_bias.
    fn = CONV_FNS[len(x_shape)]
    check_op(
        lambda x, w: fn(x, w, **kwargs), torch.randn(x_shape), torch.randn(w_shape), grad=True, atol=1e-4, rtol=1e-5
    )


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV_CASES[::2])
def test_conv_bfloat16_forward(x_shape, w_shape, kwargs):
    fn = CONV_FNS[len(x_shape)]
    x, w, b = torch.randn(x_shape), torch.randn(w_shape), torch.randn(w_shape[0])
    check_op(
        lambda x_, w_, b_: fn(x_, w_, b_, **kwargs), x.bfloat16(), w.bfloat16(), b.bfloat16(), atol=5e-2, rtol=2e-2
    )


# (input shape, weight shape [Cin, Cout/groups, *k], kwargs) for F.conv_transpose{1,2,3}d.
CONV_T_CASES = [
    ((2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(0, 2), groups=2, dilation=(1, 2))),
    ((1, 3, 4, 4), (3, 2, 3, 3), dict(stride=2, padding=3)),  # padding beyond the kernel: negative conv padding
    ((2, 2, 6, 6), (2, 5, 1, 1), dict()),
    ((1, 4, 3, 4, 3), (4, 2, 2, 3, 2), dict(stride=2, padding=(0, 1, 0), output_padding=(1, 0, 1), groups=2)),
]


# output_padding as PyTorch allows it: below the stride OR below the dilation.
# Where it reaches the stride, grad_output holds rows no input row touched.
CONV_T_OUTPUT_PADDING_CASES = [
    ((2, 4, 5), (4, 3, 3), dict(stride=3, padding=1, output_padding=2)),
    ((2, 4, 5), (4, 3, 3), dict(stride=2, dilation=3, output_padding=2)),  # op >= stride, no padding to cut
    ((2, 4, 6), (4, 2, 2), dict(stride=2, padding=2, output_padding=3, dilation=4, groups=2)),
    ((2, 2, 4, 4), (2, 2, 4, 5), dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))),
    ((1, 3, 4, 5), (3, 2, 3, 3), dict(stride=3, padding=0, output_padding=(2, 1), dilation=(1, 2))),
    ((2, 4, 3, 3), (4, 1, 2, 3), dict(stride=1, output_padding=1, dilation=2, groups=4)),
    (
        (2, 2, 4, 4, 4),
        (2, 2, 4, 5, 6),
        dict(stride=(3, 2, 1), padding=(1, 2, 3), output_padding=(2, 3, 1), groups=2, dilation=(4, 4, 4)),
    ),
    (
        (1, 2, 3, 2, 3),
        (2, 3, 2, 2, 2),
        dict(stride=(3, 2, 2), padding=(0, 1, 0), output_padding=(2, 2, 1), dilation=(1, 3, 2)),
    ),
]


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV_T_CASES + CONV_T_OUTPUT_PADDING_CASES)
def test_conv_transpose_forward_and_backward(x_shape, w_shape, kwargs):
    groups = kwargs.get("groups", 1)
    fn = CONV_T_FNS[len(x_shape)]
    check_op(
        lambda x, w, b: fn(x, w, b, **kwargs),
        torch.randn(x_shape),
        torch.randn(w_shape),
        torch.randn(w_shape[1] * groups),
        grad=True,
        atol=1e-4,
        rtol=1e-5,
    )


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV_T_OUTPUT_PADDING_CASES[1::3])
def test_conv_transpose_with_output_padding_grad_of_input_only(x_shape, w_shape, kwargs):
    # output_mask (True, False, False): grad_input alone, without bias.
    fn = CONV_T_FNS[len(x_shape)]
    w = torch.randn(w_shape)
    check_op(lambda x: fn(x, w.to(x.device), **kwargs), torch.randn(x_shape), grad=True, atol=1e-4, rtol=1e-5)


def test_conv_transpose_bfloat16_forward():
    x, w = torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3)
    check_op(
        lambda x_, w_: F.conv_transpose2d(x_, w_, stride=2, padding=1, output_padding=1),
        x.bfloat16(),
        w.bfloat16(),
        atol=5e-2,
        rtol=2e-2,
    )


def test_conv_modules_match_cpu():
    torch.manual_seed(3)
    for cpu in [
        nn.Conv1d(3, 4, 3, padding="same"),
        nn.Conv2d(3, 6, (3, 2), stride=2, groups=3, bias=False),
        nn.Conv3d(2, 2, 2),
        nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
    ]:
        dims = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3, nn.ConvTranspose2d: 2}[type(cpu)]
        x = torch.randn((2, cpu.in_channels) + (6,) * dims)
        tpu = type(cpu)(
            cpu.in_channels,
            cpu.out_channels,
            cpu.kernel_size,
            stride=cpu.stride,
            groups=cpu.groups,
            bias=cpu.bias is not None,
            padding=cpu.padding,
            **({"output_padding": cpu.output_padding} if dims == 2 and cpu.transposed else {}),
        )
        tpu.load_state_dict(cpu.state_dict())
        tpu.to("tpu")
        out_c, out_t = cpu(x), tpu(x.to("tpu"))
        assert_close(out_t, out_c, atol=1e-4, rtol=1e-5, msg=str(cpu))
        out_c.square().sum().backward()
        out_t.square().sum().backward()
        for (name, p_c), p_t in zip(cpu.named_parameters(), tpu.parameters()):
            assert_close(p_t.grad, p_c.grad, atol=1e-3, rtol=1e-4, msg=f"{cpu} {name}")


def test_conv_grad_of_weight_only_and_of_input_only():
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    # Input without grad: output_mask [False, True, False].
    w_c = w.clone().requires_grad_()
    w_t = w.to("tpu").requires_grad_()
    F.conv2d(x, w_c, padding=1).sum().backward()
    F.conv2d(x.to("tpu"), w_t, padding=1).sum().backward()
    assert_close(w_t.grad, w_c.grad, atol=1e-4, rtol=1e-5)
    # Weight frozen: output_mask [True, False, False].
    x_c = x.clone().requires_grad_()
    x_t = x.to("tpu").requires_grad_()
    F.conv2d(x_c, w, stride=2).sum().backward()
    F.conv2d(x_t, w.to("tpu"), stride=2).sum().backward()
    assert_close(x_t.grad, x_c.grad, atol=1e-4, rtol=1e-5)


def test_conv_of_non_contiguous_input_and_weight():
    x = torch.randn(2, 8, 8, 3).permute(0, 3, 1, 2)  # channels-last layout
    w = torch.randn(3, 4, 3, 3).transpose(0, 1)
    check_op(lambda x_, w_: F.conv2d(x_, w_, padding=1), x, w, grad=True, atol=1e-4, rtol=1e-5)
    x2 = torch.randn(2, 3, 10, 10)[:, :, ::2, 1:]
    check_op(lambda x_, w_: F.conv2d(x_, w_), x2, torch.randn(4, 3, 2, 2), grad=True, atol=1e-4, rtol=1e-5)


def test_conv_with_empty_batch():
    check_op(
        lambda x, w, b: F.conv2d(x, w, b, padding=1), torch.randn(0, 3, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(4)
    )


def test_conv_out_variant_writes_into_out():
    x, w, b = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)
    expected = torch.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    out = torch.empty(0, device="tpu")
    r = torch.ops.aten.convolution.out(
        x.to("tpu"), w.to("tpu"), b.to("tpu"), [1, 1], [1, 1], [1, 1], False, [0, 0], 1, out=out
    )
    assert r is out
    assert_close(out, expected, atol=1e-4, rtol=1e-5)


def test_conv_of_integer_input_is_not_implemented_as_on_cuda():
    # CPU convolves integers; CUDA (and this device) raise NotImplementedError.
    x, w = torch.ones(1, 1, 3, 3, dtype=torch.long), torch.ones(1, 1, 2, 2, dtype=torch.long)
    with pytest.raises(NotImplementedError, match="convolution"):
        F.conv2d(x.to("tpu"), w.to("tpu"))


def test_conv_at_default_matmul_precision_is_close_to_cpu():
    # Outside the test's "highest" setting the plugin may use fast passes;
    # XLA:CPU still computes in f32.
    torch.set_float32_matmul_precision("high")
    check_op(
        lambda x, w: F.conv2d(x, w, padding=1), torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), atol=1e-2, rtol=1e-2
    )


@pytest.mark.parametrize("transposed", [False, True])
def test_float16_convolution_is_as_accurate_as_cpu_at_the_default_precision(transposed):
    # At "medium" (tpu's default) float16 operands, computed in float32, used
    # to be rounded to bf16 like float32 tensors: 5-9x CPU's error.
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 10, 10, dtype=torch.float64), torch.randn(4, 3, 3, 3, dtype=torch.float64)
    conv = (lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1))) if transposed else F.conv2d
    g = torch.randn(conv(x, w).shape, dtype=torch.float64)

    def run(device, dtype):
        xs, ws = (t.detach().to(dtype).to(device).requires_grad_() for t in (x, w))
        out = conv(xs, ws)
        out.backward(g.to(dtype).to(device))
        return [out.detach().cpu().double(), xs.grad.cpu().double(), ws.grad.cpu().double()]

    exact, cpu = run("cpu", torch.float64), run("cpu", torch.float16)
    with torch_tpu.matmul_precision("medium"):  # conftest runs the other tests at "highest"
        tpu = run("tpu", torch.float16)
    for name, e, c, t in zip(("out", "grad_input", "grad_weight"), exact, cpu, tpu):
        cpu_error, tpu_error = (c - e).abs().max().item(), (t - e).abs().max().item()
        assert tpu_error <= 2 * cpu_error + 1e-3, (name, tpu_error, cpu_error)


# Depthwise (groups = input channels, channel multiplier 1 or 2) and grouped
# convolutions, which the CPU plugin lowers without stablehlo.convolution
# (csrc/lower/conv.cpp: multiply-adds of shifted windows; the grouped weight
# gradient one group at a time). (input shape, weight shape, kwargs).
DEPTHWISE_CASES = [
    ((2, 4, 12), (4, 1, 3), dict(padding=1, groups=4)),
    ((2, 3, 13), (6, 1, 4), dict(stride=2, dilation=2, padding=3, groups=3)),  # multiplier 2
    ((2, 5, 9, 10), (5, 1, 3, 3), dict(padding=1, groups=5)),
    ((1, 4, 11, 9), (4, 1, 3, 2), dict(stride=(2, 3), padding=(1, 0), dilation=(2, 1), groups=4)),
    ((1, 3, 10, 10), (6, 1, 7, 7), dict(padding=3, groups=3)),  # 49 taps, multiplier 2
    ((1, 2, 12, 12), (2, 1, 9, 9), dict(padding=4, groups=2)),  # 81 taps: a convolution again
    ((1, 2, 5, 6, 7), (2, 1, 3, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 8, 7, 7), (8, 2, 3, 3), dict(padding=1, groups=4)),  # grouped
    ((2, 6, 9), (4, 3, 2), dict(stride=2, groups=2)),  # grouped, the strided tail unread
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("x_shape,w_shape,kwargs", DEPTHWISE_CASES)
def test_depthwise_and_grouped_conv_forward_and_backward(x_shape, w_shape, kwargs, dtype):
    fn = CONV_FNS[len(x_shape)]
    tol = dict(atol=1e-4, rtol=1e-5) if dtype == torch.float32 else {}
    check_op(
        lambda x, w, b: fn(x, w, b, **kwargs),
        torch.randn(x_shape, dtype=dtype),
        torch.randn(w_shape, dtype=dtype),
        torch.randn(w_shape[0], dtype=dtype),
        grad=True,
        **tol,
    )


@pytest.mark.parametrize("mode", ["defer_and_fuse", "compiled"])
def test_depthwise_conv_training_step_in_each_mode(mode):
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Conv2d(4, 8, 3, stride=2, groups=2))
    tpu = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Conv2d(4, 8, 3, stride=2, groups=2)).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 4, 9, 9)

    def step(model, x):
        out = model(x)
        out.square().sum().backward()
        return out

    out = in_mode(mode, step)(tpu, x.to("tpu"))
    assert_close(out, step(cpu, x), 1e-4, 1e-5)
    for (name, p), q in zip(tpu.named_parameters(), cpu.parameters()):
        assert_close(p.grad, q.grad, 1e-4, 1e-5, msg=name)


_PLATFORM_SCRIPT = """
import glob, os, torch, torch.nn.functional as F, torch_tpu
torch.set_float32_matmul_precision("highest")
for x_shape, w_shape, kwargs in {cases!r}:
    fn = {{3: F.conv1d, 4: F.conv2d, 5: F.conv3d}}[len(x_shape)]
    x, w = torch.randn(x_shape, requires_grad=True), torch.randn(w_shape, requires_grad=True)
    xt, wt = x.detach().to("tpu").requires_grad_(), w.detach().to("tpu").requires_grad_()
    y, yt = fn(x, w, **kwargs), fn(xt, wt, **kwargs)
    y.square().sum().backward()
    yt.square().sum().backward()
    for a, e in ((yt, y), (xt.grad, x.grad), (wt.grad, w.grad)):
        torch.testing.assert_close(a.cpu(), e, atol=1e-3, rtol=1e-4)
texts = [open(f).read() for f in glob.glob(os.path.join(os.environ["TORCH_TPU_DUMP_HLO"], "*.mlir"))]
print("CONVOLUTIONS", sum("stablehlo.convolution" in t for t in texts))
"""


@pytest.mark.parametrize("platform", ["cpu", "tpu"])
def test_depthwise_and_grouped_lowerings_of_each_platform_compute_cpus_values(platform, tmp_path):
    # The CPU plugin's own lowering takes no convolution for the depthwise
    # cases and the grouped weight gradient; lowered as for a TPU
    # (TORCH_TPU_LOWERING_PLATFORM=tpu) the same calls are convolutions. Both
    # run here and must give CPU's values.
    cases = [DEPTHWISE_CASES[0], DEPTHWISE_CASES[3], DEPTHWISE_CASES[6]]
    env = dict(
        os.environ,
        TORCH_TPU_LOWERING_PLATFORM=platform,
        TORCH_TPU_DUMP_HLO=str(tmp_path),
        TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"),
    )
    run = subprocess.run(
        [sys.executable, "-c", _PLATFORM_SCRIPT.format(cases=cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    convolutions = int(run.stdout.split("CONVOLUTIONS")[1])
    if platform == "cpu":
        assert convolutions == 0
    else:
        assert convolutions >= 2 * len(cases)  # each case's forward and backward programs
