"""Adaptive max pooling (1d/2d/3d, values, indices and gradient), max_unpool
(1d/2d/3d) and fractional max pooling (2d/3d, given samples), against CPU."""

import pytest
import torch
import torch.nn.functional as F
from reference import check_op


def check_pool_with_indices(fn, x, grad=True):
    out, idx = check_op(fn, x, grad=grad)
    assert idx.dtype == torch.int64
    assert torch.equal(idx.cpu(), fn(x)[1])


@pytest.mark.parametrize(
    "shape,out_size",
    [
        ((2, 3, 7, 9), (3, 4)),
        ((3, 7, 9), (5, 2)),
        ((1, 2, 4, 4), (4, 4)),
        ((1, 2, 5, 3), (1, 1)),
        ((2, 2, 3, 3), (7, 5)),
    ],
)
def test_adaptive_max_pool2d_values_indices_gradient(shape, out_size):
    check_pool_with_indices(lambda x: F.adaptive_max_pool2d(x, out_size, return_indices=True), torch.randn(shape))


def test_adaptive_max_pool1d_and_3d():
    check_pool_with_indices(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), torch.randn(2, 3, 9))
    check_pool_with_indices(
        lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True), torch.randn(2, 2, 5, 7, 9)
    )
    check_pool_with_indices(lambda x: F.adaptive_max_pool3d(x, 2, return_indices=True), torch.randn(2, 5, 7, 3))


def test_adaptive_max_pool_bfloat16_and_channels_last():
    check_pool_with_indices(
        lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), torch.randn(2, 3, 7, 9).bfloat16(), grad=False
    )
    x = torch.randn(2, 3, 7, 9).contiguous(memory_format=torch.channels_last)
    check_pool_with_indices(lambda t: F.adaptive_max_pool2d(t, (2, 5), return_indices=True), x)


def test_adaptive_max_pool_ties_pick_the_first_and_nan_wins():
    x = torch.tensor([[[[1.0, 1.0, 0.0], [1.0, float("nan"), 2.0], [0.0, 3.0, float("nan")]]]])
    check_pool_with_indices(lambda t: F.adaptive_max_pool2d(t, (2, 2), return_indices=True), x, grad=False)


@pytest.mark.parametrize(
    "pool,unpool,shape,kwargs",
    [
        (F.max_pool1d, F.max_unpool1d, (2, 3, 8), dict(kernel_size=2)),
        (F.max_pool2d, F.max_unpool2d, (2, 3, 8, 8), dict(kernel_size=2)),
        (F.max_pool2d, F.max_unpool2d, (3, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
        (F.max_pool3d, F.max_unpool3d, (2, 3, 8, 8, 6), dict(kernel_size=2)),
    ],
)
def test_max_unpool_places_values_at_indices(pool, unpool, shape, kwargs):
    out, idx = pool(torch.randn(shape), return_indices=True, **kwargs)
    size = shape[-(len(shape) - 2 if len(shape) > 3 or pool is F.max_pool1d else 2) :]
    check_op(lambda v: unpool(v, idx.to(v.device), output_size=size, **kwargs), out, grad=True)


def test_max_unpool_bfloat16_is_exact():
    out, idx = F.max_pool2d(torch.randn(2, 3, 6, 6), 2, return_indices=True)
    check_op(lambda v: F.max_unpool2d(v, idx.to(v.device), 2), out.bfloat16(), atol=0, rtol=0)


@pytest.mark.parametrize(
    "shape,kernel,out_size",
    [
        ((2, 3, 9, 8), (2, 3), (4, 3)),
        ((3, 9, 8), 2, (4, 3)),
        ((1, 2, 10, 10), 3, (8, 1)),
        ((1, 1, 5, 5), 2, (4, 4)),
    ],
)
def test_fractional_max_pool2d_windows_follow_the_samples(shape, kernel, out_size):
    torch.manual_seed(3)
    samples = torch.rand(shape[0] if len(shape) == 4 else 1, shape[-3], 2)
    check_pool_with_indices(
        lambda x: F.fractional_max_pool2d(
            x, kernel, output_size=out_size, return_indices=True, _random_samples=samples.to(x.device)
        ),
        torch.randn(shape),
    )


def test_fractional_max_pool3d_forward():
    samples = torch.rand(2, 3, 3)
    check_pool_with_indices(
        lambda x: F.fractional_max_pool3d(
            x, (2, 3, 2), output_size=(4, 3, 3), return_indices=True, _random_samples=samples.to(x.device)
        ),
        torch.randn(2, 3, 9, 8, 7),
        grad=False,
    )


def test_fractional_max_pool2d_bfloat16_samples_round_like_cpu():
    samples = torch.rand(2, 3, 2).bfloat16()
    check_pool_with_indices(
        lambda x: F.fractional_max_pool2d(
            x, (2, 3), output_size=(7, 5), return_indices=True, _random_samples=samples.to(x.device)
        ),
        torch.randn(2, 3, 19, 18).bfloat16(),
        grad=False,
    )
