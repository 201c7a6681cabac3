"""Bad input raises, at the call, the exception type PyTorch raises on CUDA
(and CPU) for the same mistake. Nothing aborts the process."""

import pytest
import torch

import torch_tpu


def raises_like_cpu(fn_cpu, fn_tpu):
    """Runs the CPU version, captures its exception type, expects the same on tpu."""
    with pytest.raises(Exception) as cpu_err:
        fn_cpu()
    with pytest.raises(cpu_err.type) as tpu_err:
        fn_tpu()
    return tpu_err


def test_device_index_beyond_device_count():
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2, device=f"tpu:{n}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2).to(f"tpu:{n + 3}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.tpu.set_device(n)


def test_mixing_cpu_and_tpu_tensors_in_one_op():
    a = torch.ones(3, device="tpu")
    b = torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 2, device="tpu"), torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="same device"):
        torch.where(torch.ones(3, dtype=torch.bool), a, a)


def test_cpu_zero_dim_tensor_acts_as_a_scalar_as_on_cuda():
    a = torch.ones(3, device="tpu")
    torch.testing.assert_close((a * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))


def test_matmul_shape_mismatch():
    a, b = torch.ones(2, 3), torch.ones(4, 5)
    raises_like_cpu(lambda: torch.mm(a, b), lambda: torch.mm(a.tpu(), b.tpu()))
    raises_like_cpu(lambda: a @ b, lambda: a.tpu() @ b.tpu())
    x, y = torch.ones(2, 3, 4), torch.ones(2, 5, 6)
    raises_like_cpu(lambda: torch.bmm(x, y), lambda: torch.bmm(x.tpu(), y.tpu()))


MATRIX_PRODUCT_MISTAKES = {
    "mm shapes": lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(4, 5, device=d)),
    "mm self 1-D": lambda d: torch.mm(torch.ones(3, device=d), torch.ones(3, 4, device=d)),
    "mm mat2 1-D": lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(3, device=d)),
    "matmul 3-D by 2-D": lambda d: torch.ones(7, 2, 3, device=d) @ torch.ones(4, 5, device=d),
    "linear": lambda d: torch.nn.functional.linear(
        torch.ones(2, 3, device=d), torch.ones(5, 4, device=d), torch.ones(5, device=d)
    ),
    "addmm shapes": lambda d: torch.addmm(
        torch.ones(2, 5, device=d), torch.ones(2, 3, device=d), torch.ones(4, 5, device=d)
    ),
    "addmm mat1 1-D": lambda d: torch.addmm(
        torch.ones(2, 5, device=d), torch.ones(3, device=d), torch.ones(3, 5, device=d)
    ),
    "addmm dtypes": lambda d: torch.addmm(
        torch.ones(2, 5, device=d), torch.ones(2, 3, device=d), torch.ones(3, 5, device=d, dtype=torch.float64)
    ),
    "mv shapes": lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(4, device=d)),
    "mv vec 2-D": lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(3, 1, device=d)),
    "addmv shapes": lambda d: torch.addmv(torch.ones(2, device=d), torch.ones(2, 3, device=d), torch.ones(4, device=d)),
    "dot sizes": lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)),
    "dot dtypes": lambda d: torch.dot(torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
    "vdot 2-D": lambda d: torch.vdot(torch.ones(2, 3, device=d), torch.ones(2, 3, device=d)),
}


@pytest.mark.parametrize("mistake", sorted(MATRIX_PRODUCT_MISTAKES))
def test_matrix_product_mistakes_raise_atens_own_message(mistake):
    # The checks ATen's structured meta functions make on CPU and CUDA alike,
    # word for word (PyTorch's Python meta kernels word them differently).
    fn = MATRIX_PRODUCT_MISTAKES[mistake]
    with pytest.raises(RuntimeError) as cpu_err:
        fn("cpu")
    with pytest.raises(RuntimeError) as tpu_err:
        fn("tpu")
    assert str(tpu_err.value) == str(cpu_err.value)


def test_mm_of_two_dtypes_raises_as_on_cuda():
    # CPU and CUDA check this in their kernels, worded differently; CUDA's
    # words. The tpu once multiplied silently.
    a, b = torch.ones(2, 3, device="tpu"), torch.ones(3, 5, device="tpu", dtype=torch.float64)
    with pytest.raises(
        RuntimeError, match=r"^expected mat1 and mat2 to have the same dtype, but got: float != double$"
    ):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="expected mat1 and mat2 to have the same dtype"):
        a @ b
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        torch.nn.functional.linear(a, b.t(), torch.ones(3, device="tpu", dtype=torch.float64))


def test_broadcasting_mismatch():
    a, b = torch.ones(2, 3), torch.ones(4, 3)
    raises_like_cpu(lambda: a + b, lambda: a.tpu() + b.tpu())
    raises_like_cpu(lambda: a.add_(torch.ones(2, 1, 3)), lambda: a.tpu().add_(torch.ones(2, 1, 3).tpu()))


def test_wrong_dtype_for_index_tensor():
    x = torch.arange(10.0)
    fidx = torch.tensor([0.0, 1.0])
    raises_like_cpu(lambda: x[fidx], lambda: x.tpu()[fidx.tpu()])
    raises_like_cpu(lambda: torch.index_select(x, 0, fidx), lambda: torch.index_select(x.tpu(), 0, fidx.tpu()))
    raises_like_cpu(lambda: torch.gather(x, 0, fidx), lambda: torch.gather(x.tpu(), 0, fidx.tpu()))


def test_in_place_result_type_that_cannot_be_cast():
    i = torch.ones(3, dtype=torch.int64)
    raises_like_cpu(lambda: i.add_(1.5), lambda: i.tpu().add_(1.5))
    raises_like_cpu(lambda: i.mul_(torch.ones(3)), lambda: i.tpu().mul_(torch.ones(3).tpu()))


def test_in_place_on_expanded_tensor():
    base = torch.ones(1, 3)
    raises_like_cpu(lambda: base.expand(4, 3).add_(1), lambda: base.tpu().expand(4, 3).add_(1))


def test_unsupported_dtype_is_a_type_error():
    # complex32: XLA has no complex type of two float16s.
    with pytest.raises(TypeError, match="tpu does not support dtype ComplexHalf"):
        torch.ones(2, dtype=torch.complex32, device="tpu")


def test_view_with_incompatible_shape():
    x = torch.ones(2, 3)
    raises_like_cpu(lambda: x.view(4), lambda: x.tpu().view(4))
    raises_like_cpu(lambda: x.t().view(6), lambda: x.tpu().t().view(6))


def test_item_on_multi_element_tensor():
    x = torch.ones(3)
    raises_like_cpu(lambda: x.item(), lambda: x.tpu().item())


def test_process_survives_all_of_the_above():
    assert torch.ones(1, device="tpu").item() == 1.0


def test_lazy_conjugate_views_are_resolved_by_copies_not_recursed_forever():
    # Regression: hfft's conj() view made _copy_from recurse until the stack
    # overflowed (a segfault). Run in a subprocess so a regression cannot
    # take the test session down with it. Copies now resolve the conjugate
    # bit, so hfft computes CPU's answer.
    import subprocess
    import sys

    code = (
        "import torch, torch_tpu\n"
        "torch_tpu.cpu_fallback(False)\n"
        "x = torch.randn(5, 6, 7)\n"
        "got = torch.fft.hfft(x.tpu(), n=10, dim=1).cpu()\n"
        "torch.testing.assert_close(got, torch.fft.hfft(x, n=10, dim=1), rtol=1e-4, atol=1e-4)\n"
        "print('matches')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "matches" in r.stdout


def _ones(*sizes, device, dtype=torch.float32):
    return torch.ones(*sizes, device=device, dtype=dtype)


# Mistakes the tpu once accepted silently (or fed to the compiler), or
# worded differently: each raises what CPU raises, word for word.
def _copy_shifted_by_one(x):
    x[1:].copy_(x[:-1])


SILENT_ONCE = {
    # alpha_check (native/BinaryOps.h): PyTorch's Python meta kernels of the
    # in-place overloads skip it; add_ of integers with alpha=1.5 once computed.
    "add_ float alpha of integers": (
        RuntimeError,
        lambda d: _ones(3, device=d, dtype=torch.int64).add_(_ones(3, device=d, dtype=torch.int64), alpha=1.5),
    ),
    "sub_ float alpha of integers": (
        RuntimeError,
        lambda d: _ones(3, device=d, dtype=torch.int64).sub_(2, alpha=1.5),
    ),
    "rsub float alpha of integers": (
        RuntimeError,
        lambda d: torch.rsub(_ones(3, device=d, dtype=torch.int64), _ones(3, device=d, dtype=torch.int64), alpha=1.5),
    ),
    "add bool alpha": (RuntimeError, lambda d: torch.add(_ones(3, device=d), _ones(3, device=d), alpha=True)),
    "add complex alpha of reals": (RuntimeError, lambda d: torch.add(_ones(3, device=d), _ones(3, device=d), alpha=1j)),
    # div_ with rounding_mode=None divides truly: a float result for integers.
    "div_ rounding_mode None of integers": (
        RuntimeError,
        lambda d: _ones(3, device=d, dtype=torch.int64).div_(_ones(3, device=d, dtype=torch.int64), rounding_mode=None),
    ),
    # TensorIterator's overlap checks, which ATen runs after _copy_from: tpu
    # copied overlapping views in some order and expanded destinations silently.
    "copy_ from a partly overlapping view": (RuntimeError, lambda d: _copy_shifted_by_one(torch.arange(5.0, device=d))),
    "copy_ into an expanded tensor": (
        RuntimeError,
        lambda d: _ones(1, device=d).expand(4).copy_(torch.arange(4.0, device=d)),
    ),
    "copy_ from the host into an expanded tensor": (
        RuntimeError,
        lambda d: _ones(1, device=d).expand(4).copy_(torch.arange(4.0)),
    ),
    "softmax dim": (IndexError, lambda d: torch.nn.functional.softmax(_ones(2, 3, device=d), dim=3)),
    "softmax dim of a 0-d": (IndexError, lambda d: torch.nn.functional.softmax(torch.tensor(1.0, device=d), dim=1)),
    "sort dim": (IndexError, lambda d: _ones(3, device=d).sort(2)),
    "argsort dim": (IndexError, lambda d: _ones(3, device=d).argsort(-2)),
    "index_add dtypes": (
        RuntimeError,
        lambda d: _ones(5, device=d).index_add(
            0, torch.zeros(2, dtype=torch.long, device=d), _ones(2, device=d, dtype=torch.float64)
        ),
    ),
    "index_put dtypes": (
        RuntimeError,
        lambda d: _ones(5, device=d).index_put_(
            (torch.zeros(2, dtype=torch.long, device=d),), _ones(2, device=d, dtype=torch.float64)
        ),
    ),
    "put_ dtypes": (
        RuntimeError,
        lambda d: _ones(5, device=d).put_(
            torch.zeros(2, dtype=torch.long, device=d), _ones(2, device=d, dtype=torch.float64)
        ),
    ),
    "cross_entropy int32 target": (
        RuntimeError,
        lambda d: torch.nn.functional.cross_entropy(_ones(4, 5, device=d), torch.zeros(4, dtype=torch.int32, device=d)),
    ),
    "nll_loss float target": (
        RuntimeError,
        lambda d: torch.nn.functional.nll_loss(_ones(4, 5, device=d), _ones(4, device=d)),
    ),
    "copy_ shapes": (RuntimeError, lambda d: _ones(3, device=d).copy_(_ones(4, device=d))),
    "copy_ into fewer dims": (RuntimeError, lambda d: _ones(3, device=d).copy_(_ones(2, 3, device=d))),
    "index_copy dtypes": (
        RuntimeError,
        lambda d: _ones(5, device=d).index_copy(
            0, torch.tensor([0, 1], device=d), _ones(2, device=d, dtype=torch.float64)
        ),
    ),
    "index_fill float index": (IndexError, lambda d: _ones(5, device=d).index_fill(0, _ones(2, device=d), 1.0)),
    "conv1d with a conv2d weight": (
        RuntimeError,
        lambda d: torch.nn.functional.conv1d(_ones(3, 8, device=d), _ones(4, 3, 3, 3, device=d)),
    ),
    "conv2d channels": (
        RuntimeError,
        lambda d: torch.nn.functional.conv2d(_ones(1, 3, 8, 8, device=d), _ones(4, 2, 3, 3, device=d)),
    ),
    "conv_transpose2d channels": (
        RuntimeError,
        lambda d: torch.nn.functional.conv_transpose2d(_ones(1, 3, 8, 8, device=d), _ones(2, 4, 3, 3, device=d)),
    ),
    "topk k": (RuntimeError, lambda d: _ones(4, device=d).topk(-1)),
    "layer_norm weight dtype": (
        RuntimeError,
        lambda d: torch.nn.functional.layer_norm(
            _ones(4, 5, device=d), (5,), _ones(5, device=d, dtype=torch.float64)
        ).cpu(),
    ),
    "addcdiv of bools": (RuntimeError, lambda d: torch.addcdiv(*(_ones(3, device=d, dtype=torch.bool),) * 3)),
    # These raised before, in the Python meta kernels' words.
    "addcdiv of ints": (
        RuntimeError,
        lambda d: torch.addcdiv(
            _ones(3, device=d), _ones(3, device=d, dtype=torch.long), _ones(3, device=d, dtype=torch.long)
        ),
    ),
    "masked_fill float mask": (RuntimeError, lambda d: _ones(5, device=d).masked_fill(_ones(5, device=d), 0.0)),
    "where float condition": (
        RuntimeError,
        lambda d: torch.where(_ones(3, device=d), _ones(3, device=d), _ones(3, device=d)),
    ),
    "lerp end dtype": (
        RuntimeError,
        lambda d: torch.lerp(_ones(3, device=d), _ones(3, device=d, dtype=torch.float64), 0.5),
    ),
    "lerp weight dtype": (
        RuntimeError,
        lambda d: torch.lerp(_ones(3, device=d), _ones(3, device=d), _ones(3, device=d, dtype=torch.float64)),
    ),
}


@pytest.mark.parametrize("mistake", sorted(SILENT_ONCE))
def test_mistakes_once_accepted_now_raise_as_on_cpu(mistake):
    kind, fn = SILENT_ONCE[mistake]
    with pytest.raises(kind) as cpu_err:
        fn("cpu")
    with pytest.raises(kind) as tpu_err:
        fn("tpu")
        torch.tpu.synchronize()
    assert str(tpu_err.value) == str(cpu_err.value).replace("(CPU)", "(tpu)")


def test_dtypes_without_kernels_are_not_implemented_errors():
    # As every other dtype gap on CPU and CUDA (the meta kernels raised RuntimeError).
    for fn in (
        lambda d: _ones(3, device=d) << 1,
        lambda d: _ones(3, device=d).bitwise_right_shift(1),
        lambda d: torch.randn(3, dtype=torch.long, device=d),
        lambda d: torch.rand(3, dtype=torch.long, device=d),
        lambda d: _ones(3, device=d).cumsum(0, dtype=torch.bool),
    ):
        with pytest.raises(NotImplementedError):
            fn("cpu")
        with pytest.raises(NotImplementedError, match="not implemented for"):
            fn("tpu")


DTYPE_GAPS = {
    # Each once failed in the compiler, raised RuntimeError, or computed.
    "softmax of int": lambda d: torch.nn.functional.softmax(_ones(3, device=d, dtype=torch.long), 0),
    "log_softmax of int": lambda d: torch.nn.functional.log_softmax(_ones(3, device=d, dtype=torch.long), 0),
    "layer_norm of int": lambda d: torch.nn.functional.layer_norm(_ones(2, 3, device=d, dtype=torch.long), (3,)),
    "binary_cross_entropy of int": lambda d: torch.nn.functional.binary_cross_entropy(
        _ones(3, device=d, dtype=torch.long), _ones(3, device=d, dtype=torch.long)
    ),
    "mse_loss of int": lambda d: torch.nn.functional.mse_loss(
        _ones(3, device=d, dtype=torch.long), _ones(3, device=d, dtype=torch.long)
    ),
    "smooth_l1_loss of int": lambda d: torch.nn.functional.smooth_l1_loss(
        _ones(3, device=d, dtype=torch.long), _ones(3, device=d, dtype=torch.long)
    ),
    "lerp of int": lambda d: torch.lerp(
        _ones(3, device=d, dtype=torch.long), _ones(3, device=d, dtype=torch.long), 0.5
    ),
    "addmm_ of bool": lambda d: _ones(2, 2, device=d, dtype=torch.bool).addmm_(
        _ones(2, 2, device=d, dtype=torch.bool), _ones(2, 2, device=d, dtype=torch.bool)
    ),
    "mm of bool": lambda d: _ones(2, 2, device=d, dtype=torch.bool) @ _ones(2, 2, device=d, dtype=torch.bool),
    "floor_divide of bool": lambda d: _ones(3, device=d, dtype=torch.bool) // _ones(3, device=d, dtype=torch.bool),
    "nearest interpolate of int": lambda d: torch.nn.functional.interpolate(
        _ones(1, 1, 4, device=d, dtype=torch.long), scale_factor=2
    ),
    "bernoulli of int": lambda d: torch.bernoulli(_ones(3, device=d, dtype=torch.long)),
    "logcumsumexp of int": lambda d: _ones(3, device=d, dtype=torch.long).logcumsumexp(0),
    "logcumsumexp of bool": lambda d: _ones(3, device=d, dtype=torch.bool).logcumsumexp(0),
    "cross of bool": lambda d: torch.linalg.cross(
        _ones(3, device=d, dtype=torch.bool), _ones(3, device=d, dtype=torch.bool)
    ),
}


@pytest.mark.parametrize("gap", sorted(DTYPE_GAPS))
def test_dtypes_an_op_has_no_kernel_for_raise_not_implemented(gap):
    dtype_name = "Bool" if "bool" in gap else "Long"
    with pytest.raises(NotImplementedError, match=f"not implemented for '{dtype_name}'"):
        DTYPE_GAPS[gap]("cpu")
    with pytest.raises(NotImplementedError, match=f"not implemented for '{dtype_name}'"):
        DTYPE_GAPS[gap]("tpu")
        torch.tpu.synchronize()


def test_std_and_var_of_integers_raise_as_on_cpu():
    # Each names itself (var_mean, std_mean) or "std and var"; the exception
    # type is the installed torch's (NotImplementedError from 2.15).
    for fn in (torch.var, torch.std, torch.var_mean, torch.std_mean):
        with pytest.raises(Exception, match=" only support floating point and complex dtypes$") as cpu_err:
            fn(_ones(3, device="cpu", dtype=torch.long))
        with pytest.raises(cpu_err.type) as tpu_err:
            fn(_ones(3, device="tpu", dtype=torch.long))
        assert str(tpu_err.value) == str(cpu_err.value)


def test_layer_norm_takes_float_parameters_for_a_bfloat16_input_only():
    x = torch.randn(4, 5)
    w, b = torch.randn(5), torch.randn(5)
    got = torch.nn.functional.layer_norm(x.bfloat16().tpu(), (5,), w.tpu(), b.tpu())
    want = torch.nn.functional.layer_norm(x.bfloat16(), (5,), w, b)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu(), want)
    with pytest.raises(RuntimeError, match=r"^mixed dtype \(tpu\): all inputs must share same datatype\.$"):
        torch.nn.functional.layer_norm(x.double().tpu(), (5,), w.tpu(), b.tpu())


def test_copy_from_the_host_checks_shapes_too():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"):
        _ones(3, device="tpu").copy_(torch.ones(4))
    t = torch.zeros(2, 3, device="tpu")
    t.copy_(torch.arange(3.0))  # broadcasting still copies
    torch.testing.assert_close(t.cpu(), torch.arange(3.0).expand(2, 3))


def test_convolution_of_two_dtypes_raises_as_on_cuda():
    x = _ones(1, 3, 8, 8, device="tpu")
    with pytest.raises(
        RuntimeError,
        match=r"^Input type \(tpuFloatType\) and weight type \(tpuDoubleType\) should be "
        r"the same$",
    ):
        torch.nn.functional.conv2d(x, _ones(4, 3, 3, 3, device="tpu", dtype=torch.float64))
    # (conv2d checks the bias itself, on every device; aten::convolution is ours.)
    with pytest.raises(RuntimeError, match=r"and bias type \(tpuDoubleType\) should be the same"):
        torch.convolution(
            x,
            _ones(4, 3, 3, 3, device="tpu"),
            _ones(4, device="tpu", dtype=torch.float64),
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
        )


# Checks on values (CPU reads them; CUDA asserts in its kernels): the program
# computes them and the next synchronization raises CPU's error.
VALUE_CHECKS = {
    "binary_cross_entropy input": (
        "all elements of input should be between 0 and 1",
        lambda d: torch.nn.functional.binary_cross_entropy(_ones(3, device=d) * 2, _ones(3, device=d) * 0.5),
    ),
    "binary_cross_entropy target": (
        "all elements of target should be between 0 and 1",
        lambda d: torch.nn.functional.binary_cross_entropy(_ones(3, device=d) * 0.5, -_ones(3, device=d)),
    ),
    "binary_cross_entropy NaN input": (
        "all elements of input should be between 0 and 1",
        lambda d: torch.nn.functional.binary_cross_entropy(_ones(3, device=d) * float("nan"), _ones(3, device=d)),
    ),
    "bernoulli p": (
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
        lambda d: torch.bernoulli(_ones(3, device=d) * 1.5),
    ),
    "normal std": (
        "normal expects all elements of std >= 0.0",
        lambda d: torch.normal(_ones(3, device=d), -_ones(3, device=d)),
    ),
}


@pytest.mark.parametrize("target", [7, -3])
def test_class_targets_out_of_bounds_raise_index_error_by_the_next_synchronization(target):
    logits = torch.randn(2, 5)
    targets = torch.tensor([1, target])
    with pytest.raises(IndexError, match=f"Target {target} is out of bounds"):
        torch.nn.functional.cross_entropy(logits, targets)
    with pytest.raises(IndexError, match="Target is out of bounds"):
        torch.nn.functional.cross_entropy(logits.tpu(), targets.tpu())
        torch.tpu.synchronize()
    # ignore_index is not a class, and is not out of bounds.
    ignored = torch.tensor([1, -100])
    torch.testing.assert_close(
        torch.nn.functional.cross_entropy(logits.tpu(), ignored.tpu()).cpu(),
        torch.nn.functional.cross_entropy(logits, ignored),
    )


@pytest.mark.parametrize("mistake", sorted(VALUE_CHECKS))
def test_value_checks_raise_cpus_error_by_the_next_synchronization(mistake):
    message, fn = VALUE_CHECKS[mistake]
    with pytest.raises(RuntimeError) as cpu_err:
        fn("cpu")
    assert str(cpu_err.value).startswith(message)
    with pytest.raises(RuntimeError) as tpu_err:
        fn("tpu")
        torch.tpu.synchronize()
    assert str(tpu_err.value).startswith(message)
    # Valid values run on, and the device is usable after the error.
    out = torch.nn.functional.binary_cross_entropy(_ones(3, device="tpu") * 0.25, _ones(3, device="tpu") * 0.5)
    torch.testing.assert_close(
        out.cpu(), torch.nn.functional.binary_cross_entropy(torch.full((3,), 0.25), torch.full((3,), 0.5))
    )


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_refused_overlapping_copy_leaves_the_tensor_as_it_was(mode):
    with torch_tpu.eager_mode(mode):
        x = torch.arange(5.0, device="tpu")
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            _copy_shifted_by_one(x)
        x[:2].copy_(x[3:])  # disjoint views of one storage copy as on CPU
        assert x.cpu().tolist() == [3.0, 4.0, 2.0, 3.0, 4.0]
