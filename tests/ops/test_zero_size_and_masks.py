"""Zero-size inputs, boolean masks and wrong arguments as CPU takes them
(issue 33): each call gives CPU's result, or raises CPU's exception type at
the call that made the mistake, in Strict and DeferAndFuse (and compiled
where the call computes). Most were found by the op fuzz (tests/ops/test_fuzz.py)."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close, in_mode, to_device

import torch_tpu

EAGER = ["strict", "defer_and_fuse"]
ALL_MODES = EAGER + ["compiled"]


def like_cpu(fn, *args, modes=ALL_MODES):
    """fn on tpu in each mode gives CPU's values, or raises CPU's exception
    type inside the op call itself (before any sync: at the call, also under
    DeferAndFuse)."""
    try:
        expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        error = None
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        error = type(e)
    for mode in modes:
        tpu_args = to_device(list(args), "tpu")
        if error is None:
            assert_close(in_mode(mode, fn)(*tpu_args), expected, msg=mode)
            continue
        assert mode != "compiled", "compiled error cases compare with torch.compile on CPU"
        with torch_tpu.eager_mode(mode):
            with pytest.raises(error):
                fn(*tpu_args)
        torch_tpu.sync()  # nothing was left pending by the failed call


# ---- zero-size inputs ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest", "nearest-exact"])
def test_interpolate_of_an_empty_spatial_dim_raises_cpus_runtime_error(mode):
    # bilinear and bicubic killed the process (lower::spatial), nearest raised TypeError.
    x = torch.randn(1, 2, 4, 0)
    like_cpu(lambda x: F.interpolate(x, size=(8, 8), mode=mode), x, modes=EAGER)
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        F.interpolate(x.to("tpu"), size=(8, 8), mode=mode)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_interpolate_of_an_empty_batch_gives_an_empty_result(mode):
    like_cpu(lambda x: F.interpolate(x, size=(8, 6), mode=mode), torch.randn(0, 2, 4, 3))


def test_interpolate_of_empty_channels_raises_as_cpu():
    like_cpu(lambda x: F.interpolate(x, size=(8, 6), mode="bilinear"), torch.randn(2, 0, 4, 3), modes=EAGER)


def test_index_add_into_an_empty_tensor_checks_the_source_shape():
    # The shape check was skipped: the result had no elements to compute.
    idx = torch.tensor([0, 1, 2, 3])
    like_cpu(lambda x, s: x.index_add_(0, idx.to(x.device), s), torch.zeros(6, 0), torch.ones(4, 3), modes=EAGER)
    like_cpu(lambda x, s: x.index_add_(0, idx.to(x.device), s), torch.zeros(6, 2), torch.ones(4, 3), modes=EAGER)
    like_cpu(lambda x, s: x.index_add_(0, idx.to(x.device), s), torch.zeros(6, 3), torch.ones(4, 3))


def test_index_add_with_float_indices_raises_runtime_error():
    like_cpu(
        lambda x, i, s: x.index_add_(0, i, s),
        torch.zeros(3, 2),
        torch.tensor([0.0, 1.0]),
        torch.ones(2, 2),
        modes=EAGER,
    )


def test_embedding_bag_max_of_zero_width_rows_computes_at_the_call():
    # It failed inside the XLA compiler; under DeferAndFuse at a later, unrelated read.
    def bag(i, w, o):
        out = F.embedding_bag(i, w, o, mode="max")
        return out, (w.new_ones(3) * 2).sum()  # an unrelated later read

    like_cpu(bag, torch.tensor([0, 1, 2]), torch.zeros(7, 0), torch.tensor([0, 2]))


def test_bincount_of_an_empty_input_is_int64_zeros_whatever_the_weights():
    like_cpu(lambda x, w: torch.bincount(x, w), torch.tensor([], dtype=torch.int64), torch.tensor([]), modes=EAGER)
    like_cpu(lambda x, w: torch.bincount(x, w, minlength=3), torch.tensor([], dtype=torch.int64), torch.ones(5))


@pytest.mark.parametrize("op", [torch.log_softmax, torch.softmax])
def test_softmax_of_an_empty_integer_tensor_is_empty(op):
    like_cpu(lambda x: op(x, 0), torch.tensor([], dtype=torch.int64))
    like_cpu(lambda x: op(x, 1), torch.zeros(0, 3, dtype=torch.int32))
    like_cpu(lambda x: op(x, 0), torch.tensor([1, 2], dtype=torch.int64), modes=EAGER)


def test_batch_norm_of_an_empty_integer_input_is_empty_and_of_a_full_one_raises():
    def bn(x, mean, var):
        return F.batch_norm(x, mean, var, training=False)

    stats = torch.zeros(3), torch.ones(3)
    like_cpu(bn, torch.zeros(0, 3, dtype=torch.uint8), *stats, modes=EAGER)
    like_cpu(bn, torch.ones(2, 3, dtype=torch.uint8), *stats, modes=EAGER)
    like_cpu(bn, torch.ones(2, 3, dtype=torch.complex64), *stats, modes=EAGER)


def test_kthvalue_over_an_empty_dim_raises_index_error():
    like_cpu(lambda x: torch.kthvalue(x, 2, 1), torch.zeros(3, 0), modes=EAGER)
    like_cpu(lambda x: torch.kthvalue(x, 1, 1), torch.zeros(3, 0, dtype=torch.bool), modes=EAGER)


def test_convolution_with_no_output_channels_raises_as_cpu():
    like_cpu(lambda x, w: F.conv2d(x, w), torch.randn(1, 3, 5, 5), torch.randn(0, 3, 3, 3), modes=EAGER)
    like_cpu(lambda x, w, b: F.conv1d(x, w, b), torch.randn(2, 5, 4), torch.randn(0, 5, 3), torch.randn(0), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i: torch.gather(x, 1, i),
        lambda x, i: torch.index_select(x, 1, i[0]),
        lambda x, i: x[:, i[0]],
    ],
    ids=["gather", "index_select", "index"],
)
def test_indexing_an_empty_dim_raises_at_the_call(fn):
    like_cpu(fn, torch.zeros(3, 0), torch.zeros(3, 2, dtype=torch.int64), modes=EAGER)


def test_embedding_of_an_empty_table_raises_at_the_call():
    like_cpu(F.embedding, torch.zeros(2, dtype=torch.int64), torch.zeros(0, 3), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(1),
        lambda x: x.amax(0),
        lambda x: torch.cumsum(x, 0),
        lambda x: torch.sort(x, 1)[0],
        lambda x: x[x > 0],
        lambda x: torch.cat([x, x], 1),
        lambda x: x @ x.T,
        lambda x: F.pad(x, (1, 1)),
    ],
    ids=["sum", "amax", "cumsum", "sort", "mask", "cat", "matmul", "pad"],
)
def test_common_ops_take_zero_size_inputs_as_cpu(fn):
    for x in (torch.zeros(0, 3), torch.zeros(3, 0)):
        try:
            fn(x)
            like_cpu(fn, x)
        except IndexError:  # amax over an empty dim
            like_cpu(fn, x, modes=EAGER)


# ---- boolean masks --------------------------------------------------------------


def test_a_mask_of_the_wrong_shape_raises_index_error():
    # Both returned data (20 and 4 values).
    x = torch.arange(30.0).reshape(5, 6)
    like_cpu(lambda x, m: x[m], x, torch.ones(5, 4, dtype=torch.bool), modes=EAGER)
    like_cpu(lambda x, m, i: x[m, i], x, torch.ones(4, dtype=torch.bool), torch.arange(4), modes=EAGER)
    like_cpu(lambda x, m: x[m], x, torch.ones(5, 6, 2, dtype=torch.bool), modes=EAGER)
    with pytest.raises(IndexError, match=r"The shape of the mask \[5, 4\] at index 1"):
        x.to("tpu")[torch.ones(5, 4, dtype=torch.bool, device="tpu")]


def test_a_mask_of_the_right_shape_selects_as_cpu():
    x = torch.arange(30.0).reshape(5, 6)
    mask = torch.rand(5, 6) > 0.5
    like_cpu(lambda x, m: x[m], x, mask)
    like_cpu(lambda x, m: x[m, 1:], x, mask[:, 0])
    like_cpu(lambda x, m: x[:, m], x, mask[0])


def test_masked_assignment_checks_the_mask_shape():
    def assign(x, m):
        x[m] = 7.0
        return x

    like_cpu(assign, torch.zeros(2, 2), torch.ones(3, 2, dtype=torch.bool), modes=EAGER)
    like_cpu(assign, torch.zeros(2, 2), torch.ones(2, dtype=torch.bool), modes=EAGER)
    like_cpu(assign, torch.zeros(3, 2), torch.tensor([True, False, True]))
    like_cpu(
        lambda x, m, v: x.index_put_((m,), v),
        torch.zeros(4),
        torch.ones(3, dtype=torch.bool),
        torch.ones(3),
        modes=EAGER,
    )


@pytest.mark.parametrize(
    "values",
    [
        torch.arange(4.0),  # one row for every selected element (T5Gemma 2's image embedding)
        torch.arange(4.0).reshape(4, 1).expand(4, 4)[:1],  # a row of a view
        torch.ones(1),  # one value
        torch.arange(8.0).reshape(8, 1)[1:2],  # a column of one
    ],
    ids=["row", "row_of_a_view", "one_value", "column"],
)
@pytest.mark.parametrize("accumulate", [False, True])
def test_a_mask_written_with_values_that_fit_any_count_reads_nothing_on_the_host(values, accumulate):
    def assign(x, m, v):
        return x.index_put_((m,), v, accumulate=accumulate)

    x = torch.randn(2, 8, 4)
    mask = torch.tensor([[1, 0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 1]], dtype=torch.bool)
    like_cpu(assign, x, mask, values)
    like_cpu(assign, x, torch.zeros(2, 8, dtype=torch.bool), values)  # nothing selected
    for mode in EAGER:
        tpu_args = to_device([x, mask, values], "tpu")
        torch_tpu.sync()
        torch_tpu.reset_metrics()
        with torch_tpu.eager_mode(mode):
            assign(*tpu_args)
            torch_tpu.sync()
        assert torch_tpu.metrics()["bytes_to_host"] == 0, mode


def test_a_mask_written_with_values_that_need_its_count_checks_them_as_cpu():
    def assign(x, m, v):
        x[m] = v
        return x

    x, mask = torch.zeros(2, 8, 4), torch.zeros(2, 8, dtype=torch.bool)
    mask[0, 1] = mask[1, 5] = True
    like_cpu(assign, x, mask, torch.randn(2, 4))  # a row per selected element
    like_cpu(assign, x, mask, torch.randn(3, 4), modes=EAGER)  # 3 rows for 2 elements
    like_cpu(assign, x, mask, torch.randn(3), modes=EAGER)  # rows of the wrong width
    like_cpu(lambda x, m, v: x.index_put_((m,), v), x, mask, torch.randn(1, 1, 4), modes=EAGER)  # a dim too many
    # One value of any shape fills (masked_fill); accumulated, it must fit.
    like_cpu(lambda x, m, v: x.index_put_((m,), v), x, mask, torch.ones(1, 1, 1, 1))
    like_cpu(lambda x, m, v: x.index_put_((m,), v, accumulate=True), x, mask, torch.ones(1, 1, 1, 1), modes=EAGER)
    like_cpu(assign, x, mask, torch.randn(4, dtype=torch.float64), modes=EAGER)  # another dtype


def test_a_uint8_mask_is_checked_as_a_bool_one():
    like_cpu(lambda x, m: x[m], torch.zeros(3, 2), torch.ones(2, 2, dtype=torch.uint8), modes=EAGER)


def test_index_tensors_that_do_not_broadcast_raise_index_error():
    x = torch.zeros(3, 5)
    like_cpu(lambda x, m, i: x[m, i], x, torch.tensor([True, False, True]), torch.tensor([0, 1, 2]), modes=EAGER)
    like_cpu(
        lambda x, i, j: x.index_put_((i, j), torch.tensor(1.0)),
        x,
        torch.tensor([0, 1]),
        torch.tensor([0, 1, 2]),
        modes=EAGER,
    )


def test_where_takes_a_uint8_condition_as_cpu():
    like_cpu(torch.where, torch.tensor([1, 0, 2], dtype=torch.uint8), torch.ones(3), torch.zeros(3), modes=EAGER)


# ---- dtypes CPU has no kernel for, and mixes it promotes ----------------------------


def test_kthvalue_of_bool_and_nll_loss_of_int64_raise_not_implemented():
    like_cpu(lambda x: torch.kthvalue(x, 2), torch.ones(5, dtype=torch.bool), modes=EAGER)
    like_cpu(F.nll_loss, torch.zeros(3, 4, dtype=torch.int64), torch.tensor([0, 1, 2]), modes=EAGER)


def test_nll_loss_with_a_weight_of_the_wrong_size_raises_runtime_error():
    like_cpu(F.nll_loss, torch.zeros(1, 6), torch.tensor([0]), torch.ones(5), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        torch.remainder,
        torch.fmod,
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        torch.maximum,
        torch.minimum,
    ],
    ids=["remainder", "fmod", "div_floor", "div_trunc", "maximum", "minimum"],
)
def test_binary_ops_without_complex_kernels_raise_instead_of_crashing(fn):
    # remainder of complex numbers killed the process inside XLA's compiler.
    like_cpu(fn, torch.ones(3, 2, dtype=torch.int64), torch.ones(2, dtype=torch.complex64), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.clamp(x, 0, 1),
        lambda x: torch.clamp_min(x, 0),
        F.relu,
        F.hardtanh,
        lambda x: torch.sort(x)[0],
        lambda x: torch.topk(x, 1)[0],
    ],
    ids=["clamp", "clamp_min", "relu", "hardtanh", "sort", "topk"],
)
def test_ordering_ops_of_complex_numbers_raise_instead_of_aborting(fn):
    # clamp of complex numbers aborted the process in XLA's algebraic simplifier.
    like_cpu(fn, torch.randn(3).to(torch.complex64), modes=EAGER)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_max_pool_of_integers_computes_as_cpu(dtype):
    x = torch.randint(0, 50, (1, 2, 4, 4)).to(dtype)
    modes = ALL_MODES if dtype != torch.bool else EAGER
    like_cpu(lambda x: F.max_pool2d(x, 2), x, modes=modes)
    like_cpu(lambda x: F.max_pool2d(x, 3, stride=1, padding=1), x, modes=modes)


def test_losses_promote_their_operands_as_cpu():
    like_cpu(F.mse_loss, torch.ones(3, dtype=torch.bool), torch.rand(3))
    like_cpu(F.smooth_l1_loss, torch.ones(3, dtype=torch.int64), torch.rand(3))
    like_cpu(F.mse_loss, torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64), modes=EAGER)
    like_cpu(F.binary_cross_entropy, torch.rand(3), torch.rand(3, dtype=torch.float64), modes=EAGER)


def test_index_copy_with_float_indices_raises_runtime_error():
    like_cpu(
        lambda x, i, s: x.index_copy_(0, i, s),
        torch.zeros(3, 2),
        torch.tensor([0.0, 1.0]),
        torch.ones(2, 2),
        modes=EAGER,
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"stride": 0}, {"dilation": 0}, {"dilation": -1}, {"padding": -1}],
    ids=["stride0", "dilation0", "dilation_negative", "padding_negative"],
)
def test_convolution_parameters_are_checked_before_shapes(kwargs):
    like_cpu(lambda x, w: F.conv2d(x, w, **kwargs), torch.randn(1, 3, 5, 5), torch.randn(2, 3, 3, 3), modes=EAGER)


def test_convolution_bias_and_groups_are_checked():
    like_cpu(F.conv2d, torch.randn(1, 3, 5, 5), torch.randn(2, 3, 3, 3), torch.randn(3), modes=EAGER)
    like_cpu(lambda x, w: F.conv2d(x, w, groups=2), torch.randn(1, 4, 5, 5), torch.randn(3, 2, 3, 3), modes=EAGER)


# ---- non-finite values stay where they are ---------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.adaptive_avg_pool2d(x, 2),
        lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
        lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
        lambda x: F.interpolate(x, size=(6, 3), mode="bicubic", align_corners=True),
    ],
    ids=["adaptive_avg_pool", "adaptive_avg_pool_uneven", "bilinear", "bicubic"],
)
def test_a_nan_or_infinity_reaches_only_the_outputs_that_read_it(fn):
    # Applied as dense matrices, 0 * NaN and 0 * inf spread them to every
    # output. Compiled graphs run PyTorch's own decompositions of these ops
    # (torch._decomp), which treat non-finite values otherwise.
    x = torch.randn(1, 2, 4, 4)
    x[0, 0, 0, 0] = float("nan")
    x[0, 1, 3, 1] = float("inf")
    x[0, 1, 0, 3] = float("-inf")
    like_cpu(fn, x, modes=EAGER)


def test_gradients_of_a_nan_stay_where_they_are():
    x = torch.randn(1, 1, 4, 4, requires_grad=True)

    def grad_of(x):
        x = x.detach().requires_grad_()
        y = F.adaptive_avg_pool2d(x, 2)
        g = torch.ones_like(y)
        g[0, 0, 0, 0] = float("nan")
        y.backward(g)
        return x.grad

    assert_close(grad_of(x.detach().to("tpu")), grad_of(x.detach()))


# ---- found by the fuzz with other seeds (scripts/fuzz_ops.py --seed 1) -------------


@pytest.mark.parametrize("op", [torch.abs, torch.sign, lambda x: torch.sqrt(x.abs())], ids=["abs", "sign", "sqrt"])
def test_unsigned_abs_and_sign_compute(op):
    # XLA's abs and sign take signed types only: the program failed to compile.
    like_cpu(op, torch.tensor([[0, 3, 250]], dtype=torch.uint8))


@pytest.mark.parametrize(
    "fn",
    [torch.lt, torch.ge, lambda a, b: torch.sign(a), lambda a, b: torch.max(a, 1)[0]],
    ids=["lt", "ge", "sign", "max_dim"],
)
def test_comparisons_of_complex_numbers_raise(fn):
    like_cpu(fn, torch.randn(2, 3).to(torch.complex64), torch.randn(3), modes=EAGER)


def test_sgn_of_complex_numbers_still_computes():
    z = torch.randn(2, 3, dtype=torch.complex64)
    assert_close(torch.sgn(z.to("tpu")), torch.sgn(z), atol=1e-6, rtol=1e-6)


def test_norm_parameters_of_another_dtype_raise():
    x = torch.randn(3, 4)
    like_cpu(
        lambda x, m, v: F.batch_norm(x, m, v, training=False),
        x,
        torch.zeros(4, dtype=torch.int32),
        torch.ones(4),
        modes=EAGER,
    )
    like_cpu(lambda x, w: F.group_norm(x, 2, w), torch.randn(1, 4, 3), torch.ones(4, dtype=torch.int32), modes=EAGER)
    like_cpu(F.nll_loss, torch.randn(3, 5), torch.tensor([0, 1, 2]), torch.ones(5, dtype=torch.float64), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i, s: torch.scatter_add(x, 1, i, s),
        lambda x, i, s: torch.scatter(x, 1, i, s),
        lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "amax"),
    ],
    ids=["scatter_add", "scatter", "scatter_reduce"],
)
def test_scattering_into_an_empty_dim_raises_at_the_call(fn):
    like_cpu(fn, torch.zeros(2, 0), torch.zeros(2, 3, dtype=torch.int64), torch.ones(2, 3), modes=EAGER)


def test_adaptive_avg_pool_of_an_empty_spatial_dim_raises():
    like_cpu(lambda x: F.adaptive_avg_pool2d(x, 2), torch.zeros(1, 4, 0, 4), modes=EAGER)


def test_index_select_and_index_copy_raise_index_error_for_bad_index_shapes():
    like_cpu(
        lambda x, i: torch.index_select(x, 0, i), torch.zeros(3, 5), torch.zeros(1, 2, dtype=torch.int64), modes=EAGER
    )
    like_cpu(
        lambda x, i, s: x.index_copy_(0, i, s),
        torch.zeros(1, 2, 2),
        torch.zeros(1, dtype=torch.int64),
        torch.ones(1, 2),
        modes=EAGER,
    )
    like_cpu(
        lambda x, i, s: x.index_copy_(0, i, s),
        torch.zeros(1, 4),
        torch.zeros(1, 2, dtype=torch.int64),
        torch.ones(1, 4),
        modes=EAGER,
    )


def test_convolution_padding_past_int64_raises_runtime_error():
    like_cpu(lambda x, w: F.conv1d(x, w, padding=2**63 - 1), torch.randn(2, 4, 4), torch.randn(3, 4, 3), modes=EAGER)


def test_a_bias_that_does_not_broadcast_raises_at_the_call():
    # Under DeferAndFuse the program failed to compile at the next sync.
    like_cpu(torch.addmm, torch.zeros(2), torch.zeros(1, 2), torch.zeros(2, 1), modes=EAGER)
    like_cpu(F.linear, torch.zeros(1, 3), torch.zeros(2, 3), torch.zeros(2, 2), modes=EAGER)
    like_cpu(torch.addmm, torch.ones(3), torch.ones(2, 2), torch.ones(2, 3))


def test_index_put_values_must_broadcast_to_the_indexing_result():
    i = torch.tensor([0, 1, 2])
    like_cpu(lambda x, i, v: x.index_put_((i,), v), torch.zeros(4, 4), i, torch.zeros(4, 4), modes=EAGER)
    like_cpu(lambda x, i, v: x.index_put_((i,), v), torch.zeros(4, 4), i, torch.ones(4))


def test_masked_assignment_of_one_value_converts_it_as_masked_fill():
    def assign(x, m, v):
        x[m] = v
        return x

    mask = torch.tensor([[True, False], [False, True]])
    like_cpu(assign, torch.zeros(2, 2), mask, torch.tensor(2.5, dtype=torch.float64), modes=EAGER)
    like_cpu(assign, torch.zeros(2, 2, dtype=torch.bool), mask, torch.tensor(1.0), modes=EAGER)


def test_subtracting_bools_raises_runtime_error_as_cpu():
    # PyTorch's Python meta kernel raised ValueError (compiled graphs call aten.sub directly).
    for fn in (torch.ops.aten.sub.Tensor, torch.ops.aten.rsub.Tensor):
        like_cpu(fn, torch.ones(3, dtype=torch.bool), torch.ones(3), modes=EAGER)
        like_cpu(fn, torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool), modes=EAGER)


def test_index_fill_of_an_empty_dim_raises_at_the_call():
    like_cpu(lambda x, i: x.index_fill_(1, i, 3.0), torch.zeros(3, 0), torch.tensor([0, 1, 2]), modes=EAGER)
    like_cpu(lambda x, i: x.index_fill_(1, i, 3.0), torch.zeros(3, 0), torch.tensor([], dtype=torch.int64))


def test_bincount_of_uint8_counts_values_not_a_mask():
    # The uint8 values went to index_put_ as a boolean mask (IndexError).
    like_cpu(lambda x, w: torch.bincount(x, w), torch.tensor([1, 3, 1], dtype=torch.uint8), torch.ones(3), modes=EAGER)
    like_cpu(torch.bincount, torch.tensor([1, 3, 1], dtype=torch.uint8), modes=EAGER)


def test_searchsorted_of_complex_values_raises_not_implemented():
    like_cpu(torch.searchsorted, torch.zeros(2, 4), torch.zeros(2, 3, dtype=torch.complex64), modes=EAGER)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.avg_pool2d(x, 2),
        lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
        lambda x: F.avg_pool2d(x, 2, divisor_override=3),
        lambda x: F.avg_pool3d(x.unsqueeze(0), 2),
    ],
    ids=["avg_pool2d", "no_pad_count", "divisor_override", "avg_pool3d"],
)
def test_avg_pool_of_int64_truncates_as_cpu(fn):
    # It raised NotImplementedError where CPU computes.
    like_cpu(fn, torch.randint(-9, 9, (1, 2, 5, 5)))


def test_dtype_checks_come_before_the_missing_kernel_as_on_cpu():
    # lerp and addmm check their operands' dtypes before dispatching on self's.
    like_cpu(torch.lerp, torch.ones(4, 4, dtype=torch.int32), torch.ones(4, 4), torch.ones(4), modes=EAGER)
    like_cpu(torch.addmm, torch.ones(3, dtype=torch.bool), torch.ones(3, 5), torch.ones(5, 3), modes=EAGER)
    like_cpu(torch.lerp, torch.ones(4, dtype=torch.int32), torch.ones(4, dtype=torch.int32), 0.5, modes=EAGER)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.bool])
def test_avg_pool_of_other_integers_raises_not_implemented(dtype):
    like_cpu(lambda x: F.avg_pool2d(x, 2), torch.ones(1, 2, 4, 4, dtype=dtype), modes=EAGER)
    like_cpu(lambda x: F.avg_pool3d(x, 2), torch.ones(1, 2, 4, 4, 4, dtype=dtype), modes=EAGER)


def test_masked_select_takes_bool_masks_only():
    like_cpu(torch.masked_select, torch.ones(4, 2), torch.ones(4, 2, dtype=torch.uint8), modes=EAGER)
    like_cpu(torch.masked_select, torch.ones(4, 2), torch.rand(4, 2) > 0.5)


@pytest.mark.parametrize(
    "fn", [torch.atan2, torch.bitwise_and, torch.bitwise_xor], ids=["atan2", "bitwise_and", "bitwise_xor"]
)
def test_complex_operands_without_a_kernel_raise_not_implemented(fn):
    # bitwise_and of an int and a complex tensor failed to compile (DeferAndFuse: at the next sync).
    like_cpu(fn, torch.ones(1, 3, dtype=torch.int32), torch.ones(3, dtype=torch.complex64), modes=EAGER)


def test_binary_cross_entropy_checks_dtypes_before_its_kernel():
    like_cpu(F.binary_cross_entropy, torch.rand(2, 5).to(torch.complex64), torch.rand(2, 5), modes=EAGER)


def test_index_copy_with_too_few_indices_raises_index_error():
    like_cpu(
        lambda x, i, s: x.index_copy_(0, i, s),
        torch.zeros(2, 2),
        torch.zeros(1, dtype=torch.int64),
        torch.ones(2, 2),
        modes=EAGER,
    )


def test_embedding_bag_over_an_empty_table_raises_at_the_call():
    # Under DeferAndFuse the program failed to compile at the next sync.
    like_cpu(
        lambda i, w, o: F.embedding_bag(i, w, o),
        torch.tensor([0, 0]),
        torch.zeros(0, 3),
        torch.tensor([0, 1]),
        modes=EAGER,
    )


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_argmax_argmin_amax_of_bool_or_complex_raise(dtype):
    x = torch.ones(3, 4).to(dtype)
    like_cpu(lambda x: torch.argmax(x, 1), x, modes=EAGER)
    like_cpu(lambda x: torch.argmin(x), x, modes=EAGER)
    if dtype == torch.complex64:
        like_cpu(lambda x: torch.amax(x, 1), x, modes=EAGER)


def test_topk_of_bool_and_reflection_pad_of_bool_raise():
    like_cpu(lambda x: torch.topk(x, 2)[0], torch.ones(1, 4, dtype=torch.bool), modes=EAGER)
    for mode in ("reflect", "replicate"):
        like_cpu(lambda x: F.pad(x, (1, 1), mode=mode), torch.ones(2, 3, 5, dtype=torch.bool), modes=EAGER)
    like_cpu(lambda x: F.pad(x, (1, 1), mode="circular"), torch.ones(2, 3, 5, dtype=torch.bool))


def test_masked_assignment_of_many_values_checks_them_against_the_selection():
    # A lone mask wrote its values without counting its true elements.
    mask = torch.tensor([True, False])
    like_cpu(lambda x, m, v: x.index_put_((m,), v), torch.zeros(2, 3), mask, torch.ones(2, 3), modes=EAGER)
    like_cpu(lambda x, m, v: x.index_put_((m,), v), torch.zeros(2, 3), mask, torch.arange(3.0))
    like_cpu(lambda x, m, v: x.index_put_((m,), v, accumulate=True), torch.zeros(2, 3), mask, torch.ones(1, 3))


@pytest.mark.parametrize("pad", [(2**63 - 1, 1), (-10, 1), (2**62, 2**62)], ids=["huge", "negative", "overflow"])
def test_replication_pad_past_int64_raises_runtime_error(pad):
    # PyTorch's Python meta kernel raised TypeError (Python's int overflowed new_empty).
    like_cpu(lambda x: F.pad(x, pad, mode="replicate"), torch.zeros(2, 4, 4), modes=EAGER)


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64, torch.bool])
def test_layer_norm_checks_mixed_dtypes_before_its_kernel(dtype):
    like_cpu(
        lambda x, w, b: F.layer_norm(x, (3,), w, b),
        torch.ones(2, 3).to(dtype),
        torch.ones(3),
        torch.zeros(3),
        modes=EAGER,
    )
    like_cpu(lambda x: F.layer_norm(x, (3,)), torch.ones(2, 3).to(dtype), modes=EAGER)


# ---- batched products' dtypes, found by the fuzz (seed 20261205) --------------

_PRODUCTS = {
    "bmm": lambda a, b, c: torch.bmm(a.expand(2, 3, 3), b.expand(2, 3, 4)),
    "bmm_out": lambda a, b, c: torch.bmm(a.expand(2, 3, 3), b.expand(2, 3, 4), out=c.expand(2, 3, 4).clone()),
    "baddbmm": lambda a, b, c: torch.baddbmm(a.expand(2, 3, 4), a.expand(2, 3, 3), b.expand(2, 3, 4)),
    "baddbmm_out": lambda a, b, c: torch.baddbmm(
        a.expand(2, 3, 4), a.expand(2, 3, 3), b.expand(2, 3, 4), out=c.expand(2, 3, 4).clone()
    ),
    "addbmm": lambda a, b, c: torch.addbmm(a.expand(3, 4), b.expand(2, 3, 3), c.expand(2, 3, 4)),
    "mm": lambda a, b, c: torch.mm(a.expand(3, 3), b.expand(3, 4)),
    "matmul": lambda a, b, c: torch.matmul(a.expand(3, 3), b.expand(3, 4)),
    "dot": lambda a, b, c: torch.dot(a.expand(3), b.expand(3)),
    # mv and addmv of bool computed (seed 20261205's comparison); an empty
    # product only scales self, bool included.
    "mv": lambda a, b, c: torch.mv(a.expand(3, 4), b.expand(4)),
    "matmul_vector": lambda a, b, c: torch.matmul(a.expand(3, 4), b.expand(4)),
    "addmv": lambda a, b, c: torch.addmv(a.expand(3), b.expand(3, 4), c.expand(4)),
    "addmv_empty_product": lambda a, b, c: torch.addmv(a.expand(3), b.expand(3, 0), c.expand(0)),
}
_DTYPES = (torch.bool, torch.float32, torch.int64)


@pytest.mark.parametrize("op", sorted(_PRODUCTS))
def test_products_refuse_bool_and_mixed_dtypes_in_cpus_order(op):
    """bmm, baddbmm, mv and addmv of bool computed, and addbmm of mixed dtypes computed
    in self's; mm of bool beside float raised NotImplementedError where CPU's
    meta function compares the dtypes first (RuntimeError). Every dtype triple
    raises CPU's exception type or gives CPU's value."""
    fn = _PRODUCTS[op]
    for a, b, c in [(a, b, c) for a in _DTYPES for b in _DTYPES for c in _DTYPES]:
        ones = [torch.ones(1, 1, 1).to(d).squeeze() for d in (a, b, c)]
        like_cpu(fn, *ones, modes=EAGER)
        try:  # like_cpu admits a subclass (NotImplementedError for RuntimeError): the type itself
            fn(*ones)
            continue
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            expected = type(e)
        with pytest.raises(Exception) as raised:
            fn(*to_device(ones, "tpu"))
        assert raised.type is expected, (a, b, c, raised.value)


def test_one_value_assigned_through_a_uint8_mask_raises_as_masked_fill():
    """x[mask_u8] = v with one value runs as masked_fill_ on CPU and CUDA,
    which refuses a uint8 mask; values of a row each still write through it
    (a deprecated uint8 mask is a boolean one there)."""
    x = torch.zeros(4, 2)
    mask = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=torch.uint8)
    like_cpu(lambda x, m: x.__setitem__(m, 3.0), x, mask, modes=EAGER)
    like_cpu(lambda x, m: x.index_put_((m,), torch.tensor(3.0)), x, mask, modes=EAGER)
    like_cpu(lambda x, m: x.index_put_((m,), torch.arange(4.0, device=x.device)), x, mask, modes=EAGER)
    like_cpu(lambda x, m: x.index_put_((m,), torch.tensor(3.0, device=x.device), accumulate=True), x, mask, modes=EAGER)
