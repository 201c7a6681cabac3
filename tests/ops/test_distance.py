"""Distances (pdist, cdist, pairwise_distance, dist, the legacy norm
overloads) and the cross product, forward and backward, against CPU."""

import math

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, check_op

PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("shape", [(5, 3), (2, 4), (1, 3), (4, 1)])
def test_pdist_forward_and_backward(shape, p):
    # p = 0 counts nonzero differences: its gradient is zero.
    check_op(lambda x: F.pdist(x, p), torch.randn(shape), grad=True)


def test_pdist_zero_distance_rows_give_zero_gradient_like_cpu():
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, -1.0]])
    for p in (0.5, 1.0, 2.0, 3.0, math.inf):
        check_op(lambda t: F.pdist(t, p), x, grad=True)


def test_pdist_of_no_rows_pairs_is_empty():
    check_op(lambda x: F.pdist(x), torch.randn(0, 3))


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize(
    "shapes", [((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)), ((3, 1, 4, 2), (5, 3, 2)), ((1, 2), (3, 2))]
)
def test_cdist_forward_and_backward_with_broadcast_batch(shapes, p):
    a, b = shapes
    check_op(lambda x, y: torch.cdist(x, y, p), torch.randn(a), torch.randn(b), grad=True)


@pytest.mark.parametrize(
    "mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]
)
def test_cdist_euclidean_compute_modes(mode):
    # CPU computes p = 2 through a matmul for more than 25 rows or when asked.
    x, y = torch.randn(30, 4), torch.randn(27, 4)
    check_op(lambda a, b: torch.cdist(a, b, 2.0, compute_mode=mode), x, y, grad=True, atol=1e-4, rtol=1e-4)


def test_cdist_with_empty_batch_or_rows():
    check_op(lambda x, y: torch.cdist(x, y), torch.randn(0, 4, 5), torch.randn(3, 5), grad=True)
    check_op(lambda x, y: torch.cdist(x, y), torch.randn(0, 5), torch.randn(3, 5), grad=True)


def test_cdist_reads_non_contiguous_views():
    check_op(
        lambda x, y: torch.cdist(x.transpose(-1, -2), y[:, ::2]), torch.randn(2, 3, 4), torch.randn(2, 10, 3), grad=True
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, math.inf])
def test_pairwise_distance_and_dist(p, dtype):
    x, y = torch.randn(4, 6).to(dtype), torch.randn(4, 6).to(dtype)
    check_op(lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=True), x, y, grad=True)
    check_op(lambda a, b: torch.dist(a, b, p), x, y, grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_legacy_norm_overloads(dtype):
    x = torch.randn(3, 4, 5).to(dtype)
    check_op(lambda t: torch.norm(t), x, grad=True)
    check_op(lambda t: torch.norm(t, 3), x, grad=True)
    check_op(lambda t: torch.norm(t, 1, dim=(0, 2), keepdim=True), x, grad=True)
    check_op(lambda t: torch.norm(t, float("inf"), dim=-1), x, grad=True)
    check_op(lambda t: torch.ops.aten.norm.ScalarOpt_dtype(t, 2, dtype=torch.float32), x)
    check_op(lambda t: torch.ops.aten.norm.ScalarOpt_dim_dtype(t, 2, [1], False, dtype=torch.float32), x)
    expected = torch.norm(x, 2, dim=1, out=torch.empty(0, dtype=dtype))
    out = torch.empty(0, dtype=dtype).to("tpu")
    torch.norm(x.to("tpu"), 2, dim=1, out=out)
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize(
    "shapes,dim", [(((4, 3), (4, 3)), -1), (((3, 5), (3, 5)), 0), (((2, 3, 4), (1, 3, 4)), 1), (((3,), (3,)), 0)]
)
def test_linalg_cross_with_broadcast(shapes, dim, dtype):
    a, b = shapes
    x = (torch.randn(a) * 4).to(dtype)
    y = (torch.randn(b) * 4).to(dtype)
    check_op(lambda s, o: torch.linalg.cross(s, o, dim=dim), x, y, grad=dtype == torch.float32)
    check_op(lambda s, o: torch.cross(s, o, dim=dim), x, y)


def test_linalg_cross_out_and_non_contiguous():
    x, y = torch.randn(3, 5), torch.randn(5, 3)
    expected = torch.linalg.cross(x.t(), y, out=torch.empty(0))
    out = torch.empty(0).to("tpu")
    torch.linalg.cross(x.to("tpu").t(), y.to("tpu"), out=out)
    assert_close(out, expected)


def test_linalg_cross_rejects_dim_not_of_size_3_like_cpu():
    x = torch.randn(4, 4)
    with pytest.raises(RuntimeError):
        torch.linalg.cross(x, x)
    with pytest.raises(RuntimeError):
        torch.linalg.cross(x.to("tpu"), x.to("tpu"))
