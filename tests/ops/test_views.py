"""Views alias their base exactly as on CPU: every pattern below runs the same
code on a CPU tensor and on its tpu copy, then compares what it returned and
the base(s) it may have written through a view."""

import warnings

import pytest
import torch
from reference import assert_close


def _as_list(x):
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def check_views(fn, *bases):
    """Runs fn(*bases) on CPU clones and on tpu copies; compares every
    returned tensor (values, shape, stride, storage offset) and every base."""
    cpu = [b.clone() for b in bases]
    tpu = [b.to("tpu") for b in bases]
    expected = _as_list(fn(*cpu))
    actual = _as_list(fn(*tpu))
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if not isinstance(e, torch.Tensor):
            assert a == e, f"returned value {i}: {a} != {e}"
            continue
        assert a.shape == e.shape and a.dtype == e.dtype, f"returned tensor {i}"
        assert a.stride() == e.stride(), f"returned tensor {i}: stride {a.stride()} != {e.stride()}"
        assert a.storage_offset() == e.storage_offset(), f"returned tensor {i}: storage offset"
        assert_close(a, e, atol=0, rtol=0, msg=f"returned tensor {i}")
    for i, (a, e) in enumerate(zip(tpu, cpu)):
        assert_close(a, e, atol=0, rtol=0, msg=f"base {i} after the writes")
    return actual


def grid(*shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return torch.arange(n, dtype=torch.float32).reshape(shape).to(dtype)


# ---- in-place ops through views --------------------------------------------------
def test_inplace_add_on_transposed_view_writes_base():
    check_views(lambda x: x.t().add_(1), grid(3, 4))


def test_inplace_add_on_row_slice_writes_base():
    check_views(lambda x: x[1:3].add_(1), grid(4, 5))


def test_inplace_mul_on_strided_column_slice_writes_base():
    check_views(lambda x: x[:, ::2].mul_(2), grid(3, 6))


def test_inplace_on_negative_step_free_strided_slice_of_3d():
    check_views(lambda x: x[1:, ::2, 1::3].sub_(0.5), grid(3, 4, 7))


def test_view_of_view_written_then_base_read():
    def fn(x):
        v = x[1:].t()[::2]
        v.mul_(-1)
        return v, x.t()  # the base, read through another view

    check_views(fn, grid(4, 6))


def test_add_self_in_place_doubles():
    check_views(lambda x: x.add_(x), grid(3, 4))


def test_add_disjoint_view_of_self_in_place():
    # The right operand is a view of the same base that the write does not overlap.
    check_views(lambda x: x[1:].add_(x[:1]), grid(5, 3))


def raises_like_cpu(fn, cpu_base):
    """fn raises on the CPU base and on its tpu copy, with the same type."""
    with pytest.raises(Exception) as cpu_err:
        fn(cpu_base.clone())
    with pytest.raises(type(cpu_err.value)) as tpu_err:
        fn(cpu_base.to("tpu"))
    return cpu_err.value, tpu_err.value


# PyTorch registers Python meta kernels (torch/_meta_registrations.py) for
# add_/sub_/fill_..., replacing the C++ TensorIterator meta that checks
# overlap; LoweredKernel checks internal overlap and partial overlap between
# a written tensor and an input itself.


def test_add_partially_overlapping_view_of_self_raises_like_cpu():
    raises_like_cpu(lambda x: x[1:].add_(x[:-1]), grid(5, 3))


def test_fill_with_an_element_of_self_reads_it_before_writing_like_cpu():
    # ATen's fill_.Tensor clones a value that aliases self, so it is no overlap error.
    check_views(lambda x: x.fill_(x[2]), grid(4))
    check_views(lambda x: x[:2].fill_(x[3]), grid(4))


def test_fill_of_an_expanded_tensor_by_a_tensor_raises_like_cpu():
    # fill_ by a number may write an expanded tensor; by a tensor it copies, which may not.
    check_views(lambda x: x.expand(3).fill_(2.0), torch.ones(1))
    raises_like_cpu(lambda x: x.expand(3).fill_(torch.tensor(2.0, device=x.device)), torch.ones(1))


def test_out_into_transposed_view():
    a, b = torch.randn(4, 3), torch.randn(4, 3)

    def fn(x, a, b):
        torch.add(a, b, out=x.t())
        return x

    check_views(fn, torch.zeros(3, 4), a, b)


def test_out_into_row_slice():
    a, b = torch.randn(2, 4), torch.randn(4)

    def fn(x, a, b):
        torch.mul(a, b, out=x[1:3])
        return x

    check_views(fn, torch.zeros(5, 4), a, b)


def test_out_into_strided_slice_of_int_tensor():
    def fn(x):
        torch.add(torch.ones_like(x[::2, 1]), 7, out=x[::2, 1])
        return x

    check_views(fn, grid(6, 3, dtype=torch.int64))


def test_inplace_on_expanded_tensor_raises_like_cpu():
    cpu_err, tpu_err = raises_like_cpu(lambda x: x.expand(3, 4).add_(1), torch.ones(1, 4))
    assert "single memory location" in str(tpu_err)


def test_out_into_expanded_tensor_raises_like_cpu():
    raises_like_cpu(lambda x: torch.mul(torch.ones(3, 4, device=x.device), 2, out=x.expand(3, 4)), torch.ones(1, 4))


@pytest.mark.parametrize("op", ["fill_", "zero_", "masked_fill_"])
def test_ops_writing_one_value_may_write_an_expanded_tensor_like_cpu(op):
    write = {
        "fill_": lambda t: t.fill_(2),
        "zero_": lambda t: t.zero_(),
        "masked_fill_": lambda t: t.masked_fill_(torch.ones(3, 4, dtype=torch.bool, device=t.device), 5.0),
    }[op]
    cpu, tpu = torch.ones(1, 4), torch.ones(1, 4).to("tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # masked_fill_ on an expanded tensor is deprecated
        write(cpu.expand(3, 4))
        write(tpu.expand(3, 4))
    torch.testing.assert_close(tpu.cpu(), cpu)


def test_other_in_place_ops_refuse_an_expanded_tensor_like_cpu():
    raises_like_cpu(lambda x: x.expand(3, 4).add_(1), torch.ones(1, 4))
    raises_like_cpu(lambda x: x.expand(3, 4).fill_(torch.tensor(2.0, device=x.device)), torch.ones(1, 4))


# ---- every view op, written in place and read back ------------------------------
def test_select_view_written():
    check_views(lambda x: x.select(1, 2).fill_(-1), grid(3, 4))


def test_negative_select_view_written():
    check_views(lambda x: x.select(-1, -1).mul_(3), grid(3, 4, 2))


def test_narrow_view_written():
    check_views(lambda x: x.narrow(1, 1, 2).add_(10), grid(3, 4))


def test_unsqueeze_view_written():
    check_views(lambda x: x.unsqueeze(1).mul_(2), grid(3, 4))


def test_squeeze_view_written():
    check_views(lambda x: x.squeeze(1).add_(1), grid(3, 1, 4))


def test_permute_view_written():
    check_views(lambda x: x.permute(2, 0, 1)[1].add_(100), grid(2, 3, 4))


def test_diagonal_view_written():
    check_views(lambda x: x.diagonal().zero_(), grid(4, 4))


def test_offset_diagonal_view_written():
    check_views(lambda x: x.diagonal(offset=1, dim1=1, dim2=2).fill_(7), grid(2, 3, 4))


def test_unfold_non_overlapping_view_written():
    check_views(lambda x: x.unfold(0, 2, 2).mul_(-1), grid(8))


def test_unfold_overlapping_view_read():
    check_views(lambda x: x.unfold(1, 3, 1) * 2, grid(2, 6))


def test_as_strided_view_written():
    check_views(lambda x: x.as_strided((2, 2), (3, 2), 1).add_(50), grid(12))


def test_head_views_of_a_fused_qkv_projection_read_and_written():
    # k and v of an attention's fused qkv: their last row's trailing gap runs
    # past the storage; they are read and written as boxes of the whole
    # storage's stride pyramid (no padded copy).
    def heads(qkv):
        q, k, v = qkv.split(8, dim=-1)
        k, v = (t.view(3, 5, 2, 4).transpose(1, 2) for t in (k, v))
        out = [k.contiguous(), v * 2]
        k.mul_(3)
        v.add_(1)
        return out + [k, v]

    check_views(heads, torch.randn(3, 5, 24))


@pytest.mark.parametrize("offset", [7, 9])
def test_strided_view_ending_past_its_last_full_row_read_and_written(offset):
    # offset 7: the box sits inside the storage's row grid; offset 9: its
    # column range wraps past a row's end, read through a padded segment.
    def view_ops(base):
        v = base.as_strided((2, 3), (12, 2), offset)
        out = v * 1
        v.mul_(-1)
        return [out, v]

    check_views(view_ops, torch.randn(26))


def test_as_strided_overlapping_view_read():
    check_views(lambda x: x.as_strided((3, 3), (1, 1), 2) + 0, grid(10))


def test_view_reshape_written():
    check_views(lambda x: x.view(4, 3)[1:].sub_(1), grid(2, 6))


def test_reshape_of_contiguous_is_a_view_written():
    def fn(x):
        r = x.reshape(-1)
        r[2:5].fill_(0)
        return r

    check_views(fn, grid(3, 3))


def test_reshape_of_non_contiguous_copies():
    def fn(x):
        r = x.t().reshape(-1)
        r.fill_(0)  # a copy: the base keeps its values
        return r

    check_views(fn, grid(3, 4))


def test_expand_view_read_after_base_write():
    def fn(x):
        e = x.expand(3, 4)
        x.add_(1)
        return e + 0

    check_views(fn, grid(1, 4))


def test_flatten_view_written():
    check_views(lambda x: x.flatten(1)[:, ::3].fill_(-2), grid(2, 3, 4))


def test_movedim_view_written():
    check_views(lambda x: x.movedim(0, -1)[..., 1].mul_(5), grid(2, 3, 4))


def test_chunk_views_written():
    def fn(x):
        a, b, c = x.chunk(3, dim=1)
        a.add_(1)
        c.mul_(-1)
        return a, b, c

    check_views(fn, grid(2, 6))


def test_split_views_written():
    def fn(x):
        parts = x.split([1, 3], dim=0)
        parts[1].t()[0].fill_(9)
        return parts

    check_views(fn, grid(4, 3))


def test_unbind_views_written():
    def fn(x):
        rows = x.unbind(1)
        rows[0].zero_()
        rows[2].add_(rows[1])
        return rows

    check_views(fn, grid(2, 3))


def test_two_views_of_one_base_written_in_sequence():
    def fn(x):
        top, left = x[:2], x[:, :2]
        top.add_(1)
        left.mul_(10)  # sees the first write where they overlap
        return top, left

    check_views(fn, grid(4, 4))


def test_view_storage_offset_matches_cpu():
    def fn(x):
        v = x[2:, 1:][1]
        return v.storage_offset(), v.stride(), v.is_contiguous(), x.t().is_contiguous()

    check_views(fn, grid(5, 4))


# ---- indexing assignment, copy_, zero_ -----------------------------------------
def test_setitem_row_to_scalar():
    def fn(x):
        x[0] = 5

    check_views(fn, grid(3, 4))


def test_setitem_element_and_negative_index():
    def fn(x):
        x[1, -1] = -3.5
        x[-1][0] = 2

    check_views(fn, grid(3, 4))


def test_setitem_column_to_tensor():
    y = torch.tensor([10.0, 20.0, 30.0])

    def fn(x, y):
        x[:, 1] = y

    check_views(fn, grid(3, 4), y)


def test_setitem_slice_to_broadcast_tensor():
    def fn(x, y):
        x[1:, ::2] = y

    check_views(fn, grid(3, 6), torch.tensor([-1.0, -2.0, -3.0]))


def test_copy_with_broadcast_and_dtype_change():
    def fn(x, y):
        x.copy_(y)

    check_views(fn, torch.zeros(3, 4), torch.tensor([1, -2, 3, 4], dtype=torch.int64))


def test_copy_into_transposed_view_with_dtype_change():
    def fn(x, y):
        x.t().copy_(y)

    check_views(fn, torch.zeros(3, 4), grid(4, 3, dtype=torch.bfloat16))


def test_copy_float_into_int_truncates():
    def fn(x, y):
        x[1].copy_(y)

    check_views(fn, torch.zeros(2, 3, dtype=torch.int64), torch.tensor([1.7, -2.7, 3.2]))


def test_zero_on_strided_view():
    check_views(lambda x: x[::2, 1::2].zero_(), grid(5, 6))


def test_fill_on_transposed_view_of_int():
    check_views(lambda x: x.t()[1:].fill_(-4), grid(3, 4, dtype=torch.int64))


def test_clone_of_non_contiguous_view_is_contiguous():
    def fn(x):
        c = x.t()[1:].clone()
        x.zero_()  # the clone does not alias the base
        return c, c.is_contiguous()

    check_views(fn, grid(3, 4))


def test_contiguous_of_non_contiguous_view_copies():
    def fn(x):
        v = x[:, ::2]
        c = v.contiguous()
        v.fill_(1)
        return c, c.is_contiguous(), x.contiguous() is x

    out = check_views(fn, grid(3, 6))
    assert out[2] is True


def test_contiguous_of_contiguous_tensor_is_itself():
    x = torch.ones(3, 4, device="tpu")
    assert x.contiguous() is x


def test_views_share_storage_data_ptr():
    a = torch.ones(3, 4, device="tpu")
    assert a.view(-1).untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert a.t().untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert a[1:].data_ptr() == a.data_ptr() + 4 * a.element_size()
    assert a.clone().untyped_storage().data_ptr() != a.untyped_storage().data_ptr()


def test_T_property_then_in_place():
    def fn(x, y):
        x.T.sub_(y)

    check_views(fn, grid(3, 4), torch.tensor([1.0, 2.0, 3.0]))


def test_mT_of_batch_then_in_place():
    check_views(lambda x: x.mT[:, 0].add_(1), grid(2, 3, 4))


# ---- dtype views, resize, set_ -------------------------------------------------------
def test_view_as_int32_bitcasts_float():
    def fn(x):
        return x.view(torch.int32)

    check_views(fn, torch.tensor([1.0, -2.5, 0.0, float("inf")]))


def test_int32_view_written_changes_float_base():
    def fn(x):
        x.view(torch.int32)[1:3].fill_(0x40400000)  # 3.0f

    check_views(fn, torch.tensor([1.0, -2.5, 0.0, 7.0]))


def test_bool_view_of_uint8_is_supported():
    def fn(x):
        return x.view(torch.bool) | False

    check_views(fn, torch.tensor([0, 1, 0, 1], dtype=torch.uint8))


def test_resize_growth_keeps_data():
    cpu = grid(2, 3)
    tpu = cpu.to("tpu")
    cpu.resize_(4, 3)
    tpu.resize_(4, 3)
    assert tpu.shape == cpu.shape
    assert_close(tpu[:2], cpu[:2], atol=0, rtol=0)


def test_resize_shrink_then_view():
    def fn(x):
        x.resize_(2, 2)
        return x + 0

    check_views(fn, grid(3, 3))


def test_set_tensor_shares_storage():
    def fn(x, y):
        x.set_(y)
        x[0] = -1  # writes through to y
        return x, y, x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()

    out = check_views(fn, torch.zeros(2), grid(3, 2))
    assert out[2] is True


def test_set_tensor_of_view_keeps_its_layout():
    def fn(x, y):
        x.set_(y.t())
        x.mul_(2)
        return x

    check_views(fn, torch.zeros(1), grid(2, 3))


# ---- copies across devices through views ---------------------------------------------
def test_cpu_to_tpu_copy_into_non_contiguous_view():
    src = torch.randn(4, 3)
    cpu, tpu = torch.zeros(3, 4), torch.zeros(3, 4, device="tpu")
    cpu.t().copy_(src)
    tpu.t().copy_(src)
    assert_close(tpu, cpu, atol=0, rtol=0)


def test_cpu_to_tpu_copy_into_strided_slice_with_broadcast():
    src = torch.tensor([1.0, 2.0, 3.0])
    cpu, tpu = torch.zeros(4, 6), torch.zeros(4, 6, device="tpu")
    cpu[1:, ::2].copy_(src)
    tpu[1:, ::2].copy_(src)
    assert_close(tpu, cpu, atol=0, rtol=0)


def test_tpu_to_cpu_copy_from_non_contiguous_view():
    cpu = grid(4, 5)
    tpu = cpu.to("tpu")
    assert_close(tpu[1:, ::2].t().cpu().to("tpu"), cpu[1:, ::2].t(), atol=0, rtol=0)
    host = torch.empty(3, 3)
    host.copy_(tpu[1:, ::2].t())
    torch.testing.assert_close(host, cpu[1:, ::2].t(), atol=0, rtol=0)


def test_tpu_to_cpu_into_non_contiguous_cpu_view():
    cpu = grid(3, 4)
    host = torch.zeros(4, 3)
    host.t().copy_(cpu.to("tpu"))
    torch.testing.assert_close(host.t(), cpu, atol=0, rtol=0)


# ---- bool and int64 views -----------------------------------------------------------
def test_bool_view_written_in_place():
    def fn(x):
        x[:, 1].logical_not_()
        x.t()[0].fill_(True)

    check_views(fn, torch.tensor([[True, False, True], [False, False, True]]))


def test_bool_masked_fill_through_slice():
    def fn(x, m):
        x[1:].masked_fill_(m, 0)

    check_views(fn, grid(3, 4), torch.tensor([True, False, False, True]))


def test_int64_views_written_in_place():
    def fn(x):
        x[::2].mul_(3)
        x.t()[1].add_(x[0, 0])
        return x.view(-1)[::5]

    check_views(fn, grid(4, 5, dtype=torch.int64))


def test_bfloat16_slice_written():
    check_views(lambda x: x[:, 1:3].add_(0.5), grid(3, 4, dtype=torch.bfloat16))


def test_zero_dim_view_of_element_written():
    def fn(x):
        e = x[1, 2]
        e.fill_(42)
        return e, e.dim()

    check_views(fn, grid(3, 4))


def test_empty_slice_write_is_a_no_op():
    check_views(lambda x: x[2:2].add_(1), grid(3, 4))
