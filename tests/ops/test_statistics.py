"""Statistics and searches on tpu match CPU PyTorch: nansum/nanmean,
var_mean/std_mean, aminmax, count_nonzero, trace, renorm,
searchsorted/bucketize, isin, tril/triu_indices, equal and the
data-dependent ops (unique, bincount, histc, repeat_interleave)."""

import pytest
import torch
from reference import assert_close, check_op
from reference import make_input as make

import torch_tpu

NAN = float("nan")


def with_nans(shape):
    x = torch.randn(shape)
    x[torch.rand(shape) < 0.3] = NAN
    return x


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_and_nanmean_skip_nan(dim, keepdim):
    x = with_nans((4, 5))
    check_op(lambda t: torch.nansum(t, dim=dim, keepdim=keepdim), x, grad=True)
    check_op(lambda t: torch.nanmean(t, dim=dim, keepdim=keepdim), x, grad=True)
    check_op(lambda t: torch.nansum(t, dim=dim, keepdim=keepdim), make((4, 5), torch.int64))


@pytest.mark.parametrize("op", [torch.var_mean, torch.std_mean])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_mean_std_mean_match_cpu(op, dtype, dim, correction):
    check_op(
        lambda t: op(t, dim=dim, correction=correction, keepdim=dim == 1),
        make((3, 4, 5), dtype),
        grad=dtype == torch.float32,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_aminmax_matches_cpu_with_and_without_dim(dtype):
    x = make((4, 6), dtype)
    check_op(torch.aminmax, x)
    check_op(lambda t: torch.aminmax(t, dim=-1, keepdim=True), x)
    check_op(lambda t: torch.aminmax(t, dim=0), x.t())


def test_aminmax_propagates_nan():
    x = torch.tensor([[1.0, NAN, 2.0], [0.0, 3.0, -1.0]])
    e, a = torch.aminmax(x, dim=1), torch.aminmax(x.to("tpu"), dim=1)
    torch.testing.assert_close(a.min.cpu(), e.min, equal_nan=True)
    torch.testing.assert_close(a.max.cpu(), e.max, equal_nan=True)


@pytest.mark.parametrize("dim", [None, 0, (0, 1)])
def test_count_nonzero(dim):
    x = torch.randint(0, 3, (4, 5)).float()
    check_op(lambda t: torch.count_nonzero(t, dim=dim), x)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_trace_of_square_and_rectangular(shape, dtype):
    check_op(torch.trace, make(shape, dtype), grad=dtype == torch.float32)


@pytest.mark.parametrize("p", [1, 2, 3.5, float("inf")])
def test_renorm_matches_cpu(p):
    check_op(lambda t: torch.renorm(t, p, 0, 1.5), torch.randn(4, 3, 2) * 2, grad=True)
    check_op(lambda t: torch.renorm(t, p, -1, 0.5), torch.randn(4, 3).to(torch.bfloat16))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_batched_scalar_and_sorter(right):
    seq = torch.tensor([1.0, 2.0, 2.0, 4.0, 7.0])
    values = torch.tensor([[0.0, 2.0, 3.0], [7.0, 8.0, NAN]])
    check_op(lambda s, v: torch.searchsorted(s, v, right=right), seq, values)
    bseq = torch.sort(torch.randn(3, 6), dim=1).values
    check_op(lambda s, v: torch.searchsorted(s, v, right=right, out_int32=True), bseq, torch.randn(3, 4))
    check_op(lambda s: torch.searchsorted(s, 2.0, side="right" if right else "left"), seq)
    unsorted = torch.tensor([4.0, 1.0, 7.0, 2.0])
    sorter = torch.argsort(unsorted)
    check_op(lambda s, v, o: torch.searchsorted(s, v, sorter=o, right=right), unsorted, values, sorter)


def test_bucketize_matches_cpu():
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 2.0])
    check_op(lambda v, b: torch.bucketize(v, b), torch.randn(3, 4), boundaries)
    check_op(lambda v, b: torch.bucketize(v, b, right=True, out_int32=True), torch.tensor([0.0, 2.0, 5.0]), boundaries)
    check_op(lambda b: torch.bucketize(1.0, b), boundaries)


@pytest.mark.parametrize("invert", [False, True])
def test_isin_tensor_and_scalar_forms(invert):
    e, s = torch.randint(0, 6, (3, 4)), torch.tensor([1, 3, 9])
    check_op(lambda a, b: torch.isin(a, b, invert=invert), e, s)
    check_op(lambda a: torch.isin(a, 3, invert=invert), e)
    check_op(lambda b: torch.isin(3, b, invert=invert), s)
    check_op(lambda a, b: torch.isin(a, b), torch.tensor([1.0, NAN, 2.5]), torch.tensor([NAN, 2.5]))


@pytest.mark.parametrize("rows,cols,offset", [(3, 3, 0), (4, 3, 1), (3, 5, -1), (0, 3, 0), (3, 3, -5)])
def test_tril_and_triu_indices(rows, cols, offset):
    for fn in (torch.tril_indices, torch.triu_indices):
        assert_close(fn(rows, cols, offset, device="tpu"), fn(rows, cols, offset))


def test_equal_compares_sizes_and_values():
    x = torch.randn(3, 4)
    t = x.to("tpu")
    assert torch.equal(t, x.clone().to("tpu"))
    assert not torch.equal(t, (x + 1).to("tpu"))
    assert not torch.equal(t, t[:2])
    assert not torch.equal(torch.tensor([NAN], device="tpu"), torch.tensor([NAN], device="tpu"))


def test_data_dependent_ops_match_cpu():
    x = torch.tensor([3, 1, 3, 3, 2, 1, 7])
    for fn in (
        lambda t: torch.unique(t, return_inverse=True, return_counts=True),
        lambda t: torch.unique_consecutive(t, return_counts=True),
        lambda t: torch.bincount(t, minlength=9),
        lambda t: torch.repeat_interleave(t.abs()),
    ):
        expected, actual = fn(x), fn(x.to("tpu"))
        assert_close(actual, expected)
    check_op(lambda t: torch.histc(t, bins=5), torch.randn(20))
    check_op(lambda t: torch.unique(t, dim=0), torch.tensor([[1, 2], [1, 2], [0, 5]]))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_repeat_interleave_given_its_output_size_reads_nothing_on_the_host(mode):
    # Kimi K2.5's vision tower repeats each image's index by its patch count,
    # output_size given: as on CUDA, the result is computed without a wait.
    x = torch.randn(4, 3)
    cases = [
        (lambda r: torch.repeat_interleave(r, output_size=6), torch.tensor([2, 0, 3, 1])),
        (lambda r: torch.repeat_interleave(r, output_size=6), torch.tensor([0, 4, 2, 0], dtype=torch.int32)),
        (lambda r: torch.repeat_interleave(r, output_size=0), torch.tensor([0, 0])),
        (lambda r: torch.repeat_interleave(r, output_size=3), torch.tensor([], dtype=torch.int64)),
        (lambda r: torch.repeat_interleave(x.to(r.device), r, dim=0, output_size=7), torch.tensor([1, 3, 0, 3])),
    ]
    for fn, repeats in cases:
        tpu_repeats = repeats.to("tpu")
        torch_tpu.sync()
        torch_tpu.reset_metrics()
        if mode == "compiled":
            torch._dynamo.reset()
            got = torch.compile(fn, backend="tpu")(tpu_repeats)
            waits = torch_tpu.metrics()["host_waits"]
        else:
            with torch_tpu.eager_mode(mode):
                got = fn(tpu_repeats)
                waits = torch_tpu.metrics()["host_waits"]
        assert waits == 0  # its checks are read at the next synchronization
        torch_tpu.sync()
        expected = fn(repeats)
        assert got.dtype == expected.dtype
        assert_close(got, expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_repeat_interleave_with_a_wrong_output_size_or_negative_repeats_raises_cpus_error(mode):
    cases = [
        (torch.tensor([2, 0, 3, 1]), 5, "allocated size does not match required size"),
        (torch.tensor([2, -1, 3, 2]), 6, "repeats can not be negative"),
    ]
    for repeats, size, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch.repeat_interleave(repeats, output_size=size)
        # Found on the device, as CUDA's assertions are: raised by the next synchronization.
        with pytest.raises(RuntimeError, match=message):
            with torch_tpu.eager_mode(mode):
                torch.repeat_interleave(repeats.to("tpu"), output_size=size)
                torch_tpu.sync()
    # Dtypes and shapes are checked at the call.
    for repeats in (torch.tensor([[1, 2]]), torch.tensor([1.0, 2.0])):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.repeat_interleave(repeats, output_size=3)
        with pytest.raises(type(cpu_error.value)) as tpu_error:
            torch.repeat_interleave(repeats.to("tpu"), output_size=3)
        assert str(tpu_error.value) == str(cpu_error.value).replace("_cpu", "_tpu")


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_histc_runs_on_the_device_for_floats_and_integers(mode):
    torch.manual_seed(0)
    x = torch.randn(50)
    x[3] = 1.0  # max itself falls in the last bin
    with torch_tpu.eager_mode(mode):
        torch_tpu.reset_metrics()
        cases = [
            (x, dict(bins=5)),  # the data's own range
            (x, dict(bins=7, min=-1.0, max=1.0)),  # outside elements not counted
            (torch.full((4,), 2.5), dict(bins=3)),  # one value: widened by 1 each side
            (torch.tensor([]), dict(bins=4)),
        ]
        for t, kw in cases:
            assert_close(torch.histc(t.to("tpu"), **kw), torch.histc(t, **kw))
        # Integer input (CPU rejects it; CUDA counts, and MoE routers use it):
        # compared with the float count of the same values.
        experts = torch.randint(0, 8, (64,), dtype=torch.int32)
        got = torch.histc(experts.to("tpu"), bins=8, min=0, max=7)
        assert got.dtype == torch.int32
        assert_close(got, torch.histc(experts.float(), bins=8, min=0, max=7).int())
        assert torch_tpu.metrics()["cpu_fallbacks"] == {}
        # 5 reads for the comparisons and 2 data-range finiteness checks; the
        # host path waited once more per call.
        assert torch_tpu.metrics()["host_waits"] <= 7


def test_histc_of_a_non_finite_range_raises():
    x = torch.tensor([1.0, float("inf")], device="tpu")
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(x, bins=3).cpu()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_bincount_and_unique_read_one_number_and_compute_on_the_device(mode):
    torch.manual_seed(0)
    ints = torch.randint(0, 50, (4000,))
    floats = torch.tensor([1.0, NAN, 1.0, NAN, -2.0, 0.0, 3.5, 3.5])
    cases = [
        (lambda t: torch.bincount(t), ints),
        (lambda t: torch.bincount(t, minlength=80), ints),
        (lambda t: torch.bincount(t, weights=torch.linspace(0, 1, t.numel(), device=t.device)), ints),
        (lambda t: torch.bincount(t, weights=torch.ones(t.numel(), dtype=torch.int32, device=t.device)), ints),
        (lambda t: torch.bincount(t, minlength=3), torch.tensor([], dtype=torch.long)),
        (lambda t: torch.unique(t, return_inverse=True, return_counts=True), ints.view(40, 100)),
        (lambda t: torch.unique(t, return_inverse=True, return_counts=True), floats),  # each NaN distinct
        (lambda t: torch.unique(t, return_inverse=True), torch.tensor([True, False, True])),
        (lambda t: torch.unique(t, return_counts=True), torch.tensor(5)),
        (lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), ints.sort().values[::7]),
        (lambda t: torch.unique_consecutive(t, return_counts=True), floats),
        (lambda t: torch.unique(t, return_inverse=True), torch.tensor([], dtype=torch.float32)),
    ]
    with torch_tpu.eager_mode(mode):
        for fn, x in cases:
            on_device = x.to("tpu")
            torch_tpu.synchronize()
            torch_tpu.reset_metrics()
            actual = fn(on_device)
            torch_tpu.synchronize()
            metrics = torch_tpu.metrics()
            # One number decides the size; the input itself never goes to the host.
            assert metrics["bytes_to_host"] <= 32, metrics["bytes_to_host"]
            assert metrics["cpu_fallbacks"] == {}
            assert_close(actual, fn(x))


def test_bincount_bad_input_raises_like_cpu():
    for args in [
        (torch.tensor([[1]]),),
        (torch.tensor([3, -1]),),
        (torch.tensor([1.0]),),
        (torch.tensor([1, 2]), torch.ones(3)),
        (torch.tensor([1]), None, -1),
        (torch.tensor([True]),),
    ]:
        with pytest.raises(Exception) as cpu:
            torch.bincount(*args)
        on_device = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(cpu.type) as tpu:
            torch.bincount(*on_device)
        # The same words, but the kernel's own name in "not implemented" messages.
        assert str(tpu.value) == str(cpu.value).replace("bincount_cpu", "bincount_tpu")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_histc_of_half_precision_bins_values_as_cpu_in_its_own_arithmetic(dtype):
    # CPU computes each value's bin in the input dtype, rounding after every
    # operation; values near a bin edge fall where that rounding puts them.
    torch.manual_seed(0)
    x = (torch.rand(400) * 20 - 10).to(dtype)
    for kw in [dict(bins=100, min=-10, max=10), dict(bins=37), dict(bins=7, min=-3, max=2)]:
        assert_close(torch.histc(x.to("tpu"), **kw), torch.histc(x, **kw), atol=0, rtol=0)
