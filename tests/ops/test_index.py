"""Indexing ops against CPU: gather/scatter, index_select/index_add,
advanced indexing (x[idx], x[idx] = v, x[idx] += v) and embedding backward."""

import pytest
import torch
from reference import assert_close, check_op, make_input

FLOAT_DTYPES = [torch.float32, torch.bfloat16]
ALL_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


def make(shape, dtype):
    return make_input(shape, dtype, int_range=(-50, 50))


def unique_index(shape, dim, size):
    """Index for scatter along `dim` with no repeats, so overwrite is deterministic."""
    perm = torch.stack([torch.randperm(size)[: shape[dim]] for _ in range(shape[0] if dim else shape[1])])
    return perm.t() if dim == 0 else perm


# ---- gather ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_matches_cpu(dtype, dim):
    x = make((4, 5, 6), dtype)
    shape = [3, 4, 5]
    shape[dim] = 7
    index = torch.randint(0, x.shape[dim], shape)
    check_op(lambda x, i: torch.gather(x, dim, i), x, index, grad=dtype in FLOAT_DTYPES)


def test_gather_backward_sums_repeated_indices():
    x = torch.randn(3, 4)
    index = torch.tensor([[0, 0, 0], [1, 1, 3], [2, 2, 2]])
    check_op(lambda x, i: torch.gather(x, 1, i), x, index, grad=True)


def test_gather_int32_index_and_transposed_input():
    x = torch.randn(5, 4).t()
    index = torch.randint(0, 5, (4, 3), dtype=torch.int32)
    check_op(lambda x, i: torch.gather(x, 1, i), x, index, grad=True)


def test_gather_zero_dim_and_empty():
    check_op(lambda x, i: torch.gather(x, 0, i), torch.tensor(3.5), torch.tensor(0))
    check_op(lambda x, i: torch.gather(x, 1, i), torch.randn(3, 4), torch.zeros(3, 0, dtype=torch.long))


def test_gather_out_variant():
    x, index = torch.randn(3, 4), torch.randint(0, 4, (3, 2))
    out = torch.empty(3, 2, device="tpu")
    torch.gather(x.to("tpu"), 1, index.to("tpu"), out=out)
    assert_close(out, torch.gather(x, 1, index))


# ---- scatter / scatter_add ---------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_src_matches_cpu(dtype, dim):
    self = make((5, 6), dtype)
    index = unique_index((3, 4), dim % 2, self.shape[dim])
    src = make((3, 4), dtype)
    check_op(lambda s, i, u: torch.scatter(s, dim, i, u), self, index, src, grad=dtype in FLOAT_DTYPES)


def test_scatter_reads_only_index_extent_of_larger_src():
    index = torch.tensor([[0, 3], [2, 1]])
    check_op(lambda s, i, u: torch.scatter(s, 1, i, u), torch.zeros(3, 4), index, torch.randn(3, 5))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter_value_matches_cpu(dtype):
    self = make((4, 5), dtype)
    index = torch.tensor([[0, 1], [2, 3], [4, 4], [0, 0]])
    value = True if dtype == torch.bool else 7
    check_op(lambda s, i: torch.scatter(s, 1, i, value), self, index)
    if dtype.is_floating_point:
        check_op(lambda s, i: torch.scatter(s, -1, i, 0.25), self, index)


def test_scatter_inplace_on_transposed_view():
    base = torch.zeros(4, 3)
    index = torch.tensor([[0, 2, 1], [1, 0, 2]])
    src = torch.randn(2, 3)

    def fn(b, i, s):
        b = b.clone()
        b.t().scatter_(1, i.t(), s.t())
        return b

    check_op(fn, base, index, src)


def test_scatter_value_inplace():
    def fn(x, i):
        x = x.clone()
        x.scatter_(0, i, -1.0)
        return x

    check_op(fn, torch.randn(3, 4), torch.tensor([[2, 0, 1, 2]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, -1])
def test_scatter_add_sums_duplicates(dtype, dim):
    self = make((4, 5), dtype)
    index = torch.randint(0, 4 if dim == 0 else 5, (6, 5) if dim == 0 else (4, 8))
    src = make(tuple(index.shape), dtype)
    check_op(lambda s, i, u: torch.scatter_add(s, dim, i, u), self, index, src, grad=dtype.is_floating_point)


def test_scatter_add_inplace_and_out():
    self, index, src = torch.randn(3, 4), torch.tensor([[0, 0, 1, 1]]), torch.randn(1, 4)

    def inplace(s, i, u):
        s = s.clone()
        s.scatter_add_(0, i, u)
        return s

    check_op(inplace, self, index, src)
    out = torch.empty(3, 4, device="tpu")
    torch.scatter_add(self.to("tpu"), 0, index.to("tpu"), src.to("tpu"), out=out)
    assert_close(out, torch.scatter_add(self, 0, index, src))


# ---- index_select / index_add -----------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_matches_cpu(dtype, dim):
    x = make((4, 5, 3), dtype)
    index = torch.tensor([2, 0, 2, 1])
    check_op(lambda x, i: torch.index_select(x, dim, i), x, index, grad=dtype in FLOAT_DTYPES)


def test_index_select_int32_scalar_index_noncontiguous_and_empty():
    x = torch.randn(6, 4)[::2]
    check_op(lambda x, i: torch.index_select(x, 0, i), x, torch.tensor([2, 0], dtype=torch.int32), grad=True)
    check_op(lambda x, i: torch.index_select(x, 1, i), x, torch.tensor(3), grad=True)
    check_op(lambda x, i: torch.index_select(x, 1, i), x, torch.zeros(0, dtype=torch.long))
    check_op(lambda x, i: torch.index_select(x, 0, i), torch.tensor(2.0), torch.tensor([0]))


def test_index_select_out_variant():
    x, index = torch.randn(4, 3), torch.tensor([3, 3, 0])
    out = torch.empty(0, device="tpu")
    torch.index_select(x.to("tpu"), 0, index.to("tpu"), out=out)
    assert_close(out, torch.index_select(x, 0, index))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_sums_duplicates(dtype, dim):
    x = make((4, 5, 3), dtype)
    index = torch.tensor([1, 0, 1, 1, 2, 0])
    shape = list(x.shape)
    shape[dim] = len(index)
    source = make(tuple(shape), dtype)
    check_op(lambda x, i, s: torch.index_add(x, dim, i, s), x, index, source, grad=dtype.is_floating_point)
    check_op(lambda x, i, s: torch.index_add(x, dim, i, s, alpha=3), x, index, source)


def test_index_add_inplace_on_view_with_float_alpha():
    base = torch.randn(5, 4)

    def fn(b, i, s):
        b = b.clone()
        b[1:].t().index_add_(1, i, s, alpha=0.5)
        return b

    check_op(fn, base, torch.tensor([0, 3, 0]), torch.randn(4, 3))


# ---- advanced indexing: index ------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_with_lists_matches_cpu(dtype):
    x = make((3, 4, 5), dtype)
    grad = dtype in FLOAT_DTYPES
    check_op(lambda x: x[:, [0, 2]], x, grad=grad)
    check_op(lambda x: x[[0, 1], [1, 2]], x, grad=grad)
    check_op(lambda x: x[[0, 0, 2]], x, grad=grad)


def test_index_2d_index_tensor_and_negative_indices():
    x = torch.randn(5, 3)
    check_op(lambda x, i: x[i], x, torch.tensor([[0, -1], [4, -5], [2, 2]]), grad=True)
    check_op(lambda x, i: x[:, i], x, torch.tensor([[-1], [0]], dtype=torch.int32), grad=True)


def test_index_adjacent_indices_stay_in_place():
    x = torch.randn(2, 3, 4, 5)
    i, j = torch.tensor([[0, 2], [1, 1]]), torch.tensor([3])  # broadcast to [2, 2]
    out = check_op(lambda x, i, j: x[:, i, j], x, i, j, grad=True)
    assert out.shape == (2, 2, 2, 5)


def test_index_separated_indices_go_first():
    x = torch.randn(2, 3, 4, 5)
    i, j = torch.tensor([0, 2, 1]), torch.tensor([4, 0, 4])
    out = check_op(lambda x, i, j: x[:, i, :, j], x, i, j, grad=True)
    assert out.shape == (3, 2, 4)
    check_op(lambda x, i, j: x[i, :, j], x, torch.tensor([1]), torch.tensor([[0], [3]]), grad=True)


def test_index_noncontiguous_input_and_empty_index():
    x = torch.randn(4, 6).t()
    check_op(lambda x, i: x[i, 1:], x, torch.tensor([5, 0, 5]), grad=True)
    check_op(lambda x, i: x[i], x, torch.zeros(0, dtype=torch.long))


def test_index_out_variant():
    x, i = torch.randn(4, 3), torch.tensor([1, 3])
    out = torch.empty(0, device="tpu")
    torch.ops.aten.index.Tensor_out(x.to("tpu"), [i.to("tpu")], out=out)
    assert_close(out, x[i])


# ---- advanced indexing: index_put -------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_setitem_with_index_lists(dtype):
    x = make((3, 4, 5), dtype)
    v = make((3, 2, 5), dtype)

    def fn(x, v):
        x = x.clone()
        x[:, [0, 2]] = v
        x[[0, 1], [1, 3]] = v[0, 0]
        return x

    check_op(fn, x, v, grad=dtype in FLOAT_DTYPES)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_setitem_add_accumulates_duplicates_via_index_put(dtype):
    x = make((4, 3), dtype)
    v = make((5, 3), dtype)

    def fn(x, i, v):
        return x.index_put((i,), v, accumulate=True)

    check_op(fn, x, torch.tensor([0, 2, 0, -1, 0]), v, grad=dtype.is_floating_point)


def test_setitem_iadd_and_scalar_broadcast():
    def fn(x, i):
        x = x.clone()
        x[i, 1:] += 2.0
        x[:, i[:1]] = -1.0
        return x

    check_op(fn, torch.randn(4, 3), torch.tensor([2, 0, 3]))


def test_index_put_on_noncontiguous_view_updates_base():
    def fn(b, i, v):
        b = b.clone()
        b.t()[i] = v
        return b

    check_op(fn, torch.randn(3, 5), torch.tensor([[4], [1]]), torch.randn(2, 1, 3))


def test_index_put_functional_overwrite():
    x, i, v = torch.randn(3, 4), torch.tensor([2, 0]), torch.randn(2, 4)
    check_op(lambda x, i, v: torch.index_put(x, (i,), v), x, i, v, grad=True)


# ---- embedding backward ------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_backward_matches_cpu(dtype, padding_idx, scale_grad_by_freq):
    weight = torch.randn(10, 4).to(dtype)
    idx = torch.tensor([[1, 2, 1, 9], [0, 1, 2, 2]])
    check_op(
        lambda w, i: torch.nn.functional.embedding(
            i, w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq
        ),
        weight,
        idx,
        grad=True,
    )


def test_embedding_dense_backward_direct():
    g, idx = torch.randn(2, 3, 5), torch.tensor([[3, 3, 0], [6, 6, 6]], dtype=torch.int32)
    check_op(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 7, -1, True), g, idx)


# ---- boolean masks -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_setitem_with_mask_and_scalar(dtype):
    def fn(x, m):
        x = x.clone()
        x[m] = True if dtype == torch.bool else 3
        return x

    x = make((3, 4, 5), dtype)
    check_op(fn, x, torch.randn(3, 4, 5) > 0)
    check_op(fn, x, torch.randn(3, 4) > 0)


@pytest.mark.filterwarnings("ignore:indexing with dtype torch.uint8")
def test_setitem_with_mask_takes_values_row_by_row():
    x, m = torch.randn(3, 4, 5), torch.tensor([True, False, True, True])
    nnz = int(m.sum())

    def fn(x, m, v):
        x = x.clone()
        x[:, m] = v
        return x

    check_op(fn, x, m, torch.randn(3, nnz, 5))
    check_op(fn, x, m, torch.randn(nnz, 1))
    check_op(fn, x, m.to(torch.uint8), torch.randn(nnz, 5))

    def flat(x, m, v):
        x = x.clone()
        x[m] = v
        return x

    mask = x > 0
    check_op(flat, x, mask, torch.randn(int(mask.sum())))


def test_index_put_with_mask_accumulates():
    x, m = torch.randn(4, 5), torch.tensor([False, True, True, False])
    check_op(lambda x, m, v: x.index_put((m,), v, accumulate=True), x, m, torch.randn(2, 5))
    check_op(lambda x, m, v: x.index_put((m,), v, accumulate=True), x, m, torch.randn(5))


def test_index_put_with_no_true_mask_element_changes_nothing():
    x = torch.randn(4, 5)
    check_op(lambda x, m, v: x.index_put((m,), v), x, torch.zeros(4, dtype=torch.bool), torch.randn(0, 5))


def test_index_put_with_a_mask_among_other_index_tensors_matches_cpu():
    # FCOS's loss writes gt_classes_targets[foreground_mask, labels] = 1.0: the
    # mask's coordinates broadcast against the other index, as ATen expands it.
    x, m = torch.zeros(6, 5), torch.tensor([True, False, True, True, False, True])
    labels = torch.tensor([1, 4, 0, 2])

    def put(x, m, i):
        x = x.clone()
        x[m, i] = 1.0
        return x

    check_op(put, x, m, labels)
    check_op(lambda x, m, i, v: x.index_put((m, i), v, accumulate=True), x, m, labels, torch.randn(4))
    check_op(lambda x, m, i: x.index_put((i, m[:5]), torch.tensor(2.0)), x, m, torch.tensor([0, 3, 5]))


def test_index_with_mask_reads_selected_elements():
    # The mask becomes coordinates on the host first (a data-dependent size).
    x = torch.randn(3, 4)
    check_op(lambda x, m: x[m], x, x > 0)
    check_op(lambda x, m: x[m], x, x > 0, grad=True)
    check_op(lambda x, m: x[:, m], x, torch.tensor([True, False, True, True]))


def test_index_with_cpu_index_tensor_as_cuda_allows():
    x = torch.randn(4, 5)
    idx = torch.tensor([3, 0])
    torch.testing.assert_close(x.tpu()[idx].cpu(), x[idx])
    y = x.tpu()
    y[idx] = 1.0
    x[idx] = 1.0
    torch.testing.assert_close(y.cpu(), x)
