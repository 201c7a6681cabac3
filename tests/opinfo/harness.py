"""Runs PyTorch's OpInfo database on the tpu device and compares with CPU.

One sample is one call of an OpInfo's op on one SampleInput. Its outcome is
one of:

  pass     the tpu result equals CPU's within the dtype's tolerance
  missing  an ATen overload on the way has no tpu lowering (NotImplementedError
           "... not currently implemented for the tpu device"); the overload
           is recorded, so the report can say which lowerings block most ops
  wrong    the op ran on tpu but its result differs from CPU's
  error    any other exception on tpu (CPU ran the same call fine)
  timeout  the sample ran longer than SAMPLE_TIMEOUT_S
  skip     not comparable; the outcome names why
  crash    the process died on it (recorded by the sweep driver)

The CPU fallback is off while samples run, so a missing lowering is counted
as missing and never silently runs on CPU.

`python tests/opinfo/harness.py --worker OUT.jsonl OPKEY...` is the worker
the sweep driver (`run_sweep`) starts: a sample that aborts the process loses
only its worker, which is restarted after it.
"""

import collections
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import torch
import torch.utils._pytree as pytree

import torch_tpu

# Dtypes the sweep runs, in report order. complex64 and complex128 both:
# some lowerings have float32-only paths (complex32 has no XLA type).
DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.complex64,
    torch.complex128,
    torch.int64,
    torch.int32,
    torch.bool,
]
DTYPE_NAMES = {d: str(d).replace("torch.", "") for d in DTYPES}
DTYPES_BY_NAME = {n: d for d, n in DTYPE_NAMES.items()}

SAMPLE_TIMEOUT_S = 20

# (atol, rtol) per result dtype. float32 allows a few ulps: XLA's
# transcendental approximations and reduction orders are not CPU's.
# bfloat16/float16 allow one rounding step of the result dtype, as XLA may
# keep float32 intermediates where CPU eager rounds each op.
TOLERANCES = {
    torch.float32: (1e-5, 1.3e-6 * 4),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.float16: (1e-3, 1e-3),
    torch.complex64: (1e-5, 1.3e-6 * 4),
    torch.complex128: (1e-7, 1e-7),
}

# Gradients go through several ops, each rounding on its own, and sums in
# a different order than CPU's kernels: a looser float32 tolerance.
BACKWARD_TOLERANCE = (1e-4, 1e-4)

# Every per-op tolerance override, with its reason:
# {opkey: {dtype name or "backward": (atol, rtol, reason)}}.
_SUM_ORDER = "a sum over many products (conv window, attention row) in another order than CPU's kernel"
_F32_PRODUCT_KEPT = "CPU rounds the product to the dtype before adding; XLA keeps it in float32 (one rounding fewer)"
_PARTIAL_SUMS_ROUNDED = (
    "CPU's slow transposed convolution (groups + dilation samples) rounds partial sums to the "
    "dtype (its error against the float32 result is ~2x ours); XLA sums in float32 and rounds once"
)
_SCATTER_ADD_ORDER = (
    "duplicate indices accumulate in another order, and in float32, where CPU adds one by one in the dtype"
)
_SQUARINGS = (
    "scaling and squaring doubles the rounding error of each squaring: on op_db's batched sample CPU's own "
    "float32 error against float64 is 2.4e-3 relative, ours 9e-4"
)
_OPINFO_INDUCTOR_F16 = (
    "PyTorch's own OpInfo loosens float16 to this tolerance for every device, CUDA included "
    "(toleranceOverride on TestInductorOpInfo.test_comprehensive): a compiled kernel accumulates in float32, "
    "as XLA does, where eager CPU rounds each step to float16"
)
_ACC_DTYPE_BY_DEVICE = (
    "PyTorch's own Python function picks the accumulation dtype by device: acc_policy='auto' resolves to "
    "float32 logits and softmax only on cpu and cuda (torch/nn/modules/linear_cross_entropy_options.py, "
    "_resolve_auto_acc_dtype), on any other device to the input's float16; op_db's samples measured against "
    "float64: CPU's error 0.004, ours (float16 logits, as PyTorch asks) 0.012"
)
TOLERANCE_OVERRIDES = {
    "index_reduce.mean": {"float16": (2e-3, 3e-3, _OPINFO_INDUCTOR_F16)},
    "index_reduce.prod": {"float16": (2e-3, 3e-3, _OPINFO_INDUCTOR_F16)},
    "matrix_exp": {"float32": (1e-5, 5e-3, _SQUARINGS)},
    "nn.functional.conv2d": {"float32": (1e-4, 1.3e-5, _SUM_ORDER)},
    "nn.functional.conv3d": {"float32": (1e-4, 1.3e-5, _SUM_ORDER)},
    # Against float64 over every bfloat16 sample: conv_transpose1d's error is
    # 0.48 on tpu and 0.48 on CPU, conv_transpose3d's 1.96 on tpu and 7.54 on
    # CPU (op_db's samples, upcast to float64, as the reference); the
    # distance to CPU is mostly CPU's error.
    "nn.functional.conv_transpose1d": {"bfloat16": (1e-1, 1.6e-2, _PARTIAL_SUMS_ROUNDED)},
    "nn.functional.conv_transpose2d": {
        "bfloat16": (1e-1, 1.6e-2, _PARTIAL_SUMS_ROUNDED),
        "float16": (2.5e-2, 1e-3, _PARTIAL_SUMS_ROUNDED),
    },
    "nn.functional.conv_transpose3d": {
        "float32": (1e-4, 1.3e-5, _SUM_ORDER),
        "bfloat16": (1.0, 1.6e-2, _PARTIAL_SUMS_ROUNDED),
        "float16": (5e-2, 1e-3, _PARTIAL_SUMS_ROUNDED),
    },
    "nn.functional.linear_cross_entropy.chunked_none": {"float16": (1.6e-2, 1e-3, _ACC_DTYPE_BY_DEVICE)},
    "nn.functional.scaled_dot_product_attention": {"float32": (1e-4, 1.3e-5, _SUM_ORDER)},
    "addr": {"bfloat16": (6.25e-2, 1.6e-2, _F32_PRODUCT_KEPT), "float16": (1e-2, 1e-3, _F32_PRODUCT_KEPT)},
    "_unsafe_masked_index_put_accumulate": {
        "bfloat16": (1.25e-1, 1.6e-2, _SCATTER_ADD_ORDER),
        "float16": (3e-2, 1e-3, _SCATTER_ADD_ORDER),
    },
}

# OpInfos whose result values are unspecified (uninitialized memory): only
# the result's shape and dtype are compared.
VALUES_UNSPECIFIED = {
    "empty": "uninitialized memory",
    "empty_like": "uninitialized memory",
    "empty_permuted": "uninitialized memory",
    "empty_strided": "uninitialized memory",
    "new_empty": "uninitialized memory",
    "new_empty_strided": "uninitialized memory",
}

# Results PyTorch types by device, with its rule: {opkey: (result indices,
# reason)}. The tpu device takes its result types from the meta kernels,
# which follow the non-CPU rule; the values are compared in CPU's dtype.
_STATISTICS_IN_FLOAT32 = (
    "the saved mean and inverse std of a bfloat16/float16 input are float32 on every device but CPU, which "
    "returns them in the input dtype (torch/_refs native_layer_norm and torch/_decomp native_batch_norm_helper: "
    "`if input.device.type == 'cpu': mean = mean.to(input.dtype)`)"
)
DTYPE_BY_DEVICE = {
    "_batch_norm_with_update": ((1, 2), _STATISTICS_IN_FLOAT32),
    "_native_batch_norm_legit": ((1, 2), _STATISTICS_IN_FLOAT32),
    "native_batch_norm": ((1, 2), _STATISTICS_IN_FLOAT32),
    "native_layer_norm": ((1, 2), _STATISTICS_IN_FLOAT32),
}

# OpInfos whose index results PyTorch leaves unspecified among equal values:
# {opkey: (where the dim argument is: (position in args, keyword)), reason}.
# Their indices are compared by the input values they pick (which must equal
# CPU's); the values results are compared as usual. A stable sort keeps its
# exact comparison.
_TIE_ORDER = (
    "the order of equal elements is unspecified (torch.sort/argsort with stable=False: 'the order of equivalent "
    "elements is not guaranteed'; CPU's std::sort, topk's partial sort and mode's sort pick an arbitrary one)"
)
TIE_ORDER_UNSPECIFIED = {
    "argsort": ((0, "dim"), _TIE_ORDER),
    "mode": ((0, "dim"), _TIE_ORDER),
    "sort": ((0, "dim"), _TIE_ORDER),
    "topk": ((1, "dim"), _TIE_ORDER),
}


def _picked_values(key, sample, result):
    """`result` with its index tensor (the last result of each of these ops)
    replaced by the input values it picks (TIE_ORDER_UNSPECIFIED), or
    unchanged for a stable sort. Raises IndexError for an index out of range."""
    args, kwargs = sample.args, sample.kwargs
    if kwargs.get("stable", False):
        return result
    (position, name), _ = TIE_ORDER_UNSPECIFIED[key]
    dim = args[position] if len(args) > position else kwargs.get(name, -1)
    keepdim = key != "mode" or (args[1] if len(args) > 1 else kwargs.get("keepdim", False))
    x = sample.input.detach()
    if x.dim() == 0:
        x, dim = x.reshape(1), 0

    leaves, spec = pytree.tree_flatten(result)
    index = leaves[-1]
    index = index.reshape(1) if index.dim() == 0 else index
    if not keepdim and index.dim() < x.dim():
        index = index.unsqueeze(dim)
    leaves[-1] = x.take_along_dim(index, dim)
    return pytree.tree_unflatten(leaves, spec)


# OpInfos whose non-input tensor arguments stay on CPU, with PyTorch's rule.
ARGS_STAY_ON_CPU = {
    "tensor_split": "tensor_indices_or_sections must be a CPU tensor (the OpInfo makes it on CPU on every device)",
}

# OpInfos not run at all, with the reason.
SKIPPED_OPS = {}

MISSING_RE = re.compile(r"operator '([^']+)' is not currently implemented for the tpu device")
# ATen's own stubs for backends without a kernel (convolution_overrideable...).
MISSING_STUB_RE = re.compile(r"^(\w+) not implemented\. You are likely triggering this with tensor backend")


class SampleTimeout(Exception):
    pass


def op_key(op):
    """Unique, stable name of an OpInfo: name plus variant."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


_OPS = None


def torch_release():
    """The running torch's release ("2.13.0"): the OpInfo database is the
    same in its CPU and CUDA builds ("+cpu", "+cu132")."""
    return torch.__version__.split("+")[0]


def opinfos():
    """{opkey: OpInfo} over op_db (which includes the linalg, fft, special and
    signal databases)."""
    global _OPS
    if _OPS is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.testing._internal.common_methods_invocations import op_db
            from torch.testing._utils import wrapper_set_seed
        recording = _record_rng_draws(wrapper_set_seed)
        for name, module in list(sys.modules.items()):
            if (
                name.startswith("torch.testing._internal")
                and getattr(module, "wrapper_set_seed", None) is wrapper_set_seed
            ):
                module.wrapper_set_seed = recording
        _OPS = {}
        for op in op_db:
            _OPS.setdefault(op_key(op), op)
    return _OPS


def op_dtypes(op):
    supported = op.supported_dtypes("cpu")
    return [d for d in DTYPES if d in supported]


def tolerance(key, dtype, kind="forward"):
    """(atol, rtol) override for the op's samples of dtype (or its backward),
    or None: then each result is compared at its own dtype's tolerance."""
    override = TOLERANCE_OVERRIDES.get(key, {})
    slot = "backward" if kind == "backward" else DTYPE_NAMES.get(dtype, str(dtype))
    if slot in override:
        return override[slot][:2]
    return BACKWARD_TOLERANCE if kind == "backward" else None


# ---- one sample -----------------------------------------------------------


class _alarm:
    """Raises SampleTimeout in the main thread after `seconds`: a sample
    that hangs in Python (or returns to Python) cannot stall the sweep.
    A hang inside C++ is caught by the driver's watchdog instead."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        def on_alarm(signum, frame):
            raise SampleTimeout(f"sample ran over {self.seconds} s")

        self.previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)
        return False


def _map_tensors(tree, fn):
    """Applies fn to every tensor leaf, mapping one tensor object to one result
    so aliasing between arguments survives."""
    memo = {}

    def leaf(x):
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                memo[id(x)] = fn(x)
            return memo[id(x)]
        return x

    return pytree.tree_map(leaf, tree)


def _to_tpu(t):
    # Samples are generated for "cpu"; a tensor a sample places on another
    # device on purpose (error inputs with a "meta" tensor) stays there, as it
    # does when PyTorch's own suite generates the samples for the device under test.
    if t.device.type != "cpu":
        return t
    return t.detach().to("tpu").requires_grad_(t.requires_grad)


def _is_cpu_device(x):
    return (isinstance(x, str) and x == "cpu") or (isinstance(x, torch.device) and x.type == "cpu")


def _tpu_args(sample, key=None):
    """The sample's arguments on tpu. Samples are generated for device "cpu",
    so a "cpu" device argument (factory device=, Tensor.to('cpu')) means the
    device under test."""
    inp, args, kwargs = _sample_args(sample)
    if key in ARGS_STAY_ON_CPU:
        inp = _map_tensors(inp, _to_tpu)
    else:
        inp, args, kwargs = _map_tensors((inp, args, kwargs), _to_tpu)
    args = tuple("tpu" if _is_cpu_device(a) else a for a in args)
    if _is_cpu_device(kwargs.get("device")):
        kwargs = dict(kwargs, device="tpu")
    return inp, args, kwargs


def _clone(t):
    return t.detach().clone().requires_grad_(t.requires_grad)


def _call(op, sample, args, device="cpu"):
    inp, a, kw = args
    if not _tensors(args) and "device" not in kw:
        # A factory sample with neither tensors nor device= creates on the
        # default device: make that the device under test.
        with torch.device(device):
            return sample.output_process_fn_grad(op(inp, *a, **kw))
    return sample.output_process_fn_grad(op(inp, *a, **kw))


def _sample_args(sample):
    return (sample.input, tuple(sample.args), dict(sample.kwargs))


def _tensors(tree):
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _first_line(e, limit=160):
    text = str(e).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(e).__name__}: {line[:limit]}"


def classify_exception(e):
    """(status, detail, missing overload or None) of an exception raised on tpu."""
    if isinstance(e, SampleTimeout):
        return "timeout", str(e), None
    if isinstance(e, NotImplementedError):
        m = MISSING_RE.search(str(e))
        if m:
            return "missing", m.group(1), m.group(1)
        m = MISSING_STUB_RE.search(str(e))
        if m:
            return "missing", "aten::" + m.group(1), "aten::" + m.group(1)
    return "error", _first_line(e), None


def _fetch(tree):
    """Result tree with tpu tensors copied to CPU (this synchronizes, so a
    deferred device error surfaces here); notes results not on tpu."""
    off_device = []

    def leaf(t):
        if t.device.type != "tpu":
            off_device.append(str(t.device))
        return t.detach().cpu()

    return _map_tensors(tree, leaf), off_device


def compare(actual, expected, tol=None, float32_results=()):
    """None when actual (fetched to CPU) matches expected, else the reason.
    tol: (atol, rtol), or None for each result dtype's TOLERANCES.
    float32_results: indices of results that are float32 where CPU gives
    bfloat16/float16 (DTYPE_BY_DEVICE), compared in CPU's dtype."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return f"{len(a_leaves)} results, CPU gives {len(e_leaves)}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"result {i}" if len(e_leaves) > 1 else "result"
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"{where}: {type(a).__name__}, CPU gives a tensor"
            if i in float32_results and a.dtype == torch.float32 and e.dtype in (torch.bfloat16, torch.float16):
                a = a.to(e.dtype)
            if a.dtype != e.dtype:
                return f"{where}: dtype {a.dtype}, CPU gives {e.dtype}"
            if a.shape != e.shape:
                return f"{where}: shape {tuple(a.shape)}, CPU gives {tuple(e.shape)}"
            if e.layout != torch.strided:
                continue
            atol, rtol = tol or TOLERANCES.get(e.dtype, (0, 0))
            try:
                torch.testing.assert_close(
                    a, e, atol=atol, rtol=rtol, equal_nan=True, check_device=False, check_stride=False
                )
            except AssertionError as err:
                lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                return f"{where}: " + "; ".join(lines[:3])[:240]
        elif isinstance(e, float) and isinstance(a, float) and math.isnan(e) and math.isnan(a):
            continue
        elif a != e:
            return f"{where}: {a!r}, CPU gives {e!r}"
    return None


# A bfloat16/float16 result is compared with CPU's, itself rounded at each
# step of CPU's kernel: where XLA keeps float32 intermediates the two differ
# by more than a rounding step, and the tpu result is the more accurate one.
# PyTorch's rule for this (test/test_ops.py, TestCommon._ref_test_helper: a
# low-precision result that is not close to the reference passes when its
# summed distance to the same computation in float64 is no larger than the
# reference's) decides such samples: CPU is the reference, the float64 result
# is CPU's on the sample's inputs upcast.
LOW_PRECISION = (torch.bfloat16, torch.float16)


def _float64_reference(op, sample, dtype):
    """CPU's result on the sample with every `dtype` tensor upcast to float64,
    or None when the op refuses that (mixed-dtype argument checks)."""

    def upcast(t):
        t = t.detach()
        return t.to(torch.float64) if t.dtype == dtype else t.clone()

    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            return _detach(_call(op, sample, _map_tensors(_sample_args(sample), upcast)))
    except Exception:  # noqa: BLE001  no precise result: the plain comparison stands
        return None


def _at_least_as_accurate_as_cpu(op, sample, dtype, actual, expected):
    """True when every result is either equal to CPU's or, in the dtype under
    test, no farther from the float64 result in summed absolute distance;
    non-finite float64 elements must be matched exactly as CPU does."""
    precise = _float64_reference(op, sample, dtype)
    if precise is None:
        return False
    a_leaves, e_leaves, p_leaves = (pytree.tree_leaves(t) for t in (actual, expected, precise))
    if not len(a_leaves) == len(e_leaves) == len(p_leaves):
        return False
    for a, e, p in zip(a_leaves, e_leaves, p_leaves):
        if not isinstance(e, torch.Tensor):
            if compare(a, e) is not None:
                return False
            continue
        if not isinstance(a, torch.Tensor) or a.dtype != e.dtype or a.shape != e.shape:
            return False
        if compare(a, e) is None:
            continue
        if e.dtype != dtype or not isinstance(p, torch.Tensor) or p.shape != e.shape:
            return False
        p = p.to(torch.float64)
        finite = torch.isfinite(p)
        if compare(a[~finite], e[~finite]) is not None:
            return False
        ours = (a.double() - p)[finite].abs().sum()
        cpus = (e.double() - p)[finite].abs().sum()
        # NaN in either distance fails, as in PyTorch's rule: a CPU result
        # that is NaN where float64 is finite vouches for nothing.
        if not bool(ours <= cpus):
            return False
    return True


def _structure_matches(actual, expected):
    """For random or uninitialized results: same structure, shapes and dtypes."""
    a_leaves = pytree.tree_leaves(actual)
    e_leaves = pytree.tree_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return f"{len(a_leaves)} results, CPU gives {len(e_leaves)}"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.dtype != e.dtype or a.shape != e.shape:
                return (
                    f"result {getattr(a, 'dtype', a)} {tuple(getattr(a, 'shape', ()))}, "
                    f"CPU gives {e.dtype} {tuple(e.shape)}"
                )
    return None


_RNG_DRAWN = [False]


def _record_rng_draws(wrapper_set_seed):
    """OpInfos of random ops call their op through wrapper_set_seed, which
    seeds and then restores CPU's generator: a draw shows only inside it."""

    def probe(op):
        def call(*args, **kwargs):
            state = torch.get_rng_state()
            result = op(*args, **kwargs)
            _RNG_DRAWN[0] |= not torch.equal(state, torch.get_rng_state())
            return result

        return call

    def recording(op, *args, **kwargs):
        return wrapper_set_seed(probe(op), *args, **kwargs)

    return recording


def _cpu_reference(op, sample):
    """CPU result, and whether it is random (it drew from CPU's generator):
    a random result can only be compared by shape and dtype."""
    torch.manual_seed(0)
    state = torch.get_rng_state()
    _RNG_DRAWN[0] = False
    result = _detach(_call(op, sample, _map_tensors(_sample_args(sample), _clone)))
    return result, _RNG_DRAWN[0] or not torch.equal(state, torch.get_rng_state())


def _detach(tree):
    return _map_tensors(tree, lambda t: t.detach())


def _non_strided(sample):
    return any(t.layout != torch.strided for t in _tensors(_sample_args(sample)))


def _tpu_error_outcome(op, sample, error, detail):
    """An error on tpu is the device's fault only when CPU runs the sample."""
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            _cpu_reference(op, sample)
    except Exception as e:  # noqa: BLE001
        same = "the same" if type(e) is type(error) else "another"
        return {"status": "skip", "detail": f"CPU raises {same} error: " + _first_line(e)}
    return {"status": "error", "detail": detail}


def run_forward(key, op, sample, dtype):
    """Outcome dict of one forward sample."""
    if _non_strided(sample):
        return {"status": "skip", "detail": "sparse input: tpu tensors are strided only"}
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            tpu_args = _tpu_args(sample, key)
            torch.manual_seed(0)
            actual, off_device = _fetch(_call(op, sample, tpu_args, "tpu"))
    except Exception as e:  # noqa: BLE001  every failure is an outcome
        status, detail, missing = classify_exception(e)
        if status == "error":
            return _tpu_error_outcome(op, sample, e, detail)
        return {"status": status, "detail": detail, "missing": missing}
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            expected, random = _cpu_reference(op, sample)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "detail": "CPU reference raised " + _first_line(e)}
    if off_device:
        return {"status": "wrong", "detail": f"result on {off_device[0]}, not tpu"}
    if random or key in VALUES_UNSPECIFIED:
        reason = _structure_matches(actual, expected)
        return {"status": "wrong", "detail": reason} if reason else {"status": "pass", "detail": "shape/dtype only"}
    if key in TIE_ORDER_UNSPECIFIED:
        try:
            actual = _picked_values(key, sample, actual)
        except (IndexError, RuntimeError) as e:
            return {"status": "wrong", "detail": "indices: " + _first_line(e)}
        expected = _picked_values(key, sample, expected)
    reason = compare(actual, expected, tolerance(key, dtype), DTYPE_BY_DEVICE.get(key, ((), ""))[0])
    if reason and dtype in LOW_PRECISION:
        if _at_least_as_accurate_as_cpu(op, sample, dtype, actual, expected):
            return {"status": "pass", "detail": "differs from CPU, at least as close to float64"}
    return {"status": "wrong", "detail": reason} if reason else {"status": "pass"}


def _grads(op, sample, args, device="cpu", weights_seed=1):
    """Gradients of sum(out_i * w_i) over the float outputs w.r.t. the tensor
    inputs that require grad (None where an input gets none)."""
    outs = [o for o in _tensors(_call(op, sample, args, device)) if o.requires_grad and o.is_floating_point()]
    inputs = [t for t in _tensors(args) if t.requires_grad]
    if not outs or not inputs:
        return None
    gen = torch.Generator().manual_seed(weights_seed)
    device = outs[0].device
    loss = sum((o * torch.randn(o.shape, dtype=o.dtype, generator=gen).to(device)).sum() for o in outs)
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return [None if g is None else g for g in grads]


def run_backward(key, op, sample):
    """Outcome dict of one float32 backward sample."""
    if _non_strided(sample):
        return {"status": "skip", "detail": "sparse input: tpu tensors are strided only"}
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            torch.manual_seed(0)
            expected = _grads(op, sample, _map_tensors(_sample_args(sample), _clone))
            _, random = _cpu_reference(op, sample)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "detail": "CPU reference raised " + _first_line(e)}
    if expected is None:
        return {"status": "skip", "detail": "no differentiable output or input"}
    if random:
        return {"status": "skip", "detail": "random op: gradients not comparable"}
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            torch.manual_seed(0)
            actual, _ = _fetch(_grads(op, sample, _tpu_args(sample, key), "tpu"))
    except Exception as e:  # noqa: BLE001
        status, detail, missing = classify_exception(e)
        return {"status": status, "detail": detail, "missing": missing}
    for i, (a, e) in enumerate(zip(actual, expected)):
        if (a is None) != (e is None):
            return {
                "status": "wrong",
                "detail": f"gradient {i}: {'none' if a is None else 'a tensor'}, "
                f"CPU gives {'none' if e is None else 'a tensor'}",
            }
    reason = compare(
        [a for a in actual if a is not None],
        [e for e in expected if e is not None],
        tolerance(key, torch.float32, "backward"),
    )
    return {"status": "wrong", "detail": "gradient " + reason} if reason else {"status": "pass"}


def run_error_input(op, error_input, key=None):
    """Outcome dict of one ErrorInput: tpu must raise CPU's exception type."""
    sample = error_input.sample_input
    cpu_error = None
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            _call(op, sample, _map_tensors(_sample_args(sample), _clone))
    except SampleTimeout:
        return {"status": "skip", "detail": "CPU timed out"}
    except Exception as e:  # noqa: BLE001
        cpu_error = type(e)
    if cpu_error is None:
        return {"status": "skip", "detail": "CPU raised nothing"}
    if _non_strided(sample):
        return {"status": "skip", "detail": "sparse input: tpu tensors are strided only"}
    try:
        with _alarm(SAMPLE_TIMEOUT_S):
            tpu_args = _tpu_args(sample, key)
            _fetch(_call(op, sample, tpu_args, "tpu"))
            torch_tpu.synchronize()
    except Exception as e:  # noqa: BLE001
        status, detail, missing = classify_exception(e)
        if status in ("missing", "timeout") and cpu_error is not NotImplementedError:
            return {"status": status, "detail": detail, "missing": missing}
        if type(e) is cpu_error:
            return {"status": "pass"}
        return {"status": "wrong", "detail": f"raised {_first_line(e)}; CPU raises {cpu_error.__name__}"}
    return {"status": "wrong", "detail": f"raised nothing; CPU raises {cpu_error.__name__}"}


# ---- one OpInfo -----------------------------------------------------------


def forward_samples(op, dtype, limit=None):
    """The OpInfo's sample inputs for dtype (the first `limit`), generated
    under a fixed seed so sample i is the same in the sweep and in the CI
    test."""
    torch.manual_seed(0)
    return list(itertools.islice(op.sample_inputs("cpu", dtype), limit))


def backward_samples(op):
    torch.manual_seed(0)
    return list(op.sample_inputs("cpu", torch.float32, requires_grad=True))


def error_inputs(op):
    if op.error_inputs_func is None:
        return []
    torch.manual_seed(0)
    return list(op.error_inputs("cpu"))


def sweep_units(op, dtypes, backward=True, errors=True):
    """The (kind, dtype name) groups of one OpInfo, in sweep order."""
    units = [("forward", DTYPE_NAMES[d]) for d in op_dtypes(op) if d in dtypes]
    if backward and op.supports_autograd and torch.float32 in op_dtypes(op):
        units.append(("backward", "float32"))
    if errors and op.error_inputs_func is not None:
        units.append(("error", "-"))
    return units


def _unit_inputs(op, kind, dtype_name):
    if kind == "forward":
        return forward_samples(op, DTYPES_BY_NAME[dtype_name])
    if kind == "backward":
        return backward_samples(op)
    return error_inputs(op)


def _run_one(key, op, kind, dtype_name, item):
    if kind == "forward":
        return run_forward(key, op, item, DTYPES_BY_NAME[dtype_name])
    if kind == "backward":
        return run_backward(key, op, item)
    return run_error_input(op, item, key)


def sweep_op(key, dtypes, emit, max_samples=None, backward=True, errors=True, crashed=()):
    """Runs one OpInfo; emit(record) gets a 'begin' record before each sample
    (so a driver knows which sample killed a process) and its outcome after.
    Samples listed in `crashed` as (kind, dtype, index) are not run again."""
    op = opinfos()[key]
    if key in SKIPPED_OPS:
        emit(
            {
                "ev": "result",
                "op": key,
                "kind": "op",
                "dtype": "-",
                "i": 0,
                "status": "skip",
                "detail": SKIPPED_OPS[key],
            }
        )
        return
    for kind, dtype_name in sweep_units(op, dtypes, backward, errors):
        try:
            with _alarm(SAMPLE_TIMEOUT_S * 3):
                items = _unit_inputs(op, kind, dtype_name)
        except Exception as e:  # noqa: BLE001
            emit(
                {
                    "ev": "result",
                    "op": key,
                    "kind": kind,
                    "dtype": dtype_name,
                    "i": -1,
                    "status": "skip",
                    "detail": "generating inputs raised " + _first_line(e),
                }
            )
            continue
        if max_samples is not None:
            items = items[:max_samples]
        for i, item in enumerate(items):
            if (kind, dtype_name, i) in crashed:
                continue
            emit({"ev": "begin", "op": key, "kind": kind, "dtype": dtype_name, "i": i})
            t0 = time.time()
            try:
                outcome = _run_one(key, op, kind, dtype_name, item)
            except Exception as e:  # noqa: BLE001  never abort the sweep
                outcome = {"status": "error", "detail": "harness: " + _first_line(e)}
            outcome.update(
                {"ev": "result", "op": key, "kind": kind, "dtype": dtype_name, "i": i, "s": round(time.time() - t0, 3)}
            )
            emit(outcome)


def worker_main(argv):
    """--worker OUT.jsonl CONFIG.json: runs the OpInfos named in the config."""
    out_path, config_path = argv
    with open(config_path) as f:
        config = json.load(f)
    torch_tpu.cpu_fallback(False)
    torch.set_float32_matmul_precision("highest")
    dtypes = [DTYPES_BY_NAME[n] for n in config["dtypes"]]
    crashed = {tuple(c) for c in config.get("crashed", [])}
    with open(out_path, "a", buffering=1) as out:

        def emit(record):
            out.write(json.dumps(record) + "\n")
            out.flush()

        for key in config["ops"]:
            sweep_op(
                key,
                dtypes,
                emit,
                config.get("max_samples"),
                config.get("backward", True),
                config.get("errors", True),
                {c[1:] for c in crashed if c[0] == key},
            )
            emit({"ev": "done", "op": key})


# ---- the driver -------------------------------------------------------------


class _RecordTail:
    """Reads the complete JSON lines a worker appended since the last call."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def read(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            f.seek(self.offset)
            text = f.read()
            self.offset = f.tell()
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()  # a line still being written
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a crash
        return records


def _start_worker(workdir, index, ops, config, crashed):
    out_path = os.path.join(workdir, f"worker{index}.jsonl")
    config_path = os.path.join(workdir, f"worker{index}.json")
    with open(config_path, "w") as f:
        json.dump(dict(config, ops=ops, crashed=sorted(crashed)), f)
    log = open(os.path.join(workdir, f"worker{index}.log"), "a")
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--worker", out_path, config_path],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    return proc, out_path, log


# An OpInfo whose samples killed the worker this often is not run further:
# each death costs a worker restart.
MAX_CRASHES_PER_OP = 3
# A worker that dies before its first sample (a broken build being replaced)
# is restarted this often before the OpInfo it would have run is blamed.
MAX_STARTUP_FAILURES = 3


def _whole_op_crash(key, detail):
    """A crash record for an OpInfo as a whole rather than one of its samples."""
    return {"ev": "result", "op": key, "kind": "op", "dtype": "-", "i": 0, "status": "crash", "detail": detail}


def _log_tail(path, chars=300):
    try:
        with open(path, errors="replace") as f:
            return " ".join(f.read()[-chars:].split())
    except OSError:
        return ""


def _record_death(results, crash_records, crashed, pending, begun, rc, hung, hang_s, log_path, startups, i):
    """Records why a worker died and what its successor skips."""
    if begun is None:
        startups[i] += 1
        if startups[i] < MAX_STARTUP_FAILURES:
            return
        startups[i] = 0
        key = pending.pop(0)
        results.setdefault(key, []).append(
            _whole_op_crash(key, f"worker exited {rc} outside a sample: " + _log_tail(log_path))
        )
        return
    startups[i] = 0
    status = "timeout" if hung else "crash"
    detail = f"no progress for {hang_s} s; killed" if hung else f"process died (exit code {rc})"
    rec = dict(begun, ev="result", status=status, detail=detail)
    crash_records.append(rec)
    key = begun["op"]
    crashed.add((key, begun["kind"], begun["dtype"], begun["i"]))
    # The dying OpInfo reruns from its start minus the crashed samples, so
    # only its crash records are kept.
    results[key] = [r for r in results.get(key, []) if r["status"] in ("crash", "timeout")] + [rec]
    if sum(c[0] == key for c in crashed) >= MAX_CRASHES_PER_OP:
        pending.remove(key)
        results[key].append(_whole_op_crash(key, f"not run further after {MAX_CRASHES_PER_OP} process deaths"))


def run_sweep(
    keys, workdir, jobs=2, dtypes=None, max_samples=None, backward=True, errors=True, hang_s=120, progress=None
):
    """Runs OpInfos `keys` in `jobs` worker processes; returns every outcome
    record. A worker that dies (abort, segfault) or makes no progress for
    hang_s seconds is killed; its current sample is recorded as 'crash' or
    'timeout' and a new worker resumes with the rest."""
    os.makedirs(workdir, exist_ok=True)
    config = {
        "dtypes": [DTYPE_NAMES[d] for d in (dtypes or DTYPES)],
        "max_samples": max_samples,
        "backward": backward,
        "errors": errors,
    }
    pending = [list(keys[i::jobs]) for i in range(jobs)]
    crashed = [set() for _ in range(jobs)]
    results = {}
    crash_records = []
    for i in range(jobs):
        path = os.path.join(workdir, f"worker{i}.jsonl")
        if os.path.exists(path):
            os.remove(path)
    workers = {}
    for i in range(jobs):
        if pending[i]:
            workers[i] = _start_worker(workdir, i, pending[i], config, crashed[i])
    tails = {i: _RecordTail(os.path.join(workdir, f"worker{i}.jsonl")) for i in range(jobs)}
    last_progress = {i: time.time() for i in range(jobs)}
    begun = {i: None for i in range(jobs)}
    startups = collections.Counter()
    while workers:
        time.sleep(0.5)
        for i in list(workers):
            proc, out_path, log = workers[i]
            rc = proc.poll()  # before reading, so a finished worker's last lines are read
            for r in tails[i].read():
                last_progress[i] = time.time()
                if r["ev"] == "begin":
                    begun[i] = r
                elif r["ev"] == "result":
                    results.setdefault(r["op"], []).append(r)
                    begun[i] = None
                elif r["ev"] == "done":
                    pending[i].remove(r["op"])
                    if progress:
                        progress(r["op"], results.get(r["op"], []))
            hung = rc is None and time.time() - last_progress[i] > hang_s
            if rc is None and not hung:
                continue
            if hung:
                proc.kill()
                proc.wait()
            log.close()
            del workers[i]
            if not pending[i]:
                continue
            # The worker died or hung on `begun[i]`, or before its first sample.
            _record_death(
                results,
                crash_records,
                crashed[i],
                pending[i],
                begun[i],
                rc,
                hung,
                hang_s,
                os.path.join(workdir, f"worker{i}.log"),
                startups,
                i,
            )
            begun[i] = None
            if os.path.exists(out_path):
                os.remove(out_path)
            tails[i] = _RecordTail(out_path)
            last_progress[i] = time.time()
            if pending[i]:
                workers[i] = _start_worker(workdir, i, pending[i], config, crashed[i])
    return results, crash_records


def repro(key, kind, dtype_name, index):
    """Runs one sample in this process (CPU fallback off) and returns its
    outcome: `python tests/opinfo/harness.py --repro KEY KIND DTYPE INDEX`."""
    torch_tpu.cpu_fallback(False)
    torch.set_float32_matmul_precision("highest")
    op = opinfos()[key]
    item = _unit_inputs(op, kind, dtype_name)[int(index)]
    print(f"{key} {kind} {dtype_name} sample {index}:", getattr(item, "summary", lambda: item)(), flush=True)
    return _run_one(key, op, kind, dtype_name, item)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "--repro":
        print(repro(*sys.argv[2:]))
    else:
        print(__doc__)
