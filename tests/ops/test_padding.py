"""Reflection and replication padding (1d/2d/3d, negative amounts crop),
unfold / fold (im2col / col2im) and channel_shuffle, against CPU, with
gradients, several dtypes and non-contiguous inputs."""

import pytest
import torch
import torch.nn.functional as F
from reference import check_op

PAD_CASES = [
    ((2, 3, 6), (2, 3)),
    ((3, 6), (1, 0)),  # unbatched 1d
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((1, 2, 4, 5, 6), (1, 1, 2, 0, 3, 2)),
    ((2, 1, 1, 5), (4, 4, 0, 0)),
]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", PAD_CASES)
def test_pad_matches_cpu_with_gradient(mode, shape, pad):
    if mode == "reflect" and shape[-1] <= max(pad[:2]):
        pytest.skip("reflection needs padding < size")
    check_op(lambda x: F.pad(x, pad, mode=mode), torch.randn(shape), grad=True)


@pytest.mark.parametrize("pad", [(-1, 2, 0, -2), (-2, -1, 1, 0), (3, -3, -1, 1)])
def test_replicate_with_negative_padding_crops(pad):
    check_op(lambda x: F.pad(x, pad, mode="replicate"), torch.randn(2, 3, 5, 6), grad=True)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.float16])
def test_pad_other_dtypes_are_exact(mode, dtype):
    x = (torch.randn(2, 3, 5, 6) * 10).to(dtype)
    check_op(lambda t: F.pad(t, (2, 1, 1, 3), mode=mode), x, atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_non_contiguous_and_channels_last(mode):
    check_op(lambda t: F.pad(t.transpose(-1, -2), (1, 2, 2, 1), mode=mode), torch.randn(2, 3, 5, 6), grad=True)
    x = torch.randn(2, 3, 5, 6).contiguous(memory_format=torch.channels_last)
    check_op(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode), x, grad=True)


def test_pad_keeps_nan_and_inf():
    x = torch.tensor([[[1.0, float("nan"), float("inf"), -2.0]]])
    check_op(lambda t: F.pad(t, (2, 2), mode="reflect"), x)


UNFOLD_CASES = [
    ((2, 3, 7, 8), dict(kernel_size=3)),
    ((2, 3, 7, 8), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))),
    ((3, 5, 5), dict(kernel_size=2)),  # unbatched
    ((1, 1, 4, 4), dict(kernel_size=4)),
    ((1, 2, 3, 3), dict(kernel_size=1)),
]


@pytest.mark.parametrize("shape,kwargs", UNFOLD_CASES)
def test_unfold_matches_cpu_with_gradient(shape, kwargs):
    check_op(lambda x: F.unfold(x, **kwargs), torch.randn(shape), grad=True)


@pytest.mark.parametrize(
    "out_size,kwargs,blocks",
    [
        ((5, 6), dict(kernel_size=(2, 3), padding=1, stride=2), 9),
        ((4, 4), dict(kernel_size=2), 9),
        ((7, 5), dict(kernel_size=3, dilation=2, padding=2, stride=(1, 2)), 21),
    ],
)
def test_fold_sums_overlapping_blocks_like_cpu(out_size, kwargs, blocks):
    k = kwargs["kernel_size"]
    kk = k[0] * k[1] if isinstance(k, tuple) else k * k
    check_op(lambda x: F.fold(x, out_size, **kwargs), torch.randn(2, 3 * kk, blocks), grad=True)


def test_unfold_bfloat16_and_non_contiguous():
    check_op(lambda x: F.unfold(x, kernel_size=2, stride=1), torch.randn(2, 3, 5, 4).bfloat16(), atol=0, rtol=0)
    check_op(lambda x: F.unfold(x.transpose(2, 3), kernel_size=(2, 3)), torch.randn(2, 3, 6, 5), grad=True)


@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 5), 3), ((1, 8, 3), 2), ((2, 4, 2, 2, 2), 4), ((3, 6, 1), 1)])
def test_channel_shuffle_matches_cpu(shape, groups):
    check_op(lambda x: F.channel_shuffle(x, groups), torch.randn(shape), grad=True)
    check_op(lambda x: F.channel_shuffle(x, groups), torch.randint(0, 9, shape), atol=0, rtol=0)
