"""Reductions, softmax family and cumsum on tpu match CPU PyTorch: values,
result dtypes, keepdim, negative and multiple dims, non-contiguous inputs,
NaN and infinity rules, and gradients."""

import math
import os
import subprocess
import sys

import pytest
import torch
from reference import assert_close, check_op, in_mode
from reference import make_input as make

FLOATS = [torch.float32, torch.bfloat16]


def transposed(shape, dtype=torch.float32):
    """A non-contiguous view with `shape` (a transposed base)."""
    return make(tuple(reversed(shape)), dtype).t() if len(shape) == 2 else make(shape, dtype).transpose(0, -1)


def on_tpu(x):
    return x.to("tpu")


def check_nan(fn, *inputs):
    """Forward check where NaN must match NaN (reference.assert_close treats
    NaN as unequal)."""
    expected = fn(*inputs)
    actual = fn(*[on_tpu(i) for i in inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), e, equal_nan=True)
    return actual if len(actual) > 1 else actual[0]


# ---- sum / mean / prod ----------------------------------------------------------

SUM_DIMS = [None, 0, -1, (0, 2), (-1, 0), ()]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", SUM_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_matches_cpu_for_dims_keepdim_and_dtypes(dtype, dim, keepdim):
    x = make((3, 4, 5), dtype)
    grad = dtype.is_floating_point
    if dim is None:
        out = check_op(lambda t: t.sum(), x, grad=grad)
    else:
        out = check_op(lambda t: t.sum(dim, keepdim=keepdim), x, grad=grad)
    # bool and integer sums are int64 (PyTorch's sum promotion).
    assert out.dtype == (torch.int64 if not dtype.is_floating_point else dtype)


def test_sum_with_dtype_argument_converts_before_adding():
    x = make((4, 6), torch.int64)
    check_op(lambda t: t.sum(dtype=torch.float32), x)
    check_op(lambda t: t.sum(1, dtype=torch.float64), x)
    b = make((4, 6), torch.bfloat16)
    check_op(lambda t: t.sum(0, dtype=torch.float32), b)


def test_bfloat16_sum_accumulates_in_float32():
    # 4096 ones plus small values: a bf16 accumulator would stall at 256.
    x = torch.ones(4096, dtype=torch.bfloat16)
    assert on_tpu(x).sum().cpu().item() == 4096


def test_sum_of_non_contiguous_views():
    check_op(lambda t: t.sum(0), transposed((5, 7)), grad=True)
    check_op(lambda t: t[:, ::2].sum(-1, keepdim=True), make((4, 9)), grad=True)


def test_sum_of_zero_dim_empty_and_size_one():
    check_op(lambda t: t.sum(), make(()), grad=True)
    check_op(lambda t: t.sum(0), make(()), grad=True)
    check_op(lambda t: t.sum(-1, keepdim=True), make(()))
    check_op(lambda t: t.sum(1), make((3, 0)))
    check_op(lambda t: t.sum(), make((0,)))
    check_op(lambda t: t.sum(0), make((1, 4)), grad=True)


def test_sum_out_variant_writes_into_out():
    x = make((3, 4))
    out = on_tpu(torch.empty(3))
    torch.sum(on_tpu(x), 1, out=out)
    assert_close(out, x.sum(1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", SUM_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_matches_cpu(dtype, dim, keepdim):
    x = make((3, 4, 5), dtype)
    if dim is None:
        check_op(lambda t: t.mean(), x, grad=True)
    else:
        check_op(lambda t: t.mean(dim, keepdim=keepdim), x, grad=True)


def test_mean_dtype_argument_and_empty_gives_nan():
    check_op(lambda t: t.mean(dtype=torch.float32), make((4, 5), torch.int64))
    check_nan(lambda t: t.mean(0), make((0, 3)))
    check_op(lambda t: t.mean(1), transposed((6, 3)), grad=True)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_matches_cpu(dtype, dim, keepdim):
    x = make((3, 4), dtype)
    if dtype.is_floating_point:
        x = (x.float() * 0.5 + 1).to(dtype)
    if dim is None:
        out = check_op(lambda t: t.prod(), x)
    else:
        out = check_op(lambda t: t.prod(dim, keepdim=keepdim), x)
    assert out.dtype == (torch.int64 if not dtype.is_floating_point else dtype)


def test_prod_gradient_without_zeros():
    x = make((3, 4)).abs() + 0.5
    check_op(lambda t: t.prod(1), x, grad=True)


# ---- all / any --------------------------------------------------------------------


@pytest.mark.parametrize("op", ["all", "any"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64, torch.uint8])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_any_match_cpu(op, dtype, dim, keepdim):
    x = make((3, 4, 2), torch.bool)
    x = x.to(dtype) if dtype != torch.bool else x
    if dim is None:
        out = check_op(lambda t: getattr(t, op)(), x)
    else:
        out = check_op(lambda t: getattr(t, op)(dim, keepdim=keepdim), x)
    # uint8 keeps uint8 (PyTorch's rule); everything else gives bool.
    assert out.dtype == (torch.uint8 if dtype == torch.uint8 else torch.bool)


def test_all_any_edge_cases():
    check_op(lambda t: t.all(), torch.ones(5, dtype=torch.bool))
    check_op(lambda t: t.any(), torch.zeros(5, dtype=torch.bool))
    check_op(lambda t: t.all(), torch.zeros(0, dtype=torch.bool))  # empty all is True
    check_op(lambda t: t.any(1), torch.zeros(3, 0, dtype=torch.bool))  # empty any is False
    check_op(lambda t: t.all(0), transposed((4, 3), torch.bool))


def test_all_out_variant():
    x = make((3, 4), torch.bool)
    out = on_tpu(torch.empty(4, dtype=torch.bool))
    torch.all(on_tpu(x), 0, out=out)
    assert_close(out, x.all(0))


# ---- amax / amin / max / min -----------------------------------------------------


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [(), 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin_match_cpu(op, dtype, dim, keepdim):
    x = make((3, 4, 5), dtype)
    check_op(lambda t: getattr(torch, op)(t, dim, keepdim=keepdim), x, grad=dtype.is_floating_point)


def test_amax_amin_propagate_nan_and_handle_infinity():
    x = torch.tensor([[1.0, float("nan"), 3.0], [-math.inf, -math.inf, -math.inf], [2.0, math.inf, 1.0]])
    check_nan(lambda t: t.amax(1), x)
    check_nan(lambda t: t.amin(1), x)
    check_nan(lambda t: t.amax(0), x)
    check_nan(lambda t: t.amin(), x)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_max_min_of_everything(op, dtype):
    check_nan(lambda t: getattr(t, op)(), make((4, 5), dtype))
    check_nan(lambda t: getattr(t, op)(), make((), dtype))


def test_max_min_of_everything_nan_wins_and_gradient():
    x = torch.tensor([1.0, float("nan"), -2.0])
    check_nan(lambda t: t.max(), x)
    check_nan(lambda t: t.min(), x)
    check_op(lambda t: t.max(), make((3, 4)), grad=True)
    check_op(lambda t: t.min(), transposed((3, 4)), grad=True)


def test_max_min_of_empty_raise_like_cpu():
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        on_tpu(torch.empty(0)).max()
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        on_tpu(torch.empty(2, 0)).min()
    with pytest.raises(IndexError, match="to have non-zero size"):  # IndexError, as on CPU
        on_tpu(torch.empty(0, 3)).max(0)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_values_and_indices(op, dtype, dim, keepdim):
    x = make((4, 5), dtype)
    out = check_nan(lambda t: tuple(getattr(t, op)(dim, keepdim=keepdim)), x)
    assert out[1].dtype == torch.int64


def test_max_min_dim_ties_return_first_index_and_nan_wins():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")], [0.0, 0.0, 0.0, 0.0]])
    for op in ("max", "min"):
        check_nan(lambda t: tuple(getattr(t, op)(1)), x)
        check_nan(lambda t: tuple(getattr(t, op)(0)), x)
    ints = torch.tensor([[4, 1, 4, 1], [7, 7, 7, 7]])
    check_nan(lambda t: tuple(t.max(1)), ints)
    check_nan(lambda t: tuple(t.min(-1)), ints)


def test_max_min_dim_of_zero_dim_and_non_contiguous():
    check_nan(lambda t: tuple(t.max(0)), make(()))
    check_nan(lambda t: tuple(t.min(-1, keepdim=True)), make(()))
    check_nan(lambda t: tuple(t.max(0)), transposed((4, 6)))


def test_max_dim_gradient_flows_to_the_selected_element():
    check_op(lambda t: t.max(1)[0], make((3, 5)), grad=True)
    check_op(lambda t: t.min(0, keepdim=True)[0], make((3, 5)), grad=True)


def test_max_dim_out_variant():
    x = make((3, 4))
    values, indices = on_tpu(torch.empty(3)), on_tpu(torch.empty(3, dtype=torch.int64))
    torch.max(on_tpu(x), 1, out=(values, indices))
    assert_close(values, x.max(1).values)
    assert_close(indices, x.max(1).indices)


# ---- argmax / argmin --------------------------------------------------------------


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_match_cpu(op, dtype, dim, keepdim):
    x = make((4, 3, 5), dtype)
    check_op(lambda t: getattr(t, op)(dim, keepdim=keepdim), x)


def test_argmax_argmin_first_of_ties_and_nan():
    x = torch.tensor([[2.0, 7.0, 7.0], [float("nan"), 1.0, float("nan")], [-math.inf, -math.inf, -math.inf]])
    for op in ("argmax", "argmin"):
        check_op(lambda t: getattr(t, op)(1), x)
        check_op(lambda t: getattr(t, op)(), x)
        check_op(lambda t: getattr(t, op)(0, keepdim=True), x)


def test_argmax_of_zero_dim_and_non_contiguous():
    check_op(lambda t: t.argmax(), make(()))
    check_op(lambda t: t.argmin(0), make(()))
    check_op(lambda t: t.argmax(1), transposed((5, 4)))
    check_op(lambda t: t[::2].argmin(), make((6, 4)))


# ---- var / std ----------------------------------------------------------------------


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("correction", [None, 0, 2, 1.5])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std_match_cpu(op, dtype, dim, correction, keepdim):
    x = make((3, 4, 5), dtype)
    kwargs = {} if correction is None else {"correction": correction}
    check_op(lambda t: getattr(torch, op)(t, dim, keepdim=keepdim, **kwargs), x, grad=True)


def test_var_unbiased_flag_and_degenerate_sizes():
    check_op(lambda t: t.var(1, unbiased=False), make((3, 4)), grad=True)
    check_nan(lambda t: t.var(), make((1,)))  # 0 / 0: NaN as on CPU
    check_nan(lambda t: t.std(0, correction=3), make((2, 3)))  # divisor clamps at 0
    check_op(lambda t: t.std(1), transposed((4, 6)), grad=True)


# ---- norms ----------------------------------------------------------------------------


@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1])
@pytest.mark.parametrize("dim", [None, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_linalg_vector_norm_matches_cpu(ord, dim, keepdim):
    x = make((3, 4, 2))
    grad = ord not in (0,)
    if ord in (0.5, -1):
        x = x.abs() + 0.1  # keep the reference gradient finite
    check_op(lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), x, grad=grad)


def test_linalg_vector_norm_bfloat16_dtype_argument_and_views():
    check_op(lambda t: torch.linalg.vector_norm(t), make((5, 6), torch.bfloat16), grad=True)
    check_op(lambda t: torch.linalg.vector_norm(t, 2, dtype=torch.float32), make((5, 6), torch.bfloat16))
    check_op(lambda t: torch.linalg.vector_norm(t, 1, -1), transposed((4, 7)), grad=True)
    check_op(lambda t: t.norm(), make((3, 3)), grad=True)


# ---- logsumexp ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_matches_cpu(dtype, dim, keepdim):
    check_op(lambda t: torch.logsumexp(t, dim, keepdim), make((3, 4, 5), dtype) * 10, grad=True)


def test_logsumexp_infinities_and_large_values():
    x = torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [1000.0, 1000.0], [-1000.0, -1001.0]])
    check_op(lambda t: torch.logsumexp(t, 1), x)  # all -inf gives -inf, not NaN
    check_op(lambda t: torch.logsumexp(t, -1), make((2, 3), torch.int64))  # ints give float
    check_op(lambda t: torch.logsumexp(t, 0), transposed((3, 5)), grad=True)


# ---- softmax / log_softmax ------------------------------------------------------------


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_cpu_with_gradient(fn, dtype, dim):
    x = make((4, 5, 3), dtype) * 5
    check_op(lambda t: getattr(torch, fn)(t, dim), x, grad=True)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_is_stable_and_handles_views_and_zero_dim(fn):
    check_op(lambda t: getattr(torch, fn)(t, 1), torch.tensor([[1000.0, 0.0, -1000.0], [-math.inf, 0.0, 1.0]]))
    check_op(lambda t: getattr(torch, fn)(t, 0), transposed((3, 6)), grad=True)
    check_op(lambda t: getattr(torch, fn)(t, 0), make(()), grad=True)
    check_op(lambda t: getattr(torch, fn)(t, -1), make((2, 0)))


def test_softmax_with_dtype_argument():
    check_op(lambda t: torch.softmax(t, -1, dtype=torch.float32), make((3, 4), torch.bfloat16), grad=True)
    check_op(lambda t: torch.log_softmax(t, 0, dtype=torch.float64), make((3, 4)))


@pytest.mark.parametrize("op", [torch.ops.aten._softmax, torch.ops.aten._log_softmax])
def test_half_to_float_gives_float32_result(op):
    # CPU has no half_to_float kernel; the reference is the op on a float32 input.
    x = make((3, 7), torch.float16)
    out = op(on_tpu(x), 1, True)
    assert out.dtype == torch.float32
    assert_close(out, op(x.float(), 1, False), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_backward_data_ops_match_cpu(dtype, dim):
    g = make((4, 6), dtype)
    y = torch.softmax(make((4, 6)), dim).to(dtype)
    ly = torch.log_softmax(make((4, 6)), dim).to(dtype)
    check_op(lambda a, b: torch.ops.aten._softmax_backward_data(a, b, dim, dtype), g, y)
    check_op(lambda a, b: torch.ops.aten._log_softmax_backward_data(a, b, dim, dtype), g, ly)


# ---- cumsum ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_cpu(dtype, dim):
    x = make((4, 6, 3), dtype)
    out = check_op(lambda t: torch.cumsum(t, dim), x, grad=dtype.is_floating_point)
    assert out.dtype == (torch.int64 if not dtype.is_floating_point else dtype)


def test_cumsum_dtype_in_place_out_and_edge_shapes():
    check_op(lambda t: torch.cumsum(t, 0, dtype=torch.float32), make((5,), torch.int64))
    check_op(lambda t: torch.cumsum(t, 1), transposed((3, 5)), grad=True)
    check_op(lambda t: torch.cumsum(t, 0), make(()))
    check_op(lambda t: torch.cumsum(t, 1), make((2, 0)))
    check_op(lambda t: torch.cumsum(t, 0), make((1000,)), atol=1e-3, rtol=1e-4)
    x = make((3, 4))
    t = on_tpu(x)
    t.cumsum_(1)
    assert_close(t, x.cumsum(1))
    out = on_tpu(torch.empty(3, 4))
    torch.cumsum(on_tpu(x), 0, out=out)
    assert_close(out, x.cumsum(0))


# ---- long sums: as accurate as CPU's ---------------------------------------------


# Sums over trailing dims of 4096 elements or more go in blocks (csrc/lower/common/reduction.cpp): the same
# results as CPU, kept dims in place, for every way the dims can fall: trailing, BatchNorm's (a leading dim
# too), everything, a count with no divisor to block by (4099 is prime), and a reduced dim that is not trailing.
BLOCKED_SUMS = [
    ((4, 8192), -1),
    ((2, 3, 64, 64), (2, 3)),
    ((2, 3, 64, 64), (0, 2, 3)),
    ((8192,), None),
    ((3, 4099), 1),
    ((2, 4096, 3), 1),
]


@pytest.mark.parametrize("shape,dim", BLOCKED_SUMS)
def test_long_sums_added_in_blocks_match_cpu(shape, dim):
    x = make(shape)
    check_op(lambda t: t.sum(dim), x, grad=True)
    check_op(lambda t: t.mean(dim, keepdim=True), x, grad=True)
    check_op(lambda t: torch.var_mean(t, dim), x)
    check_op(lambda t: torch.logsumexp(t, dim if dim is not None else tuple(range(t.dim()))), x)
    check_op(lambda t: t.sum(dim), make(shape, torch.bfloat16))
    check_op(lambda t: t.sum(dim), make(shape, torch.int64))
    # inf and -inf in different blocks still make NaN, and NaN anywhere stays
    y = x.clone().flatten()
    y[0], y[-1], y[len(y) // 2] = float("inf"), float("-inf"), float("nan")
    check_nan(lambda t: t.sum(dim), y.view(shape))


def _relative_error(actual, reference):
    return ((actual.cpu().double() - reference) / reference).abs().max().item()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
def test_a_long_sum_of_fused_values_is_as_accurate_as_cpus(mode):
    # XLA:CPU adds a reduction fused with the ops that make its input one element after another: these
    # 50,176 squares per channel summed 3.6e-6 off in float32 (CPU: 1e-7) until sums went in blocks.
    x = torch.randn(2, 4, 8, 56, 56, dtype=torch.float64) * 2 + 3

    def squares_per_channel(t):
        return ((t - 3) * (t - 3)).sum((0, 2, 3, 4))

    def mean_square(t):
        return ((t - 3) * (t - 3)).mean()

    for fn in (squares_per_channel, mean_square):
        reference = fn(x)
        cpu_error = _relative_error(fn(x.float()), reference)
        tpu_error = _relative_error(in_mode(mode, fn)(x.float().to("tpu")), reference)
        assert tpu_error <= 3 * cpu_error + 1e-8, (fn.__name__, tpu_error, cpu_error)


_COLUMN_SUMS_SCRIPT = """
import glob, math, os, re, torch, torch_tpu
from reference import in_mode
torch.manual_seed(0)
torch.set_float32_matmul_precision("highest")
model = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 256), torch.nn.GELU())
x = torch.randn(16, 64, 64)
def grads(m, inp):
    m.zero_grad(set_to_none=True)
    m(inp).square().mean().backward()
    return [p.grad for p in m.parameters()]
expected = grads(model, x)
for mode in ("strict", "defer_and_fuse", "compiled"):
    m = __import__("copy").deepcopy(model).to("tpu")
    actual = in_mode(mode, lambda t: grads(m, t))(x.to("tpu"))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-4)
texts = [open(f).read() for f in glob.glob(os.path.join(os.environ["TORCH_TPU_DUMP_HLO"], "*.mlir"))]
# the column sums' barriers (a blocked sum's own barrier holds its partial sums)
print("BARRIERS", sum(len(re.findall(r"optimization_barrier.*tensor<1024x", t)) for t in texts))
windows = []
for f in glob.glob(os.path.join({xla_dump!r}, "*after_optimizations.txt")):
    windows += re.findall(r"reduce-window\\(.*?window=\\{{size=([0-9x]+)", open(f).read())
print("LONG_WINDOWS", sum(1 for w in windows if math.prod(int(n) for n in w.split("x")) > 32))
"""


@pytest.mark.parametrize("platform", ["cpu", "tpu"])
def test_column_sums_keep_their_shape_on_the_cpu_plugin(platform, tmp_path):
    # A Linear's bias gradient and a LayerNorm's weight and bias gradients are
    # column sums of a [16, 64, C] gradient viewed as [1024, C]. XLA:CPU folded
    # the view back into the reduce and its tree reduction then added each
    # column's 16x32 window one element after another (3x slower); lowered for
    # the CPU plugin the view stays behind a barrier, so no window spans more
    # than 32 elements. Lowered as for a TPU there is no barrier. Both give
    # CPU's gradients in every mode.
    env = dict(
        os.environ,
        TORCH_TPU_LOWERING_PLATFORM=platform,
        TORCH_TPU_DUMP_HLO=str(tmp_path / "stablehlo"),
        TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"),
        XLA_FLAGS=f"--xla_dump_to={tmp_path / 'xla'} --xla_dump_hlo_as_text",
        PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH", "")]
        ),
    )
    script = _COLUMN_SUMS_SCRIPT.format(xla_dump=str(tmp_path / "xla"))
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    barriers = int(run.stdout.split("BARRIERS")[1].split()[0])
    long_windows = int(run.stdout.split("LONG_WINDOWS")[1].split()[0])
    if platform == "cpu":
        assert barriers > 0 and long_windows == 0, run.stdout
    else:
        assert barriers == 0, run.stdout
