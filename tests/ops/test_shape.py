"""cat, tril and triu against CPU."""

import pytest
import torch
from reference import assert_close, check_op, make_input


def make(shape, dtype):
    return make_input(shape, dtype, int_range=(-50, 50))


ALL_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


# ---- cat ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_matches_cpu(dtype, dim):
    a, b, c = make((2, 3, 4), dtype), make((2, 3, 4), dtype), make((2, 3, 4), dtype)
    check_op(lambda a, b, c: torch.cat([a, b, c], dim), a, b, c, grad=dtype.is_floating_point)


def test_cat_of_mixed_dtypes_promotes():
    f, i, b, h = (
        torch.randn(2, 3),
        torch.randint(0, 9, (1, 3)),
        torch.ones(2, 3, dtype=torch.bool),
        torch.randn(1, 3).to(torch.bfloat16),
    )
    out = check_op(lambda f, i, b, h: torch.cat([f, i, b, h]), f, i, b, h, grad=True)
    assert out.dtype == torch.float32
    out = check_op(lambda i, b: torch.cat([b, i]), i, b)
    assert out.dtype == torch.int64
    out = check_op(lambda i, h: torch.cat([i, h]), i, h)
    assert out.dtype == torch.bfloat16


def test_cat_skips_legacy_empty_tensors():
    a, b = torch.randn(2, 3), torch.randn(1, 3)
    check_op(lambda e, a, b: torch.cat([e, a, e, b], 0), torch.tensor([]), a, b, grad=True)
    check_op(lambda e, a: torch.cat([a, e], 1), torch.tensor([]), a)
    check_op(lambda e: torch.cat([e, e]), torch.tensor([]))


def test_cat_with_empty_along_dim_and_empty_result():
    a, z = torch.randn(2, 3), torch.zeros(2, 0)
    check_op(lambda a, z: torch.cat([z, a, z], 1), a, z, grad=True)
    check_op(lambda z: torch.cat([z, z], 0), torch.zeros(0, 4))


def test_cat_noncontiguous_inputs():
    a, b = torch.randn(4, 3).t(), torch.randn(3, 10)[:, ::2]
    check_op(lambda a, b: torch.cat([a, b], 1), a, b, grad=True)


def test_cat_single_tensor_and_out_variant():
    a, b = torch.randn(2, 2), torch.randn(3, 2)
    check_op(lambda a: torch.cat([a], 0), a, grad=True)
    out = torch.empty(0, device="tpu")
    torch.cat([a.to("tpu"), b.to("tpu")], 0, out=out)
    assert_close(out, torch.cat([a, b], 0))


# ---- tril / triu -------------------------------------------------------------


@pytest.mark.parametrize("op", [torch.tril, torch.triu])
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3, 10, -10])
def test_triangle_on_batched_input(op, diagonal):
    check_op(lambda x: op(x, diagonal), torch.randn(2, 3, 4, 5), grad=True)


@pytest.mark.parametrize("op", [torch.tril, torch.triu])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_triangle_dtypes_and_shapes(op, dtype):
    check_op(lambda x: op(x, 1), make((5, 3), dtype))
    check_op(lambda x: op(x, -1), make((3, 5), dtype))
    check_op(lambda x: op(x), make((1, 1), dtype))
    check_op(lambda x: op(x), make((2, 0, 3), dtype))


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangle_inplace_on_transposed_view_and_out(name):
    def fn(x):
        x = x.clone()
        getattr(x.transpose(-1, -2), name + "_")(1)
        return x

    check_op(fn, torch.randn(2, 4, 3))
    x = torch.randn(4, 4)
    out = torch.empty(0, device="tpu")
    getattr(torch, name)(x.to("tpu"), -1, out=out)
    assert_close(out, getattr(torch, name)(x, -1))
