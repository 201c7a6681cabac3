"""Every lowering in csrc/lower/elementwise.cpp against CPU PyTorch: forward
over shapes (broadcast, 0-d, empty) and dtypes, scalar operands, type
promotion, in-place and out= variants, and float backward."""

import math
import os
import subprocess
import sys

import pytest
import torch
from reference import TOLERANCES, assert_close, assert_outcome_like_cpu, check_op, in_mode, outcome_on_cpu, to_device

import torch_tpu

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPES = [(), (0,), (5,), (3, 4), (2, 1, 3)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (3,)), ((2, 1, 3), (4, 1))]
NUMERIC_DTYPES = [torch.float32, torch.bfloat16, torch.int64]
ALL_DTYPES = NUMERIC_DTYPES + [torch.bool]
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 3.0]


def make(shape, dtype, low=-4.0, high=4.0, nonzero=False):
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool) if nonzero else torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        x = torch.empty(shape).uniform_(low, high)
        if nonzero:
            x = torch.where(x.abs() < 0.25, torch.full_like(x, 0.75), x)
        return x.to(dtype)
    x = torch.randint(int(low), int(high) + 1, shape)
    if nonzero:
        x = torch.where(x == 0, torch.full_like(x, 3), x)
    return x.to(dtype)


def _compare(actual, expected, atol, rtol, what):
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), what
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, atol, rtol, f"{what}[{i}]")
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{what}: {actual} != {expected}"
        return
    assert isinstance(actual, torch.Tensor) and actual.device.type == "tpu", f"{what}: not a tpu tensor"
    d_atol, d_rtol = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(
        actual.cpu(),
        expected,
        equal_nan=True,
        atol=d_atol if atol is None else atol,
        rtol=d_rtol if rtol is None else rtol,
        msg=lambda m: f"{what}\n{m}",
    )


def same_as_cpu(fn, *inputs, atol=None, rtol=None):
    """fn on CPU inputs and on tpu copies: the same values, dtypes and shapes,
    the same inputs afterwards (in-place), or the same exception type."""
    cpu = [i.clone() if isinstance(i, torch.Tensor) else i for i in inputs]
    tpu = [to_device(i, "tpu") for i in inputs]
    try:
        expected = fn(*cpu)
    except Exception as e:  # noqa: BLE001 - the tpu must raise the same type
        expected_type = type(e)
        if isinstance(e, NotImplementedError) and "not implemented for '" in str(e):
            # A CPU kernel without an instance for the dtype. Lowerings cannot
            # raise NotImplementedError yet (see test_dtype_without_kernel_raises_not_implemented).
            expected_type = (NotImplementedError, RuntimeError)
        with pytest.raises(expected_type):
            fn(*tpu)
        return None
    actual = fn(*tpu)
    _compare(actual, expected, atol, rtol, "result")
    for i, (a, e) in enumerate(zip(tpu, cpu)):
        if isinstance(e, torch.Tensor):
            _compare(a, e, atol, rtol, f"input {i} afterwards")
    return actual


def inplace(method):
    return lambda x, *rest: getattr(x, method + "_")(*rest)


# ---- unary ---------------------------------------------------------------------------
# name -> (torch function, input range low, high)
UNARY = {
    "abs": (torch.abs, -4, 4),
    "neg": (torch.neg, -4, 4),
    "exp": (torch.exp, -4, 4),
    "expm1": (torch.expm1, -4, 4),
    "log": (torch.log, 0.1, 8),
    "log1p": (torch.log1p, -0.9, 8),
    "log2": (torch.log2, 0.1, 8),
    "sqrt": (torch.sqrt, 0.0, 8),
    "rsqrt": (torch.rsqrt, 0.1, 8),
    "sin": (torch.sin, -4, 4),
    "cos": (torch.cos, -4, 4),
    "tan": (torch.tan, -1.2, 1.2),
    "tanh": (torch.tanh, -4, 4),
    "sigmoid": (torch.sigmoid, -6, 6),
    "erf": (torch.erf, -3, 3),
    "reciprocal": (torch.reciprocal, 0.25, 4),
    "floor": (torch.floor, -4, 4),
    "ceil": (torch.ceil, -4, 4),
    "round": (torch.round, -4, 4),
    "trunc": (torch.trunc, -4, 4),
    "sign": (torch.sign, -4, 4),
    "relu": (torch.relu, -4, 4),
    "silu": (torch.nn.functional.silu, -6, 6),
    "gelu": (torch.nn.functional.gelu, -4, 4),
    "gelu_tanh": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), -4, 4),
}
DIFFERENTIABLE = [
    "abs",
    "neg",
    "exp",
    "expm1",
    "log",
    "log1p",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "reciprocal",
    "relu",
    "silu",
    "gelu",
    "gelu_tanh",
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_cpu(name, dtype, shape):
    fn, low, high = UNARY[name]
    same_as_cpu(fn, make(shape, dtype, low, high))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_on_transposed_input(name):
    fn, low, high = UNARY[name]
    same_as_cpu(lambda x: fn(x.t()), make((4, 3), torch.float32, low, high))


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_unary_backward_matches_cpu(name):
    fn, low, high = UNARY[name]
    x = make((3, 5), torch.float32, low, high)
    if name in ("abs", "relu"):  # no kinks at 0 in the sample
        x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.5), x)
    check_op(fn, x, grad=True, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(n for n in UNARY if not n.startswith("gelu") and n != "silu"))
def test_unary_in_place_and_out(name, dtype):
    fn, low, high = UNARY[name]
    method = name
    same_as_cpu(inplace(method), make((3, 4), dtype, low, high))
    same_as_cpu(lambda x: fn(x, out=torch.empty_like(x)), make((3, 4), dtype, low, high))
    # PyTorch computes in the input's dtype and casts into the out dtype; XLA
    # (xla_allow_excess_precision) may skip the bf16 rounding: bf16 tolerance.
    tol = TOLERANCES[torch.bfloat16] if dtype == torch.bfloat16 else (None, None)
    same_as_cpu(
        lambda x: fn(x, out=torch.empty(3, 4, dtype=torch.float32, device=x.device)),
        make((3, 4), dtype, low, high),
        atol=tol[0],
        rtol=tol[1],
    )


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_activation_in_place_and_out(name):
    f = getattr(torch.nn.functional, name)
    same_as_cpu(lambda x: f(x, inplace=True), make((3, 4), torch.float32))
    same_as_cpu(lambda x: f(x[:, ::2], inplace=True), make((3, 4), torch.float32))
    same_as_cpu(
        lambda x: (
            torch._C._nn.gelu(x, out=torch.empty_like(x))
            if name == "gelu"
            else torch._C._nn.silu(x, out=torch.empty_like(x))
        ),
        make((3, 4), torch.float32),
    )


@pytest.mark.parametrize(
    "name",
    [
        "floor",
        "ceil",
        "round",
        "trunc",
        "sign",
        "abs",
        "neg",
        "exp",
        "sqrt",
        "sigmoid",
        "relu",
        "reciprocal",
        "tanh",
        "log",
    ],
)
def test_unary_special_values(name):
    fn = UNARY[name][0]
    same_as_cpu(fn, torch.tensor(SPECIALS))
    same_as_cpu(fn, torch.tensor(SPECIALS, dtype=torch.bfloat16))


def test_round_half_to_even():
    same_as_cpu(torch.round, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.4999]))


def test_gelu_approximations_differ_and_match_cpu():
    x = torch.linspace(-5, 5, 41)
    a = same_as_cpu(lambda t: torch.nn.functional.gelu(t, approximate="none"), x)
    b = same_as_cpu(lambda t: torch.nn.functional.gelu(t, approximate="tanh"), x)
    assert not torch.equal(a.cpu(), b.cpu())
    same_as_cpu(lambda t: torch.nn.functional.gelu(t, approximate="tanh"), x.bfloat16())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_both_approximations(approximate):
    check_op(lambda t: torch.nn.functional.gelu(t, approximate=approximate), torch.linspace(-5, 5, 41), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_isnan_isinf(dtype):
    x = torch.tensor(SPECIALS).to(dtype) if dtype.is_floating_point else make((7,), dtype)
    same_as_cpu(torch.isnan, x)
    same_as_cpu(torch.isinf, x)
    same_as_cpu(torch.isfinite, x)


# ---- binary arithmetic ---------------------------------------------------------------
BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": torch.sub,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=-3),
    "rsub": torch.rsub,
    "mul": torch.mul,
    "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "pow": torch.pow,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}
# Integer division by zero raises on CPU; keep divisors non-zero.
NONZERO_RHS = {"div", "div_trunc", "div_floor", "remainder", "fmod"}


def binary_inputs(name, sa, sb, da, db):
    a = make(sa, da, 0.1 if name == "pow" else -6, 3 if name == "pow" else 6)
    b = make(sb, db, -3 if name != "pow" else 0, 3, nonzero=name in NONZERO_RHS)
    return a, b


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_matches_cpu(name, dtype, shapes):
    same_as_cpu(BINARY[name], *binary_inputs(name, *shapes, dtype, dtype))


PROMOTION_PAIRS = [
    (torch.int64, torch.float32),
    (torch.int32, torch.int64),
    (torch.bfloat16, torch.float32),
    (torch.bool, torch.int64),
    (torch.bool, torch.float32),
    (torch.int64, torch.bfloat16),
    (torch.uint8, torch.int8),
]


@pytest.mark.parametrize("dtypes", PROMOTION_PAIRS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_type_promotion_between_tensors(name, dtypes):
    da, db = dtypes
    same_as_cpu(BINARY[name], *binary_inputs(name, (3, 4), (4,), da, db))
    same_as_cpu(BINARY[name], *binary_inputs(name, (4,), (3, 4), db, da))


# A 0-dim tensor takes part in promotion only when its category is higher.
ZERO_DIM_CASES = [
    (torch.float32, torch.float64),  # same category: dimensioned tensor wins
    (torch.bfloat16, torch.float32),
    (torch.int64, torch.float32),  # higher category: 0-dim dtype wins
    (torch.int32, torch.int64),
    (torch.bool, torch.int64),
    (torch.uint8, torch.int64),
]


@pytest.mark.parametrize("dtypes", ZERO_DIM_CASES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_zero_dim_tensor_promotion(name, dtypes):
    dt, dz = dtypes
    a, b = binary_inputs(name, (3, 4), (), dt, dz)
    same_as_cpu(BINARY[name], a, b)
    same_as_cpu(BINARY[name], *binary_inputs(name, (), (3, 4), dz, dt))


SCALARS = [2.5, -3, True, 0, 1, -1, 0.0, 1e-3]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_python_scalar(name, dtype, scalar):
    fn = BINARY[name]
    if name in NONZERO_RHS and scalar in (0, 0.0, False) and not dtype.is_floating_point:
        return  # integer division by zero raises ZeroDivisionError on CPU; the tpu cannot trap
    # pow(bool tensor, True): the meta kernel says int64, CPU bool.
    if dtype == torch.bool and isinstance(scalar, bool) and name == "pow":
        return
    x = make((3, 4), dtype, 0.1 if name == "pow" else -6, 6)
    same_as_cpu(lambda t: fn(t, scalar), x)
    # remainder(Scalar, Tensor) has no table entry yet: test_remainder_scalar_self.
    if name not in ("logical_and", "logical_or", "logical_xor", "remainder"):
        y = make((3, 4), dtype, 0.1 if name == "pow" else -6, 6, nonzero=name in NONZERO_RHS)
        try:
            fn(scalar, torch.ones(1))
        except TypeError:
            return  # PyTorch has no Scalar-first overload
        except Exception:  # noqa: BLE001 - raises for this dtype: same_as_cpu checks the tpu raises too
            pass
        same_as_cpu(lambda t: fn(scalar, t), y)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_in_place(name, dtype):
    method = {"add_alpha": None, "sub_alpha": None, "div_trunc": None, "div_floor": None}.get(name, name)
    a, b = binary_inputs(name, (3, 4), (4,), dtype, dtype)
    if dtype == torch.bool and name in ("add", "add_alpha"):
        return  # test_bool_add_in_place
    if name.startswith("div_"):
        mode = name.split("_")[1]
        same_as_cpu(lambda x, y: x.div_(y, rounding_mode=mode), a, b)
        return
    if method is None:
        alpha = 2 if name == "add_alpha" else -3
        op = "add_" if name == "add_alpha" else "sub_"
        same_as_cpu(lambda x, y: getattr(x, op)(y, alpha=alpha), a, b)
        return
    if not hasattr(torch.Tensor, method + "_"):
        # maximum and minimum write into self through out=; rsub has neither form.
        if name != "rsub":
            same_as_cpu(lambda x, y: BINARY[name](x, y, out=x), a, b)
        return
    same_as_cpu(inplace(method), a, b)
    # In-place into a non-contiguous view of a bigger base.
    base = make((4, 6), dtype, 0.1 if name == "pow" else -6, 6)
    same_as_cpu(
        lambda x, y: getattr(x.t()[1:, :3], method + "_")(y),
        base,
        make((3,), dtype, 0 if name == "pow" else -3, 3, nonzero=name in NONZERO_RHS),
    )


@pytest.mark.parametrize("name", sorted(n for n in BINARY if n != "rsub"))
def test_binary_in_place_with_int_tensor_and_float_operand(name):
    # In-place results keep self's dtype; int self with a float result raises.
    a = make((3, 4), torch.int64, 1, 6)
    b = make((4,), torch.float32, 0.5, 3)
    same_as_cpu(lambda x, y: getattr(x, _method_of(name) + "_")(y), a, b)
    same_as_cpu(lambda x, y: getattr(x, _method_of(name) + "_")(y), b.clone().expand(3, 4).clone(), a)


def _method_of(name):
    return {"add_alpha": "add", "sub_alpha": "sub", "div_trunc": "div", "div_floor": "div"}.get(name, name)


@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_out(name, out_dtype):
    fn = BINARY[name]
    a, b = binary_inputs(name, (3, 4), (4,), torch.float32, torch.float32)

    def run(x, y):
        dtype = out_dtype or fn(x[:1], y[:1]).dtype
        out = torch.empty(3, 4, dtype=dtype, device=x.device)
        r = fn(x, y, out=out)
        return r, out, r is out

    same_as_cpu(run, a, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_out_into_non_contiguous_view(name):
    fn = BINARY[name]
    a, b = binary_inputs(name, (4, 3), (3,), torch.float32, torch.float32)

    def run(x, y):
        base = torch.zeros(3, 8, dtype=fn(x[:1], y[:1]).dtype, device=x.device)
        fn(x, y, out=base[:, ::2].t())
        return base

    same_as_cpu(run, a, b)


def test_out_of_wrong_shape_is_resized_like_cpu():
    def run(x, y):
        out = torch.empty(0, device=x.device)
        torch.add(x, y, out=out)
        return out

    same_as_cpu(run, make((3, 4), torch.float32), make((4,), torch.float32))


BINARY_DIFFERENTIABLE = [
    "add",
    "add_alpha",
    "sub",
    "sub_alpha",
    "rsub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "atan2",
    "pow",
    "fmod",
    "remainder",
]


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3), ())], ids=str)
@pytest.mark.parametrize("name", BINARY_DIFFERENTIABLE)
def test_binary_backward_matches_cpu(name, shapes):
    a, b = binary_inputs(name, *shapes, torch.float32, torch.float32)
    if name in ("maximum", "minimum"):
        b = b + 0.01  # no ties: the tie gradient splits
    check_op(BINARY[name], a, b, grad=True, atol=1e-5, rtol=1e-4)


# ---- division, remainder, pow semantics ---------------------------------------------------
SIGNED_PAIRS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, 5), (0, -5), (1, 7), (-1, 7), (5, 7), (-5, -7)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding_modes_with_negatives(mode, dtype):
    a = torch.tensor([p[0] for p in SIGNED_PAIRS], dtype=dtype)
    b = torch.tensor([p[1] for p in SIGNED_PAIRS], dtype=dtype)
    same_as_cpu(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    same_as_cpu(lambda x, y: torch.div(x, y, rounding_mode=mode), a * 3 + 1, b)
    same_as_cpu(lambda x: torch.div(x, -4, rounding_mode=mode), a)
    same_as_cpu(lambda x: torch.div(x, 2.5, rounding_mode=mode), a)


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_float_div_rounding_edge_cases(mode):
    # floor(1 / 0.1) is 9 in PyTorch (fmod-based), not floor(10.0)
    a = torch.tensor([1.0, -1.0, 1.0, 0.0, -0.0, 5.0, -5.0, float("inf"), float("nan"), 1e30, 7.0, -7.0, 0.3])
    b = torch.tensor([0.1, 0.1, -0.1, 3.0, 3.0, 0.0, 0.0, 2.0, 1.0, 1e-30, float("inf"), float("inf"), 0.1])
    same_as_cpu(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    same_as_cpu(lambda x, y: torch.div(x, y, rounding_mode=mode), a.bfloat16(), b.bfloat16())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_and_fmod_signs(op, dtype):
    a = torch.tensor([p[0] for p in SIGNED_PAIRS], dtype=dtype)
    b = torch.tensor([p[1] for p in SIGNED_PAIRS], dtype=dtype)
    fn = getattr(torch, op)
    same_as_cpu(fn, a, b)
    same_as_cpu(lambda x: fn(x, 3), a)
    same_as_cpu(lambda x: fn(x, -3), a)
    same_as_cpu(lambda x: fn(x, 2.5), a)
    same_as_cpu(lambda x: getattr(x, op + "_")(-3), a)


def test_remainder_scalar_self():
    same_as_cpu(lambda y: torch.remainder(-7, y), torch.tensor([2, -2, 3, -3]))


def test_float_remainder_special_values():
    a = torch.tensor([5.5, -5.5, float("inf"), 1.0, -0.0, 3.0])
    b = torch.tensor([0.0, 2.0, 2.0, float("inf"), 2.0, -float("inf")])
    same_as_cpu(torch.remainder, a, b)
    same_as_cpu(torch.fmod, a, b)


@pytest.mark.parametrize("exponent", [2, 3, 0, 1, -1, 0.5, -0.5, 2.5, -2, 1.0, 2.0], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_pow_scalar_exponent(dtype, exponent):
    x = make((3, 4), dtype, 1 if not dtype.is_floating_point else 0.1, 4)
    same_as_cpu(lambda t: torch.pow(t, exponent), x)
    same_as_cpu(lambda t: t.pow_(exponent), x)
    same_as_cpu(lambda t: torch.pow(t, exponent), -x)


def test_pow_scalar_exponent_backward():
    for e in [2, 3, 0.5, -1, 2.5, 0]:
        check_op(lambda t: torch.pow(t, e), make((3, 4), torch.float32, 0.1, 4), grad=True, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_pow_tensor_exponent(dtype):
    base = torch.tensor([2, -2, 3, -3, 0, 1, -1, 5], dtype=dtype)
    exp = torch.tensor([3, 3, 0, 2, 2, -1, -3, 1], dtype=dtype)
    same_as_cpu(torch.pow, base, exp)
    same_as_cpu(lambda e: torch.pow(2, e), exp)
    same_as_cpu(lambda e: torch.pow(2.5, e), exp)
    same_as_cpu(lambda e: torch.pow(-1, e), exp)


def test_pow_float_negative_base_fractional_exponent_is_nan():
    same_as_cpu(torch.pow, torch.tensor([-2.0, -0.5, 0.0, 0.0]), torch.tensor([0.5, 1.5, -1.0, 0.0]))


def test_pow_tensor_exponent_backward():
    check_op(torch.pow, make((3, 4), torch.float32, 0.5, 3), make((3, 4), torch.float32, -2, 2), grad=True, rtol=1e-4)


# ---- NaN propagation -----------------------------------------------------------------------
NAN_A = torch.tensor([float("nan"), 1.0, float("nan"), -0.0, 0.0, float("inf")])
NAN_B = torch.tensor([1.0, float("nan"), float("nan"), 0.0, -0.0, float("nan")])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "op", ["maximum", "minimum", "fmod", "remainder", "atan2", "pow", "add", "eq", "ne", "lt", "ge"]
)
def test_nan_handling_in_binary_ops(op, dtype):
    same_as_cpu(getattr(torch, op), NAN_A.to(dtype), NAN_B.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_clamp_propagates_nan(dtype):
    x = torch.tensor([float("nan"), -3.0, 0.5, 3.0, float("inf"), -float("inf")], dtype=dtype)
    same_as_cpu(lambda t: torch.clamp(t, -1, 1), x)
    same_as_cpu(lambda t: torch.clamp(t, min=float("nan")), x)
    same_as_cpu(lambda t: torch.clamp(t, max=float("nan")), x)
    lo = torch.tensor([float("nan"), -1.0, -1.0, -1.0, 0.0, 0.0], dtype=dtype)
    hi = torch.tensor([1.0, float("nan"), 1.0, 1.0, 1.0, 1.0], dtype=dtype)
    same_as_cpu(torch.clamp, x, lo, hi)
    same_as_cpu(torch.clamp_min, x, lo)
    same_as_cpu(torch.clamp_max, x, hi)


# ---- where, masked_fill, clamp --------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_where_tensor_and_scalar_branches(dtype):
    cond = torch.rand(3, 4) > 0.5
    a, b = make((3, 4), dtype), make((4,), dtype)
    same_as_cpu(torch.where, cond, a, b)
    same_as_cpu(torch.where, cond[:, :1], a, b)
    same_as_cpu(lambda c, x: torch.where(c, x, 2), cond, a)
    same_as_cpu(lambda c, x: torch.where(c, 1.5, x), cond, a)
    same_as_cpu(lambda c: torch.where(c, 1.5, 0), cond)
    same_as_cpu(lambda c, x: torch.where(c, x, torch.tensor(7)), cond, a)
    same_as_cpu(lambda c, x: torch.where(c, x, torch.tensor(0.25)), cond, a)


def test_where_non_bool_condition_raises_like_cpu():
    same_as_cpu(torch.where, torch.tensor([1, 0, 2]), torch.ones(3), torch.zeros(3))


def test_where_promotes_mixed_dtypes_and_out():
    cond = torch.tensor([True, False, True])
    same_as_cpu(torch.where, cond, torch.tensor([1, 2, 3]), torch.tensor([0.5, 1.5, 2.5]))
    same_as_cpu(torch.where, cond, torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([4, 5, 6]))
    same_as_cpu(
        lambda c, a, b: torch.where(c, a, b, out=torch.empty(3, device=a.device)), cond, torch.ones(3), torch.zeros(3)
    )


def test_where_backward():
    cond = torch.rand(3, 4) > 0.5
    check_op(
        lambda a, b: torch.where(cond.to(a.device), a, b),
        make((3, 4), torch.float32),
        make((4,), torch.float32),
        grad=True,
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_masked_fill_scalar_and_tensor_values(dtype):
    x = make((3, 4), dtype)
    m = torch.rand(3, 4) > 0.5
    same_as_cpu(lambda t, k: t.masked_fill(k, 0), x, m)
    same_as_cpu(lambda t, k: t.masked_fill(k, True), x, m)
    same_as_cpu(lambda t, k: t.masked_fill(k, 2.75), x, m)
    same_as_cpu(lambda t, k: t.masked_fill(k, -5), x, m[0])  # broadcast mask
    same_as_cpu(lambda t, k, v: t.masked_fill(k, v), x, m, torch.tensor(3))
    same_as_cpu(lambda t, k, v: t.masked_fill(k, v), x, m, torch.tensor(-1.5))
    same_as_cpu(lambda t, k: t.masked_fill_(k, 9), x, m)
    same_as_cpu(lambda t, k: t.t().masked_fill_(k.t(), 9), x, m)


def test_masked_fill_with_non_bool_mask_or_dim_value_raises_like_cpu():
    x = torch.randn(3, 4)
    same_as_cpu(lambda t, k: t.masked_fill(k, 0), x, torch.ones(3, 4, dtype=torch.int64))
    same_as_cpu(lambda t, k, v: t.masked_fill(k, v), x, torch.ones(3, 4, dtype=torch.bool), torch.ones(2))


def test_masked_fill_with_a_cpu_scalar_value_as_cuda_accepts():
    # SEW-D fills a device tensor with torch.tensor(torch.finfo(dtype).min), a CPU scalar: CUDA accepts it.
    x, m = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    value = torch.tensor(torch.finfo(torch.float32).min)
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            got = x.to("tpu").masked_fill(m.to("tpu"), value)
        assert_close(got, x.masked_fill(m, value))
    compiled = torch.compile(lambda t, k: t.masked_fill(k, torch.tensor(-3.0)), backend="tpu")
    assert_close(compiled(x.to("tpu"), m.to("tpu")), x.masked_fill(m, -3.0))


FILLS = {
    "masked_fill": lambda t, k, v: t.masked_fill(k, v),
    "masked_fill_": lambda t, k, v: t.masked_fill_(k, v),
    "index_put": lambda t, k, v: t.__setitem__(k, v) or t,
}


@pytest.mark.parametrize("fill", list(FILLS), ids=str)
@pytest.mark.parametrize("value_on", ["cpu", "tpu"])
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_value_tensor_that_does_not_fit_self_raises_as_cpu_reads_it(fill, value_on, mode):
    # CPU and CUDA call value.item() and convert the number checked: 1e6 or
    # NaN into uint8 raise, where a cast on the device made them 255 and 0.
    # Each call twice, so the second replays the first's program.
    cases = [
        (torch.uint8, torch.tensor(1e6)),
        (torch.uint8, torch.tensor(float("nan"))),
        (torch.int8, torch.tensor(300)),
        (torch.float16, torch.tensor(1e6)),
        (torch.float16, torch.tensor(70000)),
        (torch.int32, torch.tensor(1e300, dtype=torch.float64)),
        (torch.uint8, torch.tensor(7.9)),  # fits: truncated
        (torch.uint8, torch.tensor(-1)),  # fits: wraps, as a number into uint8 does
        (torch.float16, torch.tensor(float("inf"))),  # fits
        (torch.float32, torch.tensor(2.5, dtype=torch.float64)),  # fits
    ]
    fn = FILLS[fill]
    for dtype, value in cases:
        x, m = torch.arange(4).to(dtype), torch.tensor([True, False, True, False])
        expected = outcome_on_cpu(lambda: fn(x.clone(), m, value))
        for _ in range(2):
            run = in_mode(mode, lambda: fn(x.to("tpu"), m.to("tpu"), value.to(value_on)).cpu())
            assert_outcome_like_cpu(
                run, expected, lambda got, want: torch.testing.assert_close(got, want, equal_nan=True)
            )


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_complex_or_overflowing_number_converts_into_self_as_cpus_kernel_converts_it(mode):
    # CPU and CUDA convert the value checked (Scalar::to): a complex number
    # with no imaginary part fits a real dtype, any fits bool (true where
    # not zero), inf does not fit an integer (RuntimeError). PyTorch's meta
    # kernel refused every complex value and raised OverflowError for inf.
    cases = [
        (torch.bool, 1 + 2j),
        (torch.bool, 0j),
        (torch.bool, torch.tensor(0 + 2j)),
        (torch.int32, 2 + 0j),
        (torch.int32, torch.tensor(3 + 0j)),
        (torch.float32, -1.5 + 0j),
        (torch.float16, torch.tensor(0.25 + 0j, dtype=torch.complex128)),
        (torch.int32, 1 + 2j),  # raises: an imaginary part
        (torch.float32, torch.tensor(1j)),
        (torch.int32, float("inf")),
        (torch.uint8, float("nan")),
        (torch.int64, 1e300),
        (torch.float32, float("inf")),  # fits
    ]
    for dtype, value in cases:
        x, m = torch.arange(4).to(dtype), torch.tensor([True, False, True, False])
        expected = outcome_on_cpu(lambda: x.clone().masked_fill(m, value))
        for _ in range(2):  # the second replays the first's program
            run = in_mode(mode, lambda: x.to("tpu").masked_fill_(m.to("tpu"), value).cpu())
            assert_outcome_like_cpu(run, expected, torch.testing.assert_close)


def test_a_value_tensor_of_selfs_dtype_is_not_read():
    # Only a value whose dtype may not fit is read (a synchronization on
    # CUDA, a flush of DeferAndFuse here): one of self's dtype never is.
    x, m = torch.randn(64, device="tpu"), torch.rand(64, device="tpu") > 0.5
    value = torch.tensor(-2.5, device="tpu")
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            x.masked_fill(m, value)  # compiled, and for Strict remembered, outside the count
            before = torch_tpu.metrics()["bytes_to_host"]
            for _ in range(3):
                y = x.masked_fill(m, value)
                x[m] = value
            assert torch_tpu.metrics()["bytes_to_host"] == before
    assert_close(y, torch.where(m, value, x).cpu())


def test_masked_fill_backward():
    m = torch.rand(3, 4) > 0.5
    check_op(lambda t: t.masked_fill(m.to(t.device), 0.5) * t, make((3, 4), torch.float32), grad=True)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=str)
def test_clamp_scalar_and_tensor_bounds(dtype):
    x = make((3, 4), dtype, -6, 6)
    lo, hi = make((4,), dtype, -3, 0), make((3, 1), dtype, 0, 3)
    same_as_cpu(lambda t: torch.clamp(t, -2, 3), x)
    same_as_cpu(lambda t: torch.clamp(t, min=-1), x)
    same_as_cpu(lambda t: torch.clamp(t, max=1), x)
    same_as_cpu(lambda t: torch.clamp(t, -1.5, 2.5), x)  # float bounds promote ints
    same_as_cpu(lambda t: torch.clamp(t, 3, -3), x)  # min > max gives max
    same_as_cpu(torch.clamp, x, lo, hi)
    same_as_cpu(lambda t, a: torch.clamp(t, min=a), x, lo)
    same_as_cpu(lambda t, b: torch.clamp(t, max=b), x, hi)
    same_as_cpu(torch.clamp_min, x, lo)
    same_as_cpu(torch.clamp_max, x, hi)
    same_as_cpu(lambda t: torch.clamp_min(t, 0.5), x)
    same_as_cpu(lambda t: torch.clamp_max(t, -2), x)
    same_as_cpu(lambda t: t.clamp_(-1, 1), x)
    same_as_cpu(lambda t, a, b: t.clamp_(a, b), x, lo, hi)
    same_as_cpu(lambda t: t.clamp_min_(0), x)
    same_as_cpu(lambda t: t.clamp_max_(0), x)
    same_as_cpu(lambda t: torch.clamp(t, -1, 1, out=torch.empty_like(t)), x)
    same_as_cpu(lambda t, a, b: torch.clamp(t, a, b, out=torch.empty_like(t)), x, lo, hi)
    same_as_cpu(lambda t, a, b: torch.clamp(t, a.double(), b), x, lo.float(), hi)


def test_clamp_without_bounds_raises_like_cpu():
    same_as_cpu(lambda t: torch.clamp(t), torch.randn(3))


def test_clamp_backward():
    x = make((3, 4), torch.float32, -3, 3)
    check_op(lambda t: torch.clamp(t, -1, 1), x, grad=True)
    check_op(torch.clamp, x, make((4,), torch.float32, -2, 0), make((3, 1), torch.float32, 0, 2), grad=True)
    check_op(lambda t: torch.clamp_min(t, 0.5), x, grad=True)


# ---- ternary --------------------------------------------------------------------------
@pytest.mark.parametrize("value", [1, 0.5, -2], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(op, dtype, value):
    fn = getattr(torch, op)
    s, a, b = make((3, 4), dtype), make((4,), dtype), make((3, 1), dtype, nonzero=True)
    same_as_cpu(lambda x, y, z: fn(x, y, z, value=value), s, a, b)
    if dtype.is_floating_point or isinstance(value, int):  # CPU's in-place int check: not in the meta kernel
        same_as_cpu(lambda x, y, z: getattr(x, op + "_")(y, z, value=value), s, a, b)
    same_as_cpu(lambda x, y, z: fn(x, y, z, value=value, out=torch.empty_like(x)), s, a, b)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_backward(op):
    fn = getattr(torch, op)
    check_op(
        lambda x, y, z: fn(x, y, z, value=0.5),
        make((3, 4), torch.float32),
        make((4,), torch.float32),
        make((3, 1), torch.float32, nonzero=True),
        grad=True,
        rtol=1e-4,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_lerp_scalar_and_tensor_weight(dtype):
    s, e = make((3, 4), dtype), make((4,), dtype)
    w = torch.tensor([0.0, 0.25, 0.5, 0.75]).to(dtype)
    for weight in [0.0, 0.3, 0.5, 0.9, 1.0, -0.5, 1.5]:
        same_as_cpu(lambda x, y: torch.lerp(x, y, weight), s, e)
    same_as_cpu(torch.lerp, s, e, w)
    same_as_cpu(torch.lerp, s, e, torch.tensor(0.8).to(dtype))
    same_as_cpu(lambda x, y, z: x.lerp_(y, z), s, e, w)
    same_as_cpu(lambda x, y: torch.lerp(x, y, 0.7, out=torch.empty_like(x)), s, e)


def test_lerp_near_one_matches_cpu_exactly():
    # PyTorch evaluates weight >= 0.5 from the end: end - (end - start) * (1 - weight)
    s = torch.tensor([1e-3, 123.456, -7.0, 3.0])
    e = torch.tensor([1e3, -0.001, 7.0, 3.0])
    same_as_cpu(lambda x, y: torch.lerp(x, y, 0.9999), s, e, atol=0, rtol=0)
    same_as_cpu(lambda x, y: torch.lerp(x, y, 1.0), s, e, atol=0, rtol=0)


def test_lerp_backward():
    check_op(
        torch.lerp, make((3, 4), torch.float32), make((4,), torch.float32), make((3, 4), torch.float32, 0, 1), grad=True
    )
    check_op(lambda x, y: torch.lerp(x, y, 0.3), make((3, 4), torch.float32), make((3, 4), torch.float32), grad=True)


# ---- logic -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_logical_not_and_bitwise_not(dtype):
    x = make((3, 4), dtype)
    same_as_cpu(torch.logical_not, x)
    same_as_cpu(torch.bitwise_not, x)
    same_as_cpu(lambda t: t.logical_not_(), x)
    same_as_cpu(lambda t: t.bitwise_not_(), x)
    same_as_cpu(lambda t: torch.logical_not(t, out=torch.empty(3, 4, device=t.device)), x)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary_out_and_in_place(op, dtype):
    a, b = make((3, 4), dtype), make((4,), torch.float32)
    same_as_cpu(lambda x, y: getattr(x, op + "_")(y), a, b)
    same_as_cpu(lambda x, y: getattr(torch, op)(x, y, out=torch.empty(3, 4, dtype=dtype, device=x.device)), a, b)


# ---- fill and zero ----------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, 1, -7, 2.5, True, float("nan"), float("inf")], ids=repr)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fill_scalar(dtype, value):
    same_as_cpu(lambda t: t.fill_(value), make((3, 4), dtype))
    same_as_cpu(lambda t: t[:, 1::2].fill_(value), make((3, 4), dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fill_tensor_and_zero(dtype):
    same_as_cpu(lambda t, v: t.fill_(v), make((3, 4), dtype), torch.tensor(3.5))
    same_as_cpu(lambda t, v: t.fill_(v), make((3, 4), dtype), torch.tensor(-2))
    same_as_cpu(lambda t: t.fill_(torch.tensor(1.25, device=t.device)), make((3, 4), dtype))
    same_as_cpu(lambda t: t.zero_(), make((3, 4), dtype))
    same_as_cpu(lambda t: t.t()[1:].zero_(), make((3, 4), dtype))
    same_as_cpu(lambda t: t.zero_(), make((), dtype))
    same_as_cpu(lambda t: t.zero_(), make((0, 2), dtype))


def test_fill_with_non_scalar_tensor_raises_like_cpu():
    same_as_cpu(lambda t, v: t.fill_(v), torch.zeros(3), torch.ones(2))


# ---- backward lowerings called directly --------------------------------------------------
def test_backward_lowerings_called_directly():
    g, x = make((3, 4), torch.float32), make((3, 4), torch.float32)
    y = torch.sigmoid(x)
    same_as_cpu(torch.ops.aten.sigmoid_backward, g, y)
    same_as_cpu(torch.ops.aten.tanh_backward, g, torch.tanh(x))
    same_as_cpu(torch.ops.aten.silu_backward, g, x)
    same_as_cpu(torch.ops.aten.threshold_backward, g, x, 0.5)
    same_as_cpu(lambda a, b: torch.ops.aten.threshold_backward(a, b, 0), g, x)
    same_as_cpu(lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate="tanh"), g, x)
    same_as_cpu(torch.ops.aten.gelu_backward, g, x)
    same_as_cpu(torch.ops.aten.gelu_backward, g.bfloat16(), x.bfloat16())
    same_as_cpu(torch.ops.aten.silu_backward, g.bfloat16(), x.bfloat16())


def test_relu_grad_at_zero_is_zero_like_cpu():
    check_op(torch.relu, torch.tensor([-1.0, 0.0, 1.0, 0.0]), grad=True)


def test_integer_overflow_wraps_like_cpu():
    big = torch.tensor([2**62, -(2**62), 2**63 - 1])
    same_as_cpu(lambda t: t * 2, big)
    same_as_cpu(lambda t: t + 1, big)
    same_as_cpu(lambda t: t.to(torch.int32) + 2**31 - 1, torch.tensor([1, -1, 0]))


def test_large_integer_scalar_keeps_precision():
    same_as_cpu(lambda t: t + (2**53 + 1), torch.tensor([0, 1, 2]))
    same_as_cpu(lambda t: t == (2**53 + 1), torch.tensor([2**53, 2**53 + 1]))


def test_pi_scalar_is_not_rounded_through_bfloat16_early():
    same_as_cpu(lambda t: t * math.pi, torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16))
    same_as_cpu(lambda t: t * math.pi, torch.tensor([1, 2, 3]))


def test_floor_divide_matches_cpu():
    a = torch.tensor([p[0] for p in SIGNED_PAIRS])
    b = torch.tensor([p[1] for p in SIGNED_PAIRS])
    same_as_cpu(torch.floor_divide, a, b)
    same_as_cpu(torch.floor_divide, a.float(), b.float())


def test_dtype_without_kernel_raises_not_implemented():
    with pytest.raises(NotImplementedError):
        torch.bitwise_and(torch.ones(3, device="tpu"), torch.ones(3, device="tpu"))


def test_bool_add_in_place():
    same_as_cpu(lambda x, y: x.add_(y), torch.tensor([True, False, False]), torch.tensor([True, True, False]))


def test_int_addcmul_in_place_with_float_value_matches_cpu():
    # `value` is a multiplier, not an operand: it does not promote, and CPU
    # casts it to the tensor's dtype (0.5 -> 0).
    same_as_cpu(lambda x: x.addcmul_(x, x, value=0.5), torch.tensor([1, 2, 3]))
    same_as_cpu(lambda x: x.addcmul_(x, x, value=2), torch.tensor([1, 2, 3]))


@pytest.mark.parametrize("case", ["mul_python_float", "add_python_int", "abs", "mul_float_tensor", "sub_complex"])
def test_complex64_arithmetic_promotes_like_cpu(case):
    z = torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0.25j], dtype=torch.complex64)
    f = {
        "mul_python_float": lambda t: t * 2.5,
        "add_python_int": lambda t: t + 1,
        "abs": lambda t: t.abs(),
        "mul_float_tensor": lambda t: t * torch.tensor([1.0, 2.0, -3.0], device=t.device),
        "sub_complex": lambda t: t - t.flip(0),
    }[case]
    got, want = f(z.tpu()).cpu(), f(z)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "case", ["real_times_1j", "complex_plus_complex_number", "alpha_complex", "mul_scalar_overload"]
)
def test_python_complex_numbers_with_tpu_tensors_match_cpu(case):
    x = torch.tensor([1.0, -2.0, 0.5])
    z = torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0.25j], dtype=torch.complex64)
    f = {
        "real_times_1j": lambda x, z: x * 1j,
        "complex_plus_complex_number": lambda x, z: z + (2 - 1.5j),
        "alpha_complex": lambda x, z: torch.add(z, z.flip(0), alpha=0.5j),
        "mul_scalar_overload": lambda x, z: torch.ops.aten.mul.Scalar(z, 3 + 1j),
    }[case]
    got, want = f(x.tpu(), z.tpu()).cpu(), f(x, z)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


# addcmul and addcdiv on CPU and CUDA: self + value * tensor1 (* or /)
# tensor2, value * tensor1 first (tensor1 * tensor2 first rounds
# differently: one float32 ulp off in 7-40% of elements). Adam and RMSprop
# update every parameter through these two.
ADDC_VALUES = (0.1, 0.3, -1.7)


def _addc(name):
    op = getattr(torch, name)
    if not name.startswith("_foreach"):
        return lambda x, a, b, value: op(x, a, b, value=value)
    return lambda x, a, b, value: torch.stack(op(list(x.unbind()), list(a.unbind()), list(b.unbind()), value=value))


def _addc_inputs(dtype):
    torch.manual_seed(0)
    x, a = torch.randn(2, 8192).to(dtype), torch.randn(2, 8192).to(dtype)
    return x, a, (torch.rand(2, 8192) + 0.5).to(dtype)


# Eager only: tracing for torch.compile decomposes addcdiv into div, mul and
# add in torch._refs' order, value * (tensor1 / tensor2), the graph Inductor
# computes on CPU and CUDA too.
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["addcdiv", "_foreach_addcdiv"])
def test_addcdiv_scales_tensor1_first_as_cpu(name, dtype, mode):
    fn, (x, a, b) = _addc(name), _addc_inputs(dtype)
    for value in ADDC_VALUES:
        actual = in_mode(mode, lambda x, a, b, value=value: fn(x, a, b, value))(x.tpu(), a.tpu(), b.tpu()).cpu()
        torch.testing.assert_close(actual, fn(x, a, b, value), atol=0, rtol=0)


# addcmul's last step is a fused multiply-add on CPU (its vectorized loop,
# and the compiler's contraction of the scalar one) and on CUDA (nvcc
# contracts): fma(value * tensor1, tensor2, self). XLA:CPU contracts the
# lowering's multiply and add the same way at its default optimization
# level, which the suite turns off for compile speed (tests/conftest.py):
# so this runs in a process at the plugin's default.
_ADDCMUL_AT_DEFAULT_LEVEL = """
import torch, torch_tpu
from reference import in_mode
from ops.test_elementwise import ADDC_VALUES, _addc, _addc_inputs
for name in ("addcmul", "_foreach_addcmul"):
    fn = _addc(name)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, a, b = _addc_inputs(dtype)
        for mode in ("strict", "defer_and_fuse", "compiled"):
            for value in ADDC_VALUES:
                actual = in_mode(mode, lambda x, a, b, value=value: fn(x, a, b, value))(x.tpu(), a.tpu(), b.tpu())
                differ = int((actual.cpu() != fn(x, a, b, value)).sum())
                assert differ == 0, (name, dtype, mode, value, differ)
print("ok")
"""


def test_addcmul_is_cpus_fused_multiply_add_at_the_plugins_default_level():
    env = dict(os.environ, XLA_FLAGS="--xla_backend_optimization_level=2", PYTHONPATH=TESTS_DIR)
    r = subprocess.run(
        [sys.executable, "-c", _ADDCMUL_AT_DEFAULT_LEVEL], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# A Python number against a float16/bfloat16 tensor: TensorIterator casts it
# to the tensor's dtype before the kernel computes in float32 (add, sub,
# remainder, fmod, atan2, pow), except where the kernel reads the number
# unrounded (mul, true div). One ulp apart would be a different answer.
HALF_SCALAR_OPS = {
    "add": lambda x, s: x + s,
    "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x,
    "add_alpha": lambda x, s: torch.add(x, s, alpha=3),
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "remainder": lambda x, s: x % s,
    "fmod": lambda x, s: torch.fmod(x, s),
    "pow": lambda x, s: x.abs() ** s,
    "atan2_0d": lambda x, s: torch.atan2(x, torch.tensor(s)),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", HALF_SCALAR_OPS)
def test_python_number_against_a_half_tensor_rounds_as_cpu(name, dtype, mode):
    fn = HALF_SCALAR_OPS[name]
    torch.manual_seed(0)
    x = (torch.randn(4096) * 3).to(dtype)
    for s in (0.1, 0.3, 1.7, -2.2):
        expected = fn(x, s)
        actual = in_mode(mode, lambda t, s=s: fn(t, s))(x.to("tpu")).cpu()
        if name == "atan2_0d":  # XLA's atan2 is within one float32 ulp of libm's, before the rounding
            torch.testing.assert_close(actual, expected, atol=0, rtol=2**-8)
        else:
            torch.testing.assert_close(actual, expected, atol=0, rtol=0, equal_nan=True)
