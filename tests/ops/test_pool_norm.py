"""Pooling (max with indices, average, adaptive average; 1d/2d/3d), batch
norm (native_batch_norm and its backward, running statistics) and group norm,
against CPU; and a small CNN trained for a few SGD steps on both devices."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from reference import assert_close, assert_outcome_like_cpu, check_op, in_mode, outcome_on_cpu

BF16_TOL = dict(atol=2e-2, rtol=2e-2)


# ---- max pooling ----------------------------------------------------------------
MAX_POOL_2D_CASES = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 9, 8), dict(kernel_size=2)),  # floor mode drops the last row
    ((2, 3, 10, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 11, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True)),
    ((2, 2, 9, 9), dict(kernel_size=3, stride=1, padding=1, dilation=2)),
    ((3, 7, 7), dict(kernel_size=3, stride=2)),  # unbatched
    ((1, 1, 1, 1), dict(kernel_size=1)),
]


@pytest.mark.parametrize("shape,kwargs", MAX_POOL_2D_CASES)
def test_max_pool2d_values_indices_and_gradient(shape, kwargs):
    x = torch.randn(shape)
    out, idx = check_op(lambda x_: F.max_pool2d(x_, return_indices=True, **kwargs), x, grad=True)
    assert idx.dtype == torch.int64
    assert torch.equal(idx.cpu(), F.max_pool2d(x, return_indices=True, **kwargs)[1])


@pytest.mark.parametrize("shape,kwargs", MAX_POOL_2D_CASES[:4])
def test_max_pool2d_bfloat16_forward(shape, kwargs):
    check_op(lambda x_: F.max_pool2d(x_, **kwargs), torch.randn(shape).bfloat16())


def test_max_pool_ties_pick_the_first_maximum_and_route_its_gradient():
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = 5.0  # a tie inside one window and across windows
    out, idx = check_op(lambda x_: F.max_pool2d(x_, 2, stride=1, return_indices=True), x, grad=True)
    assert torch.equal(idx.cpu(), F.max_pool2d(x, 2, stride=1, return_indices=True)[1])


def test_max_pool_propagates_nan():
    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 0, 1] = float("nan")
    check_op(lambda x_: F.max_pool2d(x_, 2), x)


def test_max_pool_all_negative_infinity_window_is_negative_infinity():
    x = torch.full((1, 1, 2, 2), float("-inf"))
    check_op(lambda x_: F.max_pool2d(x_, 2, padding=1), x)


def test_max_pool2d_of_non_contiguous_input():
    x = torch.randn(2, 8, 8, 3).permute(0, 3, 1, 2)
    check_op(lambda x_: F.max_pool2d(x_, 3, 2, 1), x, grad=True)


@pytest.mark.parametrize(
    "shape,kwargs",
    [((2, 3, 11), dict(kernel_size=3, stride=2, padding=1)), ((2, 3, 10), dict(kernel_size=2, ceil_mode=True))],
)
def test_max_pool1d_forward_and_backward(shape, kwargs):
    check_op(lambda x_: F.max_pool1d(x_, **kwargs), torch.randn(shape), grad=True)


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((2, 2, 6, 6, 6), dict(kernel_size=2)),
        ((1, 2, 7, 5, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
        ((2, 5, 6, 7), dict(kernel_size=(2, 3, 2), dilation=(1, 1, 2))),
    ],
)
def test_max_pool3d_values_indices_and_gradient(shape, kwargs):
    x = torch.randn(shape)
    out, idx = check_op(lambda x_: F.max_pool3d(x_, return_indices=True, **kwargs), x, grad=True)
    assert torch.equal(idx.cpu(), F.max_pool3d(x, return_indices=True, **kwargs)[1])


def test_max_pool2d_with_indices_out_variant():
    x = torch.randn(2, 3, 6, 6)
    e_out, e_idx = torch.ops.aten.max_pool2d_with_indices(x, [2, 2])
    out, idx = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.ops.aten.max_pool2d_with_indices.out(x.to("tpu"), [2, 2], out=out, indices=idx)
    assert_close(out, e_out)
    assert torch.equal(idx.cpu(), e_idx)


# ---- average pooling ------------------------------------------------------------
AVG_POOL_2D_CASES = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2)),
    ((2, 3, 10, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 11, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True)),
    ((1, 2, 7, 7), dict(kernel_size=4, stride=3, padding=2)),
    ((3, 6, 6), dict(kernel_size=3, padding=1)),  # unbatched
]


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("shape,kwargs", AVG_POOL_2D_CASES)
def test_avg_pool2d_forward_and_backward(shape, kwargs, count_include_pad):
    check_op(lambda x_: F.avg_pool2d(x_, count_include_pad=count_include_pad, **kwargs), torch.randn(shape), grad=True)


@pytest.mark.parametrize("shape,kwargs", AVG_POOL_2D_CASES[2:4])
def test_avg_pool2d_with_divisor_override(shape, kwargs):
    check_op(lambda x_: F.avg_pool2d(x_, divisor_override=3, **kwargs), torch.randn(shape), grad=True)


@pytest.mark.parametrize("shape,kwargs", AVG_POOL_2D_CASES[:3])
def test_avg_pool2d_bfloat16_forward(shape, kwargs):
    check_op(lambda x_: F.avg_pool2d(x_, **kwargs), torch.randn(shape).bfloat16(), **BF16_TOL)


def test_avg_pool1d_and_avg_pool3d_forward_and_backward():
    check_op(
        lambda x_: F.avg_pool1d(x_, 3, 2, 1, ceil_mode=True, count_include_pad=False), torch.randn(2, 3, 10), grad=True
    )
    check_op(lambda x_: F.avg_pool3d(x_, 2), torch.randn(2, 2, 6, 4, 6), grad=True)
    check_op(
        lambda x_: F.avg_pool3d(x_, 3, (2, 1, 2), 1, ceil_mode=True, count_include_pad=False),
        torch.randn(1, 2, 7, 5, 6),
        grad=True,
    )


AVG_POOLS = {
    "avg_pool1d too small": lambda x: F.avg_pool1d(x.reshape(1, 3, 1), 2),
    "avg_pool2d too small": lambda x: F.avg_pool2d(x.reshape(1, 3, 1, 1).expand(1, 3, 1, 4), 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x.reshape(1, 3, 1, 1).expand(1, 3, 4, 4), 2),
    "avg_pool3d too small": lambda x: F.avg_pool3d(x.reshape(1, 3, 1, 1, 1).expand(1, 3, 1, 4, 4), 2),
    "avg_pool3d": lambda x: F.avg_pool3d(x.reshape(1, 3, 1, 1, 1).expand(1, 3, 2, 4, 4), 2),
    "lp_pool2d too small": lambda x: F.lp_pool2d(x.reshape(1, 3, 1, 1).expand(1, 3, 1, 4), 2, 2),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.bool, torch.int32, torch.int64, torch.uint8, torch.float32])
@pytest.mark.parametrize("pool", sorted(AVG_POOLS))
def test_avg_pool_checks_its_output_size_before_its_dtype_as_cpu(pool, dtype, mode):
    # CPU's avg_pool kernels are structured: the meta function's size check
    # raises RuntimeError before the kernel's dtype dispatch raises
    # NotImplementedError (tpu raised NotImplementedError first). PyTorch's
    # Python meta kernel refuses uint8 before its size check: CPU's kernel
    # decides then (argument_checks.h, check_arguments_after_meta_refusal).
    x = torch.ones(3, dtype=dtype)
    fn = AVG_POOLS[pool]
    run = in_mode(mode, fn)
    assert_outcome_like_cpu(lambda: run(x.to("tpu")), outcome_on_cpu(lambda: fn(x)), assert_close)


# ---- adaptive average pooling ---------------------------------------------------
@pytest.mark.parametrize(
    "shape,size",
    [
        ((2, 3, 8, 8), (1, 1)),
        ((2, 3, 8, 8), (4, 4)),
        ((2, 3, 10, 9), (3, 4)),
        ((1, 2, 5, 7), (7, 3)),
        ((3, 6, 5), (2, 2)),
        ((2, 3, 3, 3), (5, 5)),
    ],
)
def test_adaptive_avg_pool2d_forward_and_backward(shape, size):
    check_op(lambda x_: F.adaptive_avg_pool2d(x_, size), torch.randn(shape), grad=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "shape,size", [((2, 8, 8, 8), (5, 7, 4)), ((1, 3, 5, 6, 7), (2, 3, 4)), ((1, 2, 3, 3, 3), (5, 5, 5))]
)
def test_adaptive_avg_pool3d_of_half_precision_sums_in_turn_as_cpu(shape, size, dtype):
    # CPU sums each window in the dtype itself, rounding every addition, then
    # divides by each window size in turn: equal to the last bit.
    x = torch.randn(shape).to(dtype)
    assert_close(F.adaptive_avg_pool3d(x.to("tpu"), size), F.adaptive_avg_pool3d(x, size), atol=0, rtol=0)


def test_adaptive_avg_pool2d_direct_op_matches_cpu():
    # (1, 1) goes through mean in F.adaptive_avg_pool2d; the aten op directly:
    x = torch.randn(2, 3, 7, 5)
    check_op(lambda x_: torch.ops.aten._adaptive_avg_pool2d(x_, [1, 1]), x, grad=True)


def test_adaptive_avg_pool_bfloat16_forward():
    check_op(lambda x_: F.adaptive_avg_pool2d(x_, (3, 4)), torch.randn(2, 3, 10, 9).bfloat16(), **BF16_TOL)


def test_adaptive_avg_pool1d_and_3d_forward_and_backward():
    check_op(lambda x_: F.adaptive_avg_pool1d(x_, 4), torch.randn(2, 3, 10), grad=True)
    check_op(lambda x_: F.adaptive_avg_pool3d(x_, (2, 3, 4)), torch.randn(2, 2, 5, 7, 9), grad=True)
    check_op(lambda x_: F.adaptive_avg_pool3d(x_, (2, 1, 3)), torch.randn(2, 5, 7, 9), grad=True)  # unbatched


ADAPTIVE_POOLS = {
    "avg1d": (F.adaptive_avg_pool1d, 1),
    "avg2d": (F.adaptive_avg_pool2d, 2),
    "avg3d": (F.adaptive_avg_pool3d, 3),
    "max1d": (F.adaptive_max_pool1d, 1),
    "max2d": (F.adaptive_max_pool2d, 2),
    "max3d": (F.adaptive_max_pool3d, 3),
}


@pytest.mark.parametrize("pool", list(ADAPTIVE_POOLS))
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_adaptive_pools_raise_cpus_error_for_a_wrong_rank_or_dtype_and_take_what_it_takes(pool, mode):
    # A wrong rank, an integer, bool or complex input: CPU's exception and
    # words ("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [4, 4]",
    # "\"adaptive_max_pool2d\" not implemented for 'Long'"), in CPU's order with
    # the empty-dimension check; an empty result of any dtype where CPU's
    # kernel returns one before it dispatches on the dtype.
    fn, spatial = ADAPTIVE_POOLS[pool]
    shapes = [(4,) * spatial, (2,) + (4,) * spatial, (1, 2, 3) + (4,) * spatial, (1, 2, 0) + (4,) * (spatial - 1)]
    shapes += [(0, 2) + (4,) * spatial, (1, 0) + (4,) * spatial]
    for shape in shapes:
        for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64):
            for size in (2, 0):
                x = torch.ones(shape, dtype=dtype)
                expected = outcome_on_cpu(lambda: fn(x, size))
                run = in_mode(mode, lambda: fn(x.to("tpu"), size))
                assert_outcome_like_cpu(run, expected, assert_close)


# ---- batch norm -----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 7), (4, 3, 5, 5), (2, 3, 4, 3, 2)])
def test_batch_norm_training_forward_and_backward(shape):
    c = shape[1]
    check_op(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5),
        torch.randn(shape) * 2 + 1,
        torch.randn(c),
        torch.randn(c),
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )


def test_batch_norm_training_without_affine():
    check_op(
        lambda x: F.batch_norm(x, None, None, training=True), torch.randn(4, 3, 5, 5), grad=True, atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5, 5)])
def test_batch_norm_eval_uses_running_statistics(shape):
    c = shape[1]
    mean, var = torch.randn(c), torch.rand(c) + 0.5
    check_op(
        lambda x, w, b: F.batch_norm(x, mean.to(x.device), var.to(x.device), w, b, training=False, eps=1e-3),
        torch.randn(shape),
        torch.randn(c),
        torch.randn(c),
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )


def test_batch_norm_bfloat16_forward():
    x = torch.randn(4, 3, 5, 5).bfloat16()
    check_op(lambda x_: F.batch_norm(x_, None, None, training=True), x, **BF16_TOL)
    mean, var = torch.randn(3), torch.rand(3) + 0.5
    check_op(lambda x_: F.batch_norm(x_, mean.to(x_.device), var.to(x_.device), training=False), x, **BF16_TOL)


def test_native_batch_norm_saves_batch_mean_and_inverse_std():
    x = torch.randn(4, 3, 5, 5)
    out, mean, invstd = torch.ops.aten.native_batch_norm(x.to("tpu"), None, None, None, None, True, 0.1, 1e-5)
    assert_close(mean, x.mean((0, 2, 3)))
    assert_close(invstd, (x.var((0, 2, 3), unbiased=False) + 1e-5).rsqrt(), rtol=1e-5)


def test_batch_norm_module_running_statistics_match_cpu_after_steps():
    torch.manual_seed(0)
    cpu = nn.BatchNorm2d(3, momentum=0.3)
    tpu = nn.BatchNorm2d(3, momentum=0.3).to("tpu")
    for _ in range(3):
        x = torch.randn(4, 3, 5, 5) * 2 + 1
        assert_close(tpu(x.to("tpu")), cpu(x), atol=1e-5, rtol=1e-5)
    # running_var uses the unbiased batch variance (PyTorch's rule).
    assert_close(tpu.running_mean, cpu.running_mean)
    assert_close(tpu.running_var, cpu.running_var)
    assert int(tpu.num_batches_tracked) == 3
    cpu.eval()
    tpu.eval()
    x = torch.randn(2, 3, 5, 5)
    assert_close(tpu(x.to("tpu")), cpu(x), atol=1e-5, rtol=1e-5)


def test_native_batch_norm_legit_updates_running_statistics():
    # torch.compile's decompositions call this overload; running stats are
    # written arguments that no return aliases.
    x = torch.randn(4, 3, 5, 5)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    rm_t, rv_t = rm.to("tpu"), rv.to("tpu")
    expected = torch.ops.aten._native_batch_norm_legit(x, None, None, rm, rv, True, 0.1, 1e-5)
    actual = torch.ops.aten._native_batch_norm_legit(x.to("tpu"), None, None, rm_t, rv_t, True, 0.1, 1e-5)
    assert_close(list(actual), list(expected))
    assert_close(rm_t, rm)
    assert_close(rv_t, rv)


def test_native_batch_norm_legit_no_training_matches_cpu():
    x, w, b = torch.randn(4, 3, 5, 5), torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    expected = torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)
    actual = torch.ops.aten._native_batch_norm_legit_no_training(*(t.to("tpu") for t in (x, w, b, rm, rv)), 0.1, 1e-5)
    assert_close(actual[0], expected[0])


def test_batch_norm_module_eval_forward_and_backward():
    cpu = nn.BatchNorm1d(4)
    with torch.no_grad():
        cpu.running_mean.copy_(torch.randn(4))
        cpu.running_var.copy_(torch.rand(4) + 0.5)
        cpu.weight.copy_(torch.randn(4))
    cpu.eval()
    tpu = nn.BatchNorm1d(4).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    tpu.eval()
    x = torch.randn(5, 4, 3)
    check_op(lambda x_: (cpu if x_.device.type == "cpu" else tpu)(x_), x, grad=True)


# ---- group norm -----------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 5), 3), ((3, 4), 2), ((2, 4, 7), 4), ((1, 6, 2, 2, 3), 1)])
def test_group_norm_with_affine_forward_and_backward(shape, groups):
    c = shape[1]
    check_op(
        lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-5),
        torch.randn(shape) * 2 + 1,
        torch.randn(c),
        torch.randn(c),
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("input_dtype", [torch.complex64, torch.int64, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("parameter_dtype", [None, torch.float32, torch.complex64, "input's"])
def test_group_norm_refuses_what_cpu_refuses_with_its_exception_type(mode, input_dtype, parameter_dtype):
    # CPU checks the parameters' dtypes against the input's (mixed-dtype
    # rule: RuntimeError), then dispatches on the input's dtype (floating
    # only: NotImplementedError). tpu computed a complex group_norm, and an
    # integer input raised the meta kernel's mean() RuntimeError.
    import torch_tpu

    dtype = input_dtype if parameter_dtype == "input's" else parameter_dtype

    def group_norm(device):
        x = torch.linspace(-1, 1, 48).reshape(3, 4, 4).to(input_dtype).to(device)
        w = None if dtype is None else torch.ones(4, dtype=dtype, device=device)
        b = None if dtype is None else torch.zeros(4, dtype=dtype, device=device)
        return F.group_norm(x, 2, w, b).cpu()

    with torch_tpu.eager_mode(mode):
        assert_outcome_like_cpu(
            lambda: group_norm("tpu"),
            outcome_on_cpu(lambda: group_norm("cpu")),
            lambda actual, e: torch.testing.assert_close(actual, e, atol=1e-2, rtol=1e-2),
            same_message=False,
        )


def test_group_norm_without_affine_and_bfloat16_forward():
    check_op(lambda x: F.group_norm(x, 2), torch.randn(3, 4, 5), grad=True, atol=1e-4, rtol=1e-4)
    check_op(lambda x: F.group_norm(x, 2), torch.randn(3, 4, 5).bfloat16(), **BF16_TOL)


def test_native_group_norm_statistics_are_per_sample_and_group():
    x = torch.randn(2, 6, 3, 3)
    out, mean, rstd = torch.ops.aten.native_group_norm(x.to("tpu"), None, None, 2, 6, 9, 3, 1e-5)
    groups = x.reshape(2, 3, -1)
    assert mean.shape == (2, 3) and rstd.shape == (2, 3)
    assert_close(mean, groups.mean(-1))
    assert_close(rstd, (groups.var(-1, unbiased=False) + 1e-5).rsqrt(), rtol=1e-5)


# ---- a small CNN ----------------------------------------------------------------
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.fc(x.flatten(1))


def test_small_cnn_trains_like_cpu_for_five_sgd_steps():
    torch.manual_seed(0)
    cpu = SmallCNN()
    tpu = SmallCNN()
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(tpu.parameters(), lr=0.1, momentum=0.9)
    data = [(torch.randn(8, 3, 12, 12), torch.randint(0, 5, (8,))) for _ in range(5)]
    for x, y in data:
        loss_c = F.cross_entropy(cpu(x), y)
        loss_t = F.cross_entropy(tpu(x.to("tpu")), y.to("tpu"))
        opt_c.zero_grad()
        opt_t.zero_grad()
        loss_c.backward()
        loss_t.backward()
        opt_c.step()
        opt_t.step()
        assert abs(loss_t.item() - loss_c.item()) <= 1e-4 * abs(loss_c.item()), (loss_t.item(), loss_c.item())
    for (name, p_c), p_t in zip(cpu.state_dict().items(), tpu.state_dict().values()):
        assert_close(p_t, p_c, atol=1e-4, rtol=1e-4, msg=name)


# ---- _batch_norm_with_update / _native_batch_norm_legit.no_stats -----------------
def _batch_norm_with_update_on(device, x, w, b, rm, rv, momentum=0.1, eps=1e-5):
    args = [t.to(device) if t is not None else None for t in (x, w, b, rm, rv)]
    results = torch.ops.aten._batch_norm_with_update(*args, momentum, eps)
    return results, args[3], args[4]


# weight and bias are always given: PyTorch's own meta kernel for this op
# (torch/_decomp _get_batch_norm_reserve_tensor) rejects None for them.
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 7), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
def test_batch_norm_with_update_matches_cpu_and_updates_running_statistics(shape):
    c = shape[1]
    x = torch.randn(shape) * 2 + 1
    w, b = torch.randn(c), torch.randn(c)
    rm, rv = torch.randn(c), torch.rand(c) + 0.5
    expected, rm_e, rv_e = _batch_norm_with_update_on("cpu", x, w, b, rm.clone(), rv.clone(), momentum=0.3)
    actual, rm_a, rv_a = _batch_norm_with_update_on("tpu", x, w, b, rm.clone(), rv.clone(), momentum=0.3)
    assert_close(list(actual[:3]), list(expected[:3]), atol=1e-5, rtol=1e-5)
    # reserve is cuDNN's workspace: empty uint8 on every other backend.
    assert actual[3].dtype == torch.uint8 and actual[3].shape == expected[3].shape == (0,)
    # running_var takes the unbiased batch variance, in place.
    assert_close(rm_a, rm_e)
    assert_close(rv_a, rv_e)


def test_batch_norm_with_update_backward_matches_cpu():
    # Autograd of _batch_norm_with_update calls aten::batch_norm_backward.
    rm, rv = torch.randn(3), torch.rand(3) + 0.5

    def fn(x, w, b):
        stats = (rm.clone().to(x.device), rv.clone().to(x.device))
        return torch.ops.aten._batch_norm_with_update(x, w, b, *stats, 0.1, 1e-5)[0]

    check_op(fn, torch.randn(4, 3, 5) * 2 + 1, torch.randn(3), torch.randn(3), grad=True, atol=1e-4, rtol=1e-4)


def test_batch_norm_with_update_bfloat16_output_and_running_statistics():
    x = torch.randn(4, 3, 5, 5).bfloat16()
    w, b = torch.randn(3).bfloat16(), torch.randn(3).bfloat16()
    rm, rv = torch.randn(3).bfloat16(), (torch.rand(3) + 0.5).bfloat16()
    expected, rm_e, rv_e = _batch_norm_with_update_on("cpu", x, w, b, rm.clone(), rv.clone())
    actual, rm_a, rv_a = _batch_norm_with_update_on("tpu", x, w, b, rm.clone(), rv.clone())
    assert_close(actual[0], expected[0], **BF16_TOL)
    assert_close(rm_a, rm_e, **BF16_TOL)
    assert_close(rv_a, rv_e, **BF16_TOL)


def test_batch_norm_with_update_functional_returns_new_running_statistics():
    # CompositeExplicitAutograd: runs _batch_norm_with_update on copies of the stats.
    x, w, b, rm, rv = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5
    expected = torch.ops.aten._batch_norm_with_update_functional(x, w, b, rm, rv, 0.1, 1e-5)
    rm_t, rv_t = rm.to("tpu"), rv.to("tpu")
    actual = torch.ops.aten._batch_norm_with_update_functional(
        x.to("tpu"), w.to("tpu"), b.to("tpu"), rm_t, rv_t, 0.1, 1e-5
    )
    assert_close([actual[i] for i in (0, 1, 2, 4, 5)], [expected[i] for i in (0, 1, 2, 4, 5)], atol=1e-5, rtol=1e-5)
    assert actual[3].dtype == torch.uint8 and actual[3].numel() == 0
    assert_close(rm_t, rm)  # inputs untouched
    assert_close(rv_t, rv)


def test_batch_norm_with_update_out_variant_is_not_lowered():
    # PyTorch has no meta kernel for the out= overload, so the device cannot
    # size or check its results; it is not registered.
    x, w, b, rm, rv = (
        t.to("tpu") for t in (torch.randn(4, 3), torch.randn(3), torch.randn(3), torch.zeros(3), torch.ones(3))
    )
    outs = [torch.empty(0, device="tpu") for _ in range(3)] + [torch.empty(0, dtype=torch.uint8, device="tpu")]
    with pytest.raises(NotImplementedError):
        torch.ops.aten._batch_norm_with_update.out(
            x, w, b, rm, rv, 0.1, 1e-5, out=outs[0], save_mean=outs[1], save_invstd=outs[2], reserve=outs[3]
        )


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 5)])
def test_native_batch_norm_legit_no_stats_forward_and_backward(shape):
    c = shape[1]
    check_op(
        lambda x, w, b: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
        torch.randn(shape) * 2 + 1,
        torch.randn(c),
        torch.randn(c),
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )
    check_op(
        lambda x: torch.ops.aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)[0],
        torch.randn(shape),
        grad=True,
        atol=1e-4,
        rtol=1e-4,
    )


def test_native_batch_norm_legit_no_stats_in_evaluation_mode_raises():
    # Evaluation needs running statistics: PyTorch's meta kernel refuses it
    # (CPU's kernel reads the missing statistics anyway, and crashes).
    with pytest.raises(AssertionError, match="running_mean and running_var must not be None"):
        torch.ops.aten._native_batch_norm_legit.no_stats(torch.randn(4, 3, device="tpu"), None, None, False, 0.1, 1e-5)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_batch_norm_statistics_over_a_large_channel_are_as_accurate_as_cpus(mode):
    # s3d's BatchNorm3d channels hold 50,176 values at batch 2: their variance summed one square after another
    # on XLA:CPU was 2.7e-6 off (CPU: 1e-7), which moved activations past ReLU kinks that CPU kept.
    x = torch.randn(2, 4, 8, 56, 56, dtype=torch.float64) * 2 + 3
    weight = torch.rand(4, dtype=torch.float64) + 0.5
    grad = torch.randn_like(x)

    def step(t, w):
        t, w = t.detach().requires_grad_(), w.detach().requires_grad_()
        y = F.batch_norm(t, None, None, w, None, training=True, eps=1e-3)
        y.backward(grad.to(t.dtype).to(t.device))
        return y.detach(), t.grad, w.grad

    reference = step(x, weight)
    cpu = step(x.float(), weight.float())
    tpu = [v.cpu() for v in in_mode(mode, step)(x.float().to("tpu"), weight.float().to("tpu"))]
    for name, a, c, r in zip(("output", "input gradient", "weight gradient"), tpu, cpu, reference):
        tpu_error = (a.double() - r).abs().max().item()
        cpu_error = (c.double() - r).abs().max().item()
        assert tpu_error <= 3 * cpu_error, (name, tpu_error, cpu_error)
