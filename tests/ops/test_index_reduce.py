"""Reducing and copying scatters on tpu match CPU PyTorch: scatter_reduce
(sum/prod/mean/amax/amin, include_self), scatter(reduce=), index_reduce,
index_copy, index_fill, masked_scatter, put, take, embedding_renorm_;
duplicates, negative indices where PyTorch allows them, bounds errors,
in-place/out= forms and gradients."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, assert_each_close_on_host, assert_outcome_like_cpu, check_op, outcome_on_cpu
from reference import make_input as make

import torch_tpu

REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_reduce_matches_cpu_with_duplicate_indices(reduce, include_self, dtype):
    self_, src = make((4, 5), dtype), make((6, 5), dtype)
    index = torch.randint(0, 4, (6, 5))
    check_op(lambda s, i, x: s.scatter_reduce(0, i, x, reduce, include_self=include_self), self_, index, src)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_scatter_reduce_gradient(reduce):
    index = torch.tensor([[0, 1, 0], [2, 2, 1]])
    check_op(
        lambda s, x: s.scatter_reduce(1, index.to(s.device), x, reduce), torch.randn(2, 4), torch.randn(2, 3), grad=True
    )


def test_scatter_reduce_inplace_and_index_smaller_than_src():
    s, src = make((3, 6)), make((5, 8))
    index = torch.randint(0, 6, (2, 4))
    t = s.to("tpu")
    t.scatter_reduce_(1, index.to("tpu"), src.to("tpu"), "amax")
    assert_close(t, s.clone().scatter_reduce_(1, index, src, "amax"))


def test_scatter_reduce_index_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        t = torch.zeros(3, device="tpu").scatter_reduce(
            0, torch.tensor([5], device="tpu"), torch.ones(1, device="tpu"), "sum"
        )
        t.cpu()


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_legacy_reduce_tensor_and_value(reduce):
    s, src = make((4, 5)), make((4, 5))
    index = torch.randint(0, 4, (3, 5))
    check_op(lambda t, i, x: t.scatter(0, i, x, reduce=reduce), s, index, src)
    check_op(lambda t, i: t.scatter(0, i, 1.5, reduce=reduce), s, index)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_index_reduce_matches_cpu(reduce, include_self, dtype):
    s, src = make((5, 3), dtype), make((4, 3), dtype)
    index = torch.tensor([0, 4, 0, 2])
    check_op(lambda t, x: t.index_reduce(0, index.to(t.device), x, reduce, include_self=include_self), s, src)
    check_op(
        lambda t, x: t.index_reduce(1, index[:2].to(t.device) % 3, x, reduce, include_self=include_self),
        make((4, 3), dtype),
        make((4, 2), dtype),
    )


def test_index_reduce_gradient():
    index = torch.tensor([0, 2, 0])
    check_op(
        lambda t, x: t.index_reduce(0, index.to(t.device), x, "mean"), torch.randn(3, 2), torch.randn(3, 2), grad=True
    )


def test_index_copy_and_inplace_and_gradient():
    index = torch.tensor([3, 0, 1])
    check_op(lambda t, x: t.index_copy(0, index.to(t.device), x), torch.randn(4, 2), torch.randn(3, 2), grad=True)
    check_op(lambda t, x: t.index_copy(1, index.to(t.device), x), make((2, 4), torch.int64), make((2, 3), torch.int64))


def test_index_copy_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        torch.zeros(3, device="tpu").index_copy(0, torch.tensor([3], device="tpu"), torch.ones(1, device="tpu")).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_index_fill_scalar_and_tensor_value_with_negative_index(dtype):
    index = torch.tensor([0, -1])
    check_op(lambda t: t.index_fill(1, index.to(t.device), 1), make((3, 4), dtype))
    check_op(lambda t: t.index_fill(0, index.to(t.device), torch.tensor(0).to(t.device, dtype)), make((3, 4), dtype))


def test_index_fill_gradient_and_inplace_on_view():
    check_op(lambda t: t.index_fill(0, torch.tensor([1]).to(t.device), -2.0), torch.randn(3, 2), grad=True)
    x = torch.randn(4, 5)
    t = x.to("tpu")
    t.t().index_fill_(0, torch.tensor([2], device="tpu"), 7.0)
    x.t().index_fill_(0, torch.tensor([2]), 7.0)
    assert_close(t, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_masked_scatter_fills_true_positions_in_order(dtype):
    s, src = make((3, 4), dtype), make((12,), dtype)
    mask = torch.rand(3, 4) > 0.5
    check_op(lambda t, m, x: t.masked_scatter(m, x), s, mask, src)
    check_op(lambda t, m, x: t.masked_scatter(m, x), s, torch.tensor([True, False, False, True]), src)


def test_masked_scatter_gradient():
    mask = torch.tensor([[True, False, True], [False, True, True]])
    check_op(lambda t, x: t.masked_scatter(mask.to(t.device), x), torch.randn(2, 3), torch.randn(6), grad=True)


def test_take_and_put_with_negative_indices_and_accumulate():
    x = torch.randn(3, 4)
    index = torch.tensor([[0, -1], [5, 5]])
    check_op(lambda t: torch.take(t, index.to(t.device)), x, grad=True)
    check_op(lambda t: t.put(index.to(t.device), torch.tensor([1.0, 2, 3, 4]).to(t.device), accumulate=True), x)
    check_op(lambda t: t.put(torch.tensor([1, -2]).to(t.device), torch.tensor([5.0, 6]).to(t.device)), x)


def test_take_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        torch.take(torch.zeros(2, 2, device="tpu"), torch.tensor([4], device="tpu")).cpu()


def test_embedding_renorm_scales_named_rows_once():
    w = torch.randn(6, 3) * 3
    idx = torch.tensor([1, 3, 1])
    t = w.to("tpu")
    with torch.no_grad():
        torch.embedding_renorm_(t, idx.to("tpu"), 1.0, 2.0)
        torch.embedding_renorm_(w, idx, 1.0, 2.0)
    assert_close(t, w)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_forward_and_gradient(mode, padding_idx):
    weight = torch.randn(8, 3)
    indices = torch.tensor([1, 2, 4, 5, 2, 3, 7, 0])
    offsets = torch.tensor([0, 3, 3, 6])  # bag 1 is empty
    fn = lambda w: torch.nn.functional.embedding_bag(
        indices.to(w.device), w, offsets.to(w.device), mode=mode, padding_idx=padding_idx
    )
    check_op(fn, weight, grad=True)


@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_embedding_bag_max_takes_a_nan_only_as_its_bags_first_row(mode, padding_idx):
    """CPU's and CUDA's max keeps a bag's first counted row and replaces it
    only by a greater one: a NaN in a later row is left out, a NaN in the
    first row is the maximum, and max_indices (the backward's rows) follow.
    Every NaN propagated before (found by the op fuzz, seed 12)."""
    weight = torch.randn(6, 4)
    weight[1, 0] = weight[2, 1] = weight[4, 3] = float("nan")
    indices = torch.tensor([0, 1, 2, 1, 1, 0, 3, 2, 4, 5, 5, 4])
    offsets = torch.tensor([0, 2, 4, 4, 7, 9])  # bag 3 is empty; bag 2 starts at padding_idx 1
    fn = lambda w: torch.nn.functional.embedding_bag(
        indices.to(w.device), w, offsets.to(w.device), mode="max", padding_idx=padding_idx
    )
    with torch_tpu.eager_mode(mode):
        out = check_op(fn, weight, grad=True)
        expected = torch.ops.aten._embedding_bag(weight, indices, offsets, False, 2, False, None, False, -1)
        actual = torch.ops.aten._embedding_bag(weight.to("tpu"), indices.to("tpu"), offsets.to("tpu"), False, 2)
        filled = expected[2] > 0  # an empty bag's max index: -1 on tpu, 0 on CPU (left as it was)
        assert_close(actual[3][filled.to("tpu")], expected[3][filled])  # max_indices
    assert out.cpu().isnan().any() and not out.cpu().isnan().all()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("index_dtype", [torch.uint8, torch.int16, torch.int32, torch.float32])
@pytest.mark.parametrize("offsets_dtype", [torch.int64, torch.int32, torch.uint8, None])
@pytest.mark.parametrize("bag_mode", ["sum", "mean", "max"])
def test_embedding_bag_promotes_indices_and_offsets_as_cpu(mode, index_dtype, offsets_dtype, bag_mode):
    # CPU's and CUDA's kernels bring indices and offsets to their promoted
    # type first: uint8 or int16 indices beside int64 offsets (or a 2-D
    # input, whose offsets are int64) compute; both uint8 raise. tpu raised
    # the meta kernel's "expected indices to be long or int" for all.
    torch.manual_seed(0)
    weight = torch.randn(6, 3)
    indices = torch.tensor([0, 5, 2, 2, 1]).to(index_dtype)
    if offsets_dtype is None:
        indices, offsets = indices.reshape(1, 5), None
    else:
        offsets = torch.tensor([0, 2]).to(offsets_dtype)

    def bags_and_gradient(device):
        w = weight.to(device).requires_grad_(True)
        out = F.embedding_bag(indices.to(device), w, None if offsets is None else offsets.to(device), mode=bag_mode)
        (grad,) = torch.autograd.grad(out.sum(), w)
        return out.detach().cpu(), grad.cpu()

    expected = outcome_on_cpu(lambda: bags_and_gradient("cpu"))
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # the second call replays
            assert_outcome_like_cpu(
                lambda: bags_and_gradient("tpu"), expected, assert_each_close_on_host, same_message=False
            )


def test_embedding_bag_per_sample_weights_and_2d_input():
    weight, psw = torch.randn(6, 4), torch.rand(2, 3)
    indices = torch.tensor([[0, 2, 5], [1, 1, 4]])
    fn = lambda w, p: torch.nn.functional.embedding_bag(indices.to(w.device), w, per_sample_weights=p, mode="sum")
    check_op(fn, weight, psw, grad=True)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce_lengths_and_offsets_with_empty_segment(reduce, initial):
    data = torch.rand(6, 3) + 0.5
    lengths, offsets = torch.tensor([2, 0, 3, 1]), torch.tensor([0, 2, 2, 5, 6])
    for kw in (dict(lengths=lengths), dict(offsets=offsets)):
        fn = lambda d: torch.segment_reduce(d, reduce, initial=initial, **{k: v.to(d.device) for k, v in kw.items()})
        check_op(fn, data, grad=initial is None)


def test_segment_reduce_batched_lengths_along_last_axis():
    data, lengths = torch.randn(2, 6), torch.tensor([[2, 4], [3, 3]])
    check_op(lambda d: torch.segment_reduce(d, "sum", lengths=lengths.to(d.device), axis=1), data, grad=True)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_include_last_offset_short_of_the_end(mode):
    weight, indices, offsets = torch.randn(5, 4), torch.tensor([0, 1, 2, 3, 4, 0]), torch.tensor([0, 2, 4])
    fn = lambda w: torch.nn.functional.embedding_bag(
        indices.to(w.device), w, offsets.to(w.device), mode=mode, include_last_offset=True
    )
    check_op(fn, weight)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("bag_mode", ["sum", "mean", "max"])
def test_embedding_bag_index_out_of_range_raises_cpus_runtime_error_at_the_next_read(mode, bag_mode):
    # It raised IndexError (embedding's type); CPU's kernel raises RuntimeError,
    # as CUDA's device-side assert does (found by scripts/fuzz_ops.py --seed 31).
    weight, indices, offsets = torch.randn(1, 3), torch.tensor([0, 1, 0]), torch.tensor([0, 2])

    def fn(w, i, o):
        return F.embedding_bag(i, w, o, mode=bag_mode)

    with pytest.raises(RuntimeError) as cpu_err:
        fn(weight, indices, offsets)
    assert not isinstance(cpu_err.value, IndexError)
    bag = torch.compile(fn, backend="tpu") if mode == "compiled" else fn
    try:
        with torch_tpu.eager_mode("strict" if mode == "compiled" else mode):
            w, i, o = weight.to("tpu"), indices.to("tpu"), offsets.to("tpu")
            with pytest.raises(RuntimeError, match="embedding_bag: index out of range") as tpu_err:
                bag(w, i, o).cpu()
            assert not isinstance(tpu_err.value, IndexError)
            torch_tpu.synchronize()  # raised once
            assert_close(bag(w, torch.tensor([0, 0, 0], device="tpu"), o), fn(weight, torch.tensor([0, 0, 0]), offsets))
    finally:
        torch._dynamo.reset()


def test_take_out_may_not_alias_its_input():
    x = torch.randn(6, device="tpu")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.take(x, torch.tensor([0, 1, 2], device="tpu"), out=x)


@pytest.mark.parametrize("shape,mask_shape", [((), ()), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 0), (2, 0))])
def test_masked_select_matches_cpu_with_broadcast_and_0d(shape, mask_shape):
    x = torch.randn(shape)
    mask = torch.rand(mask_shape) > 0.5
    check_op(lambda t: torch.masked_select(t, mask.to(t.device)), x, grad=x.numel() > 0)
    check_op(lambda t: torch.masked_select(t, torch.ones((), dtype=torch.bool, device=t.device)), x)


def test_masked_select_out_resizes_and_refuses_aliasing():
    x = torch.arange(6.0)
    mask = x > 2
    out = torch.empty(0, device="tpu")
    torch.masked_select(x.to("tpu"), mask.to("tpu"), out=out)
    assert torch.equal(out.cpu(), torch.masked_select(x, mask))
    xt = x.to("tpu")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.masked_select(xt, mask.to("tpu"), out=xt)
    with pytest.raises(RuntimeError):
        torch.masked_select(xt, mask.to("tpu"), out=torch.empty(0, dtype=torch.int64, device="tpu"))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])
def test_segment_reduce_of_half_precision_adds_in_turn_as_cpu(reduce, dtype):
    # CPU adds (multiplies) each element in turn in the dtype itself, so a
    # float32 sum rounded once is a unit in the last place away.
    torch.manual_seed(0)
    data = (torch.rand(10, 5, 5) * 4 + 1).to(dtype)
    lengths = torch.tensor([1, 2, 0, 6, 0, 1])
    for kwargs in [dict(lengths=lengths), dict(lengths=lengths, initial=2), dict(offsets=torch.tensor([0, 3, 3, 9]))]:
        expected = torch.segment_reduce(data, reduce, axis=0, unsafe=True, **kwargs)
        tpu_kwargs = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        actual = torch.segment_reduce(data.to("tpu"), reduce, axis=0, unsafe=True, **tpu_kwargs)
        assert actual.device.type == "tpu"
        torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0, equal_nan=True)
