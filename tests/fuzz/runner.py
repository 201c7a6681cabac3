"""Runs fuzz calls on CPU and on tpu in each mode, compares them, and keeps
a crash or a hang to the one call it happened in.

A worker process (`python -m fuzz.runner --worker SEED START STOP`) runs a
range of calls and prints one JSON line before each (call, mode) it starts
and one with its verdict after; the parent runs the calls in batches of
workers with a timeout each. A worker that dies (a segfault, an abort) or
runs past its timeout leaves a started line without a verdict: that call is
a crash or a hang in that mode, and a fresh worker goes on with the next.

Verdicts of one call in one mode, against CPU on the same inputs:
- same_value: both computed; equal values, shapes and dtypes (the dtype's
  tolerance, NaN equal to NaN);
- same_type: both raised, the same exception type, or a difference listed
  in ALLOWED_DIFFERENCES with its reason (one of which computes where CPU
  raises: integer division by zero, as CUDA does);
- other_type: both raised, different types;
- raised: tpu raised where CPU computes;
- silent: tpu computed where CPU raises, or computed other values;
- late: tpu raised a check CPU makes at the call only at a later sync or
  read (DeferAndFuse must raise at the call that made the error);
- crash, hang: the worker died or stalled in the call.
"""

import json
import os
import subprocess
import sys
import traceback
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

MODES = ("strict", "defer_and_fuse", "compiled")
VERDICTS = ("same_value", "same_type", "other_type", "raised", "silent", "late", "crash", "hang")

# Exception types tpu may raise where CPU raises another, as CUDA does.
ALLOWED_DIFFERENCES = {
    "index_value": (
        "an error in the values (an index out of range, binary_cross_entropy's input outside [0, 1]): CUDA finds "
        "it in a device-side assert and raises RuntimeError at a later synchronization; tpu raises IndexError or "
        "RuntimeError at the op or the next host read (docs/modes.md)"
    ),
    "device_mix": (
        "a tensor on the CPU among tpu tensors: CUDA raises RuntimeError (Expected all tensors to be on the "
        "same device) where CPU, holding every tensor, computes"
    ),
    "out_of_memory": (
        "an allocation that cannot fit: CUDA raises torch.OutOfMemoryError where CPU's allocator raises RuntimeError"
    ),
    "convolution_types": (
        "a convolution whose input dtype is not its weight's: CUDA's cuDNN path checks the types first "
        "(RuntimeError: Input type ... and weight type ... should be the same), as tpu does; CPU's slow kernel "
        "raises NotImplementedError for the input's dtype first"
    ),
    "integer_division_by_zero": (
        "an integer divided by zero (a bool divisor holding False): CPU raises ZeroDivisionError, CUDA's kernels "
        "compute without a check, as XLA's division does (a truncated quotient by 0 is -1, a remainder by 0 the "
        "dividend)"
    ),
    "compiled_like_cpu": (
        "compiled: torch.compile on CPU (backend='aot_eager') raises the same type (or computes the same values), "
        "from the meta kernels and decompositions Dynamo traces with, as the tpu backend does"
    ),
}

# Values tpu may compute where CPU computes others, each with its reason.
ALLOWED_VALUE_DIFFERENCES = {
    "welford_mean": (
        "var_mean's mean of an input holding an infinity: CPU's and CUDA's Welford update gives NaN or the "
        "infinity depending on where it falls in their order of accumulation; tpu gives mean()'s infinity"
    ),
    "gelu_of_infinity": (
        "gelu of +-inf: CPU's vectorized kernel gives NaN, its scalar path and CUDA inf for +inf; tpu gives +-inf"
    ),
    "padded_nonfinite_weight": (
        "a convolution whose weights hold NaN or inf: whether the zero padding is multiplied by the weights "
        "(0 * inf is NaN) is the kernel's choice (CPU's im2col does, cuDNN and XLA need not), so border "
        "outputs may be NaN on one side only"
    ),
    "resample_infinity": (
        "interpolation of an input holding inf: an output whose tap weight is exactly 0 is NaN (0 * inf); "
        "which weights round to 0 differs between CPU's float32 index arithmetic and tpu's, so such outputs "
        "may be NaN on one side only (finite inputs agree within tolerance)"
    ),
    "norm_nonfinite_weight": (
        "group_norm with an infinite weight: CPU folds the weight into one scale and shift (inf - inf is NaN); "
        "tpu scales the normalized value (+-inf)"
    ),
}

# CPU's words for errors it finds in the values (an index out of range,
# binary_cross_entropy's input outside [0, 1]): CUDA finds them in its
# kernels and raises at a later synchronization, as tpu may.
VALUE_ERROR_WORDS = (
    "out of bounds",
    "out of range",
    "not in the valid range",
    "between 0 and 1",
    "non-negative",
    "idx < num_embeddings",  # embedding_bag's other CPU check of its indices
)


def _equal_but_for_nan_on_one_side(expected, actual):
    """Equal but where one side is NaN and the other is not."""
    import torch

    if isinstance(expected, tuple) or not isinstance(actual, torch.Tensor) or expected.shape != actual.shape:
        return False
    if expected.dtype != actual.dtype or not expected.is_floating_point():
        return False
    one_side = torch.isnan(actual) != torch.isnan(expected)
    return values_differ(expected, torch.where(one_side, expected, actual)) is None


def _allowed_value_difference(call, expected, actual):
    """The ALLOWED_VALUE_DIFFERENCES entry that explains the difference, or None."""
    import torch

    if call.op == "var_mean" and _welford_mean(call, expected, actual):
        return "welford_mean"
    if call.op == "gelu" and call.mutation == "nan" and isinstance(actual, torch.Tensor):
        inf = torch.isinf(call.args[0].values)
        if inf.shape == expected.shape and values_differ(expected[~inf], actual[~inf]) is None:
            return "gelu_of_infinity"
    if call.op.startswith("conv") and call.mutation == "nan" and _equal_but_for_nan_on_one_side(expected, actual):
        return "padded_nonfinite_weight"
    if call.op == "interpolate" and call.mutation == "nan" and _equal_but_for_nan_on_one_side(expected, actual):
        return "resample_infinity"
    if call.op == "group_norm" and call.mutation == "nan" and isinstance(actual, torch.Tensor):
        differ = (torch.isnan(expected) & torch.isinf(actual)) | (torch.isnan(actual) & torch.isinf(expected))
        if values_differ(expected, torch.where(differ, expected, actual)) is None:
            return "norm_nonfinite_weight"
    return None


def _welford_mean(call, expected, actual):
    """var_mean's outputs equal once CPU's NaN means may be tpu's infinities."""
    import torch

    if call.op != "var_mean" or not isinstance(expected, tuple) or len(expected) != 2:
        return False
    e_mean, a_mean = expected[1], actual[1]
    if not isinstance(a_mean, torch.Tensor) or e_mean.shape != a_mean.shape:
        return False
    relaxed = torch.where(torch.isnan(e_mean) & torch.isinf(a_mean), e_mean, a_mean)
    return values_differ(expected, (actual[0], relaxed)) is None


# ----------------------------------------------------------------- outcomes


def _root_error(e):
    """The user's error under torch.compile's wrappers (TorchRuntimeError from
    fake-tensor tracing, BackendCompilerFailed from a backend); a wrapper with
    no error inside stands for the RuntimeError it subclasses, as Dynamo
    raises it on every device (a device mix it finds itself)."""
    import torch._dynamo.exc as dynamo_exc

    while isinstance(e, dynamo_exc.TorchDynamoException):
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if inner is None:
            return RuntimeError(str(e))
        e = inner
    return e


def _to_cpu(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out.cpu()
    if isinstance(out, (tuple, list)):
        return tuple(_to_cpu(o) for o in out)
    return out


def _error(e, stage):
    e = _root_error(e)
    return {"kind": "error", "type": type(e).__name__, "message": str(e).split("\n")[0][:300], "stage": stage}


def run_cpu(call):
    args = [a.make("cpu") if hasattr(a, "make") else a for a in call.args]
    try:
        return {"kind": "value", "value": _to_cpu(call.fn(*args))}
    except Exception as e:  # noqa: BLE001 - every exception is an outcome
        return _error(e, "call")


def run_tpu(call, mode):
    """The call in one mode: the exception and the stage that raised it
    (call, sync, read), or the values read back."""
    import torch

    import torch_tpu

    args = [a.make("tpu") if hasattr(a, "make") else a for a in call.args]
    stage = "call"
    try:
        if mode == "compiled":
            torch._dynamo.reset()
            out = torch.compile(call.fn, backend="tpu")(*args)
            stage = "sync"
            torch_tpu.sync()  # a graph's assertions (_assert_async) raise here, as on CUDA
            stage = "read"
            return {"kind": "value", "value": _to_cpu(out)}
        with torch_tpu.eager_mode(mode):
            out = call.fn(*args)
            stage = "sync"
            torch_tpu.sync()
        stage = "read"
        return {"kind": "value", "value": _to_cpu(out)}
    except Exception as e:  # noqa: BLE001
        return _error(e, stage)
    finally:
        try:
            torch_tpu.sync()  # a failed flush must not leak into the next call
        except Exception:  # noqa: BLE001
            pass


def run_cpu_compiled(call):
    import torch

    args = [a.make("cpu") if hasattr(a, "make") else a for a in call.args]
    try:
        torch._dynamo.reset()
        return {"kind": "value", "value": _to_cpu(torch.compile(call.fn, backend="aot_eager")(*args))}
    except Exception as e:  # noqa: BLE001
        return _error(e, "call")


# ------------------------------------------------------------------ compare


def values_differ(expected, actual):
    """Why two results differ, or None."""
    import torch
    from reference import TOLERANCES

    if isinstance(expected, tuple) or isinstance(actual, tuple):
        if not (isinstance(expected, tuple) and isinstance(actual, tuple) and len(expected) == len(actual)):
            return f"structure {type(expected).__name__} vs {type(actual).__name__}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            why = values_differ(e, a)
            if why:
                return f"output {i}: {why}"
        return None
    if not isinstance(expected, torch.Tensor) or not isinstance(actual, torch.Tensor):
        return None if expected == actual else f"{actual!r} vs {expected!r}"
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return f"{actual.dtype}{list(actual.shape)} vs CPU {expected.dtype}{list(expected.shape)}"
    real = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(expected.dtype, expected.dtype)
    atol, rtol = TOLERANCES.get(real, (0, 0))
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as e:
        return " ".join(str(e).split("\n")[:4])
    return None


def verdict(call, mode, expected, actual, cpu_compiled=None):
    """(verdict, allowed difference or "", detail)."""
    tensors = [a for a in call.args if hasattr(a, "make")]
    on_cpu = [a for a in tensors if a.stays_on_cpu and not a.cpu_ok]
    mixed = on_cpu and any(not a.stays_on_cpu for a in tensors)
    if mixed and expected["kind"] == "value":
        # CUDA raises for the mix; CPU, holding every tensor, computes.
        expected = {"kind": "error", "type": "RuntimeError", "message": "device mix", "stage": "call"}
        allowance = "device_mix"
    else:
        allowance = ""
    if actual["kind"] == "value":
        if expected["kind"] == "error":
            detail = f"tpu computed; CPU raised {expected['type']}: {expected['message']}"
            if "ZeroDivisionError" in expected["message"]:
                return "same_type", "integer_division_by_zero", detail
            if mode == "compiled" and cpu_compiled is not None and not allowance:
                # A decomposition Dynamo traces through may skip a check the
                # eager kernel makes; then torch.compile on CPU computes too.
                like = cpu_compiled()
                if like["kind"] == "value" and values_differ(like["value"], actual["value"]) is None:
                    return "same_value", "compiled_like_cpu", detail
            return "silent", "", detail
        why = values_differ(expected["value"], actual["value"])
        allowed = why and _allowed_value_difference(call, expected["value"], actual["value"])
        if allowed:
            return "same_value", allowed, why
        if why and mode == "compiled" and cpu_compiled is not None:
            # PyTorch's decompositions (uint8 interpolation) round otherwise than
            # its eager CPU kernels; torch.compile on CPU computes what tpu does.
            like = cpu_compiled()
            if like["kind"] == "value" and values_differ(like["value"], actual["value"]) is None:
                return "same_value", "compiled_like_cpu", why
        return ("silent", "", why) if why else ("same_value", "", "")
    detail = f"tpu raised {actual['type']} at {actual['stage']}: {actual['message']}"
    value_error = call.value_error or (
        expected["kind"] == "error" and any(w in expected["message"] for w in VALUE_ERROR_WORDS)
    )
    if expected["kind"] == "value":
        if call.value_error and actual["type"] in ("IndexError", "RuntimeError"):
            return "same_type", "index_value", detail
        if mode == "compiled" and cpu_compiled is not None and actual["type"] == cpu_compiled().get("type"):
            return "same_type", "compiled_like_cpu", detail  # a meta kernel refuses what the CPU kernel takes
        return "raised", "", detail + "; CPU computes"
    detail += f"; CPU raised {expected['type']}: {expected['message']}"
    if actual["stage"] != "call" and not value_error:
        # A compiled graph may check values where eager checks dtypes (one_hot's
        # decomposition asserts its class values): CPU's compiled graph raises then.
        if mode == "compiled" and cpu_compiled is not None and actual["type"] == cpu_compiled().get("type"):
            return "same_type", "compiled_like_cpu", detail
        return "late", "", detail
    if actual["type"] == expected["type"]:
        return "same_type", allowance, detail
    if value_error and {actual["type"], expected["type"]} <= {"IndexError", "RuntimeError"}:
        return "same_type", "index_value", detail
    if (
        expected["type"] == "NotImplementedError"
        and actual["type"] == "RuntimeError"
        and "and weight type" in actual["message"]
    ):
        return "same_type", "convolution_types", detail
    if actual["type"] == "OutOfMemoryError" and "allocate" in expected["message"]:
        return "same_type", "out_of_memory", detail
    if mode == "compiled" and cpu_compiled is not None:
        like = cpu_compiled()
        if like["kind"] == "error" and like["type"] == actual["type"]:
            return "same_type", "compiled_like_cpu", detail
    return "other_type", "", detail


# ------------------------------------------------------------------- worker


def worker(seed, start, stop, modes):
    """Runs calls [start, stop), one JSON line per event on stdout."""
    import torch

    import torch_tpu  # noqa: F401
    from fuzz.calls import make_call

    warnings.filterwarnings("ignore")
    torch.set_float32_matmul_precision("highest")  # CPU's float32 matmuls, as the suite compares
    # Dynamo times each new guard set after a cache flush, for its logs only:
    # a third of compiling a one-op graph.
    torch._dynamo.guards.profile_guard_manager = lambda *args: 0.0
    inject = int(os.environ.get("TORCH_TPU_FUZZ_CRASH_AT", "-1"))  # the runner's own test

    def emit(record):
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    for index in range(start, stop):
        call = make_call(seed, index)
        torch.manual_seed(index)
        expected = run_cpu(call)
        for mode in modes:
            emit({"call": index, "mode": mode, "started": True})
            if index == inject:
                os.kill(os.getpid(), 11)
            try:
                actual = run_tpu(call, mode)
                v, allowed, detail = verdict(call, mode, expected, actual, lambda call=call: run_cpu_compiled(call))
            except Exception:  # noqa: BLE001 - a defect of the comparison itself is reported, not hidden
                v, allowed, detail = "silent", "", "runner error: " + traceback.format_exc(limit=3)
            emit({"call": index, "mode": mode, "verdict": v, "allowed": allowed, "detail": detail})


# ------------------------------------------------------------------- parent


class Report:
    def __init__(self, seed, calls, modes):
        self.seed, self.calls, self.modes = seed, calls, modes
        self.results = {}  # (call, mode) -> (verdict, allowed, detail)

    def counts(self, mode):
        return Counter(v for (_, m), (v, _, _) in self.results.items() if m == mode)

    def failures(self, verdicts=("other_type", "raised", "silent", "late", "crash", "hang")):
        rows = [(c, m, v, d) for (c, m), (v, _, d) in sorted(self.results.items()) if v in verdicts]
        return rows

    def allowed(self):
        return Counter(a for (_, a, _) in self.results.values() if a)

    def agreement(self, mode):
        """Same exception type, over the calls where CPU or tpu raised."""
        c = self.counts(mode)
        raised = c["same_type"] + c["other_type"] + c["raised"] + c["late"]
        return c["same_type"] / raised if raised else 1.0

    def table(self):
        from fuzz.calls import make_call

        head = ["mode", "calls", "same type", "same value", "other type", "raised (CPU computes)"]
        head += ["silent", "late", "crashes", "hangs", "type agreement"]
        lines = [f"fuzz: {self.calls} calls, seed {self.seed}", " | ".join(head)]
        for mode in self.modes:
            c = self.counts(mode)
            row = [mode, str(sum(c.values())), str(c["same_type"]), str(c["same_value"]), str(c["other_type"])]
            row += [str(c["raised"]), str(c["silent"]), str(c["late"]), str(c["crash"]), str(c["hang"])]
            row.append(f"{100 * self.agreement(mode):.2f}%")
            lines.append(" | ".join(row))
        allowed = self.allowed()
        if allowed:
            lines.append("allowed differences:")
            reasons = {**ALLOWED_DIFFERENCES, **ALLOWED_VALUE_DIFFERENCES}
            for name, n in sorted(allowed.items()):
                lines.append(f"  {name}: {n} ({reasons[name]})")
        for c, m, v, d in self.failures():
            lines.append(f"{v} in {m}: {make_call(self.seed, c).describe()}: {d}")
        return "\n".join(lines)


def _run_range(seed, start, stop, modes, timeout, report, env):
    """Runs calls [start, stop) in workers, a fresh one after each crash or hang."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while start < stop:
        cmd = [sys.executable, "-m", "fuzz.runner", "--worker", str(seed), str(start), str(stop), ",".join(modes)]
        proc = subprocess.Popen(cmd, cwd=here, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            stalled = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            stalled = True
        started = None
        for line in out.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            key = (record["call"], record["mode"])
            if record.get("started"):
                started = key
            else:
                report.results[key] = (record["verdict"], record["allowed"], record["detail"])
                started = None
        if started is None:
            if proc.returncode == 0 and not stalled:
                return
            started = (start, modes[0])  # died before its first call
        kind = "hang" if stalled else "crash"
        report.results[started] = (kind, "", f"worker {'stalled' if stalled else 'died'} (rc {proc.returncode})")
        start = started[0] + 1


def run(seed, calls, batch=100, workers=2, timeout=300, modes=MODES, env=None):
    """Runs `calls` calls of stream `seed` in batches of `batch` calls,
    `workers` batches at a time; a worker running past `timeout` seconds
    is a hang in the call it was in."""
    report = Report(seed, calls, modes)
    env = dict(os.environ if env is None else env)
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = tests + os.pathsep + env.get("PYTHONPATH", "")
    ranges = [(s, min(s + batch, calls)) for s in range(0, calls, batch)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(_run_range, seed, s, e, modes, timeout, report, env) for s, e in ranges]:
            f.result()
    return report


def main(argv):
    if argv and argv[0] == "--worker":
        worker(int(argv[1]), int(argv[2]), int(argv[3]), tuple(argv[4].split(",")))
        return 0
    raise SystemExit("usage: python scripts/fuzz_ops.py --calls N --seed S")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
