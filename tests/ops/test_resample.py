"""Resampling against CPU: interpolate / upsample in every mode (nearest,
nearest-exact, linear, bilinear, bicubic, trilinear, antialiased bilinear
and bicubic), sizes and scale factors, align_corners both ways, float32,
float64 and bfloat16, channels-last and non-contiguous inputs, gradients; and
grid_sample in every interpolation and padding mode, 2d and 3d."""

import pytest
import torch
import torch.nn.functional as F
from reference import check_op

BF16_TOL = dict(atol=2e-2, rtol=2e-2)

SIZES_2D = [
    dict(size=(9, 4)),
    dict(size=(5, 7)),
    dict(size=(10, 14)),
    dict(size=(1, 1)),
    dict(scale_factor=1.7),
    dict(scale_factor=(0.6, 2.3)),
    dict(scale_factor=2),
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("sizing", SIZES_2D)
def test_interpolate_nearest_2d_matches_cpu_with_gradient(mode, sizing):
    check_op(lambda x: F.interpolate(x, mode=mode, **sizing), torch.randn(2, 3, 5, 7), grad=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("sizing", SIZES_2D)
def test_interpolate_bilinear_bicubic_match_cpu_with_gradient(mode, align_corners, sizing):
    check_op(
        lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **sizing), torch.randn(2, 3, 5, 7), grad=True
    )


@pytest.mark.parametrize("recompute", [False, True])
def test_interpolate_uses_the_given_scale_unless_recomputed(recompute):
    # 5 * 1.3 = 6.5 -> 6 outputs: the source index uses 1/1.3 unless recomputed from 5/6.
    check_op(
        lambda x: F.interpolate(x, scale_factor=1.3, mode="bilinear", recompute_scale_factor=recompute),
        torch.randn(1, 2, 5, 5),
        grad=True,
    )
    check_op(
        lambda x: F.interpolate(x, scale_factor=1.3, mode="nearest", recompute_scale_factor=recompute),
        torch.randn(1, 2, 5, 5),
        grad=True,
    )


@pytest.mark.parametrize(
    "mode,kw",
    [
        ("nearest", {}),
        ("nearest-exact", {}),
        ("linear", dict(align_corners=False)),
        ("linear", dict(align_corners=True)),
    ],
)
@pytest.mark.parametrize("sizing", [dict(size=3), dict(size=11), dict(scale_factor=2.5), dict(scale_factor=0.5)])
def test_interpolate_1d_matches_cpu(mode, kw, sizing):
    check_op(lambda x: F.interpolate(x, mode=mode, **kw, **sizing), torch.randn(2, 3, 6), grad=True)


@pytest.mark.parametrize(
    "mode,kw",
    [
        ("nearest", {}),
        ("nearest-exact", {}),
        ("trilinear", dict(align_corners=False)),
        ("trilinear", dict(align_corners=True)),
    ],
)
@pytest.mark.parametrize("sizing", [dict(size=(4, 6, 3)), dict(scale_factor=(1.5, 0.7, 2.0))])
def test_interpolate_3d_matches_cpu(mode, kw, sizing):
    check_op(lambda x: F.interpolate(x, mode=mode, **kw, **sizing), torch.randn(1, 2, 3, 4, 5), grad=True)


@pytest.mark.parametrize(
    "mode,kw", [("nearest", {}), ("bilinear", dict(align_corners=False)), ("bicubic", dict(align_corners=True))]
)
def test_interpolate_bfloat16_matches_cpu_within_bfloat16_rounding(mode, kw):
    x = torch.randn(2, 3, 6, 5).bfloat16()
    check_op(lambda t: F.interpolate(t, size=(9, 4), mode=mode, **kw), x, **BF16_TOL)


def test_trilinear_bfloat16_matches_cpu_within_bfloat16_rounding():
    x = torch.randn(1, 2, 4, 5, 6).bfloat16()
    check_op(lambda t: F.interpolate(t, size=(7, 3, 8), mode="trilinear"), x, **BF16_TOL)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_channels_last_and_non_contiguous_inputs(mode):
    x = torch.randn(2, 3, 6, 5).contiguous(memory_format=torch.channels_last)
    check_op(lambda t: F.interpolate(t, size=(4, 9), mode=mode), x, grad=True)
    base = torch.randn(2, 5, 3, 6)
    check_op(lambda t: F.interpolate(t.transpose(1, 2), size=(7, 4), mode=mode), base, grad=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("sizing", [dict(size=(4, 5)), dict(size=(13, 6)), dict(scale_factor=0.37), dict(size=(1, 1))])
def test_antialiased_interpolate_matches_cpu_with_gradient(mode, align_corners, sizing):
    check_op(
        lambda x: F.interpolate(x, mode=mode, antialias=True, align_corners=align_corners, **sizing),
        torch.randn(2, 3, 9, 11),
        grad=True,
    )


@pytest.mark.parametrize(
    "mode, kw",
    [
        ("linear", dict(align_corners=False)),
        ("bilinear", dict(align_corners=False)),
        ("bilinear", dict(align_corners=True)),
        ("bicubic", dict(align_corners=False)),
        ("bicubic", dict(align_corners=True)),
        ("bilinear", dict(align_corners=False, antialias=True)),
        ("bicubic", dict(align_corners=True, antialias=True)),
        ("trilinear", dict(align_corners=False)),
    ],
)
@pytest.mark.parametrize("sizing", [dict(scale_factor=1.7), dict(scale_factor=0.45)])
def test_float64_interpolation_weights_carry_no_float32_rounding(mode, kw, sizing):
    """CPU computes a float64 resampling's weights in double; ours were
    float's, 4e-7 off (found by the op fuzz, seed 11). Forward and gradient
    to float64's tolerance."""
    spatial = {"linear": 1, "trilinear": 3}.get(mode, 2)
    x = torch.randn(2, 3, *[7, 5, 4][:spatial], dtype=torch.float64)
    check_op(lambda x: F.interpolate(x, mode=mode, **sizing, **kw), x, grad=True, atol=1e-12, rtol=1e-12)


def test_upsample_out_variant_writes_into_the_given_tensor():
    x = torch.randn(1, 2, 3, 4)
    expected = torch.ops.aten.upsample_bilinear2d(x, [5, 6], False)
    out = torch.empty(0, device="tpu")
    torch.ops.aten.upsample_bilinear2d.out(x.to("tpu"), [5, 6], False, out=out)
    torch.testing.assert_close(out.cpu(), expected)


def test_interpolate_empty_batch():
    check_op(lambda x: F.interpolate(x, size=(4, 4), mode="bilinear"), torch.randn(0, 3, 2, 2))


GRID_MODES = ["bilinear", "nearest", "bicubic"]
GRID_PADDING = ["zeros", "border", "reflection"]


@pytest.mark.parametrize("mode", GRID_MODES)
@pytest.mark.parametrize("padding_mode", GRID_PADDING)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d_matches_cpu_with_input_and_grid_gradients(mode, padding_mode, align_corners):
    grid = torch.rand(2, 5, 4, 2) * 2.4 - 1.2  # some points outside [-1, 1]
    check_op(
        lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
        torch.randn(2, 3, 6, 7),
        grid,
        grad=True,
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", GRID_PADDING)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d_matches_cpu_with_input_and_grid_gradients(mode, padding_mode, align_corners):
    grid = torch.rand(2, 3, 5, 4, 3) * 2.4 - 1.2
    check_op(
        lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
        torch.randn(2, 3, 6, 7, 5),
        grid,
        grad=True,
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", GRID_PADDING)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_bfloat16_rounds_each_step_like_cpu(mode, padding_mode, align_corners):
    # CPU computes bfloat16 grid sampling in bfloat16, operation by operation.
    x = torch.randn(1, 2, 5, 6).bfloat16()
    grid = (torch.rand(1, 4, 5, 2) * 2.4 - 1.2).bfloat16()
    check_op(
        lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
        x,
        grid,
        **BF16_TOL,
    )


def test_affine_grid_then_grid_sample_matches_cpu_with_theta_gradient():
    # Off-lattice points: at exact pixel positions the gradient is discontinuous.
    theta = torch.tensor([[[0.83, -0.57, 0.13], [0.61, 0.79, -0.23]]])
    check_op(
        lambda x, th: F.grid_sample(x, F.affine_grid(th, (1, 2, 7, 9), align_corners=False), align_corners=False),
        torch.randn(1, 2, 7, 9),
        theta,
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )
