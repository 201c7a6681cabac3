"""Sorting and selection on tpu match CPU PyTorch: sort/argsort (stable,
descending, NaN largest), topk, kthvalue, median/nanmedian, mode; values,
indices, dims/keepdim, dtypes, non-contiguous inputs and gradients."""

import pytest
import torch
from reference import assert_close, check_op
from reference import make_input as make

NAN = float("nan")


def with_nans(shape):
    x = torch.randn(shape)
    x[torch.rand(shape) < 0.3] = NAN
    return x


def distinct(shape, dtype=torch.float32):
    """Values without ties (so every index result is determined)."""
    n = 1
    for s in shape:
        n *= s
    return torch.randperm(n).reshape(shape).to(dtype)


def check_nan(fn, *inputs):
    expected = fn(*inputs)
    actual = fn(*[i.to("tpu") for i in inputs])
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), e, equal_nan=True)


# ---- sort / argsort ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_matches_cpu_values_and_tie_order(dtype, dim, descending):
    x = make((6, 7), dtype)  # small integer range: many ties
    check_op(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_puts_nan_last_ascending_and_first_descending(descending):
    x = torch.tensor([[3.0, NAN, -1.0, NAN, 2.0], [NAN, 0.0, float("inf"), -float("inf"), 1.0]])
    check_nan(lambda t: torch.sort(t, dim=1, descending=descending, stable=True), x)


def test_sort_of_transposed_view_and_0d_and_empty():
    x = make((5, 4)).t()
    check_op(lambda t: torch.sort(t, dim=1), x)
    check_op(lambda t: torch.sort(t), torch.tensor(2.5))
    check_op(lambda t: torch.sort(t, dim=0), torch.empty(0, 3))


def test_sort_out_and_argsort_and_msort():
    x = distinct((4, 6))
    values, indices = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.sort(x.to("tpu"), dim=1, out=(values, indices))
    e = torch.sort(x, dim=1)
    assert_close(values, e.values)
    assert_close(indices, e.indices)
    check_op(lambda t: torch.argsort(t, dim=0, descending=True), x)
    check_op(torch.msort, x)


def test_sort_gradient_flows_to_sorted_positions():
    check_op(lambda t: torch.sort(t, dim=1, descending=True).values, distinct((3, 5)), grad=True)


# ---- topk ----------------------------------------------------------------------------


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk_matches_cpu(largest, dim):
    x = distinct((6, 8))
    check_op(lambda t: torch.topk(t, 3, dim=dim, largest=largest), x, grad=False)
    check_op(lambda t: torch.topk(t, 3, dim=dim, largest=largest).values, x, grad=True)


def test_topk_treats_nan_as_largest():
    x = torch.tensor([1.0, NAN, 3.0, -2.0])
    check_nan(lambda t: torch.topk(t, 2), x)
    check_nan(lambda t: torch.topk(t, 2, largest=False), x)


def test_topk_k_too_large_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.topk(torch.randn(3, device="tpu"), 5)


# ---- kthvalue / median / nanmedian / mode -----------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_matches_cpu_and_gradient(keepdim):
    x = distinct((4, 7))
    check_op(lambda t: torch.kthvalue(t, 3, dim=1, keepdim=keepdim), x)
    check_op(lambda t: torch.kthvalue(t, 2, dim=0, keepdim=keepdim).values, x, grad=True)


def test_kthvalue_k_out_of_range_raises_runtime_error():
    with pytest.raises(RuntimeError):
        torch.kthvalue(torch.randn(3, device="tpu"), 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_dim_matches_cpu_including_ties(dtype, dim, keepdim):
    x = make((5, 6), dtype)
    check_op(lambda t: torch.median(t, dim=dim, keepdim=keepdim), x)


def test_median_and_nanmedian_nan_rules():
    x = torch.tensor([[1.0, NAN, 3.0, NAN, 2.0], [NAN, NAN, NAN, NAN, NAN], [4.0, 1.0, 2.0, 3.0, 0.0]])
    check_nan(lambda t: torch.median(t, dim=1), x)
    check_nan(lambda t: torch.nanmedian(t, dim=1), x)
    check_nan(lambda t: (torch.median(t), torch.nanmedian(t)), x)
    check_nan(lambda t: (torch.median(t), torch.nanmedian(t)), x[2])


def test_median_of_everything_and_gradient():
    x = distinct((3, 5))
    check_op(torch.median, x, grad=True)
    check_op(lambda t: torch.median(t, 1).values, x.t(), grad=True)


def test_median_along_empty_dim_raises_index_error():
    with pytest.raises(IndexError):
        torch.median(torch.empty(3, 0, device="tpu"), dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_mode_picks_smallest_most_frequent_and_its_last_index(dtype):
    x = torch.tensor([[3, 1, 3, 1, 2, 2, 5], [1, 1, 1, 2, 2, 2, 0], [4, 4, 4, 4, 4, 4, 4]]).to(dtype)
    check_op(lambda t: torch.mode(t, dim=1), x)
    check_op(lambda t: torch.mode(t, dim=0, keepdim=True), x)


def test_quantile_and_nanquantile_match_cpu():
    x = with_nans((4, 9))
    q = torch.tensor([0.1, 0.5, 0.9])
    check_nan(lambda t: (torch.nanquantile(t, q.to(t.device), dim=1),), x)
    check_op(lambda t: torch.quantile(t, 0.3, dim=0, interpolation="midpoint"), torch.randn(5, 3), grad=True)
