"""Scans on tpu match CPU PyTorch: cumprod, cummax/cummin (values and the
index PyTorch picks on ties and NaN), logcumsumexp; dims, dtypes, 0-d and
empty inputs, non-contiguous views, in-place/out= forms and gradients."""

import pytest
import torch
from reference import assert_close, check_op

NAN = float("nan")
INF = float("inf")


def make(shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.3
    if not dtype.is_floating_point:
        return torch.randint(-3, 4, shape, dtype=dtype)
    return (torch.rand(shape) + 0.5).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_matches_cpu_and_promotes_integers(dtype, dim):
    out = check_op(lambda t: torch.cumprod(t, dim), make((5, 7), dtype))
    assert out.dtype == torch.cumprod(make((1, 1), dtype), 0).dtype


def test_cumprod_gradient_with_and_without_zeros():
    check_op(lambda t: torch.cumprod(t, 1), torch.randn(3, 6), grad=True)
    x = torch.randn(3, 6)
    x[0, 2] = 0
    x[1, 1] = 0
    x[1, 4] = 0
    check_op(lambda t: torch.cumprod(t, 1), x, grad=True)


def test_cumprod_inplace_out_dtype_0d_empty_and_transposed():
    x = make((4, 5))
    t = x.to("tpu")
    t.cumprod_(0)
    assert_close(t, x.cumprod(0))
    out = torch.empty(0, device="tpu", dtype=torch.float32)
    torch.cumprod(make((4, 5), torch.int64).to("tpu"), 1, dtype=torch.float32, out=out)
    check_op(lambda t: torch.cumprod(t, 0), torch.tensor(3.0))
    check_op(lambda t: torch.cumprod(t, 1), torch.empty(2, 0))
    check_op(lambda t: torch.cumprod(t, 1), make((5, 4)).t())


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_cummax_cummin_match_cpu_indices_on_ties(op, dtype):
    check_op(lambda t: op(t, 1), make((4, 9), dtype))


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_nan_sticks_and_moves_index_to_latest_nan(op):
    x = torch.tensor([[1.0, NAN, 3.0, NAN, 2.0], [2.0, 2.0, -INF, INF, 0.0]])
    e = op(x, 1)
    a = op(x.to("tpu"), 1)
    torch.testing.assert_close(a.values.cpu(), e.values, equal_nan=True)
    assert torch.equal(a.indices.cpu(), e.indices)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_gradient_and_0d(op):
    check_op(lambda t: op(t, 0).values, torch.randn(6, 3), grad=True)
    check_op(lambda t: op(t, 0), torch.tensor(1.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logcumsumexp_matches_cpu_with_large_and_infinite_values(dtype):
    x = torch.randn(4, 10) * 30
    x[0, 3] = -INF
    x[1, :] = -INF
    x[2, 5] = INF
    check_op(lambda t: torch.logcumsumexp(t, 1), x.to(dtype))


def test_logcumsumexp_gradient():
    check_op(lambda t: torch.logcumsumexp(t, 0), torch.randn(7, 3), grad=True)
