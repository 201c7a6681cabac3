"""torch_tpu fixes that scripts/hf_coverage.py's runs uncovered, each checked against CPU on the op the model
uses, in every mode it runs in."""

import pytest
import torch
import torch.nn.functional as F
from reference import in_mode


# Grounding DINO's and RT-DETR's deformable attention samples its values with grid_sample; the sweep's float64
# training check found tpu computing it in float32 whatever the dtype (gradients 1e-6 off CPU's in float64).
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
def test_grid_sample_computes_float64_in_float64_with_gradients(mode, interpolation, padding_mode):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    grid = torch.rand(2, 4, 6, 2, dtype=torch.float64) * 2.4 - 1.2
    weight = torch.randn(2, 3, 4, 6, dtype=torch.float64)

    def step(x, grid, weight):
        x, grid = x.detach().requires_grad_(), grid.detach().requires_grad_()
        out = F.grid_sample(x, grid, mode=interpolation, padding_mode=padding_mode, align_corners=False)
        (out * weight).sum().backward()
        return out.detach(), x.grad, grid.grad

    expected = step(x, grid, weight)
    actual = in_mode(mode, step)(x.to("tpu"), grid.to("tpu"), weight.to("tpu"))
    for name, a, e in zip(("output", "input gradient", "grid gradient"), actual, expected):
        assert a.dtype == torch.float64, name
        # float32 arithmetic is 1e-6 off here; float64's rounding, summed over a few taps, 1e-14
        torch.testing.assert_close(a.cpu(), e, atol=1e-12, rtol=1e-12, msg=name)


# CLAP's audio tower batch-normalizes its input spectrogram, which needs no gradient, so autograd asks
# batch_norm_backward for the weight's and bias's gradients only (output_mask [False, True, True]); the sweep's
# train check found tpu refusing that mask ("batch_norm_backward: defined results differ from the meta kernel's").
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_batch_norm_trains_on_an_input_that_needs_no_gradient(mode):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 5, 3)
    weight, bias = torch.rand(4) + 0.5, torch.randn(4)

    def step(x, weight, bias):
        weight, bias = weight.detach().requires_grad_(), bias.detach().requires_grad_()
        mean, var = torch.zeros(4, device=x.device), torch.ones(4, device=x.device)
        out = F.batch_norm(x, mean, var, weight, bias, training=True)
        (out * out * x).sum().backward()
        return out.detach(), weight.grad, bias.grad, mean, var

    expected = step(x, weight, bias)
    actual = in_mode(mode, step)(x.to("tpu"), weight.to("tpu"), bias.to("tpu"))
    names = ("output", "weight gradient", "bias gradient", "running mean", "running variance")
    for name, a, e in zip(names, actual, expected):
        torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-5, msg=name)
