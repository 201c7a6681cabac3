"""Checking tpu results against CPU PyTorch on the same inputs."""

import torch

# Default tolerances per dtype (atol, rtol). bfloat16 rounding differs
# between XLA (which may fuse and keep f32 intermediates) and CPU eager.
TOLERANCES = {
    torch.float32: (1e-5, 1.3e-6 * 4),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.float16: (1e-3, 1e-3),
}


# Every dtype a tpu storage holds, for tests that save, load or copy tensors of each.
STORED_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
]


def to_device(obj, device):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to(device)
        t.requires_grad_(obj.requires_grad)
        return t
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def make_input(shape, dtype=torch.float32, int_range=(-5, 6)):
    """A random CPU test input: standard-normal floats, integers drawn from
    [int_range[0], int_range[1]) (small, so values repeat: ties and duplicates
    get exercised), bools half true."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(*int_range, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)


def assert_close(actual, expected, atol=None, rtol=None, msg=""):
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), msg
        for a, e in zip(actual, expected):
            assert_close(a, e, atol, rtol, msg)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{msg}: {actual} != {expected}"
        return
    assert isinstance(actual, torch.Tensor), f"{msg}: expected a tensor, got {type(actual)}"
    assert actual.device.type == "tpu", f"{msg}: result on {actual.device}, expected tpu"
    d_atol, d_rtol = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(
        actual.cpu(),
        expected,
        atol=d_atol if atol is None else atol,
        rtol=d_rtol if rtol is None else rtol,
        equal_nan=True,
        msg=lambda m: f"{msg}\n{m}",
    )


def check_op(fn, *inputs, atol=None, rtol=None, grad=False, **kwargs):
    """Runs fn on CPU inputs and on their tpu copies; compares results and,
    with grad=True, gradients of every float input requiring grad."""
    cpu_inputs = [
        i.detach().clone().requires_grad_(grad and i.is_floating_point()) if isinstance(i, torch.Tensor) else i
        for i in inputs
    ]
    tpu_inputs = [to_device(i, "tpu") for i in cpu_inputs]
    expected = fn(*cpu_inputs, **kwargs)
    actual = fn(*tpu_inputs, **kwargs)
    assert_close(actual, expected, atol, rtol, msg=f"forward of {getattr(fn, '__name__', fn)}")
    if grad:
        outs_e = expected if isinstance(expected, (list, tuple)) else [expected]
        outs_a = actual if isinstance(actual, (list, tuple)) else [actual]
        torch.manual_seed(1)
        weights = [torch.randn(o.shape, dtype=o.dtype) for o in outs_e if o.is_floating_point()]
        loss_e = sum((o * w).sum() for o, w in zip([o for o in outs_e if o.is_floating_point()], weights))
        loss_a = sum((o * w.to("tpu")).sum() for o, w in zip([o for o in outs_a if o.is_floating_point()], weights))
        loss_e.backward()
        loss_a.backward()
        for i, (c, t) in enumerate(zip(cpu_inputs, tpu_inputs)):
            if isinstance(c, torch.Tensor) and c.requires_grad:
                assert t.grad is not None, f"input {i} got no gradient on tpu"
                assert_close(t.grad, c.grad, atol, rtol, msg=f"gradient of input {i}")
    return actual


def in_mode(mode, fn):
    """`fn` as `mode` runs it: eagerly in that eager mode ("strict", "debug",
    "defer_and_fuse"), its work finished before the mode ends, or compiled
    ("compiled")."""
    import torch_tpu

    if mode == "compiled":
        return torch.compile(fn, backend="tpu")

    def run(*args):
        with torch_tpu.eager_mode(mode):
            out = fn(*args)
            torch_tpu.sync()
            return out

    return run


def outcome_on_cpu(fn):
    """fn()'s result on CPU, or the exception it raised: a test's expectation
    either way."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the exception is the expectation
        return e


def assert_outcome_like_cpu(run, expected, compare, same_message=True):
    """run() raises `expected`'s exception type (exactly, and its message,
    with same_message) where `expected` is one (outcome_on_cpu), else its
    result passes compare(result, expected)."""
    import pytest

    if not isinstance(expected, Exception):
        compare(run(), expected)
        return
    with pytest.raises(type(expected)) as raised:
        run()
    if same_message:
        assert type(raised.value) is type(expected) and str(raised.value) == str(expected)


def assert_each_close_on_host(actual, expected, equal_nan=False):
    """torch.testing.assert_close of each of a list or tuple of results that
    run() read back to the host itself (a deferred error, an index out of
    range, raises at that read): the `compare` of assert_outcome_like_cpu for
    them, where assert_close asks results on tpu."""
    assert len(actual) == len(expected), f"{len(actual)} results, expected {len(expected)}"
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, equal_nan=equal_nan)
