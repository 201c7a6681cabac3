"""`torch.compile` on tpu: backend "tpu".

Dynamo captures FX graphs; AOTAutograd turns them into functional ATen
forward and backward graphs; each graph runs through the same kernels and
lowerings as eager, recorded DeferAndFuse-style into ONE StableHLO program
per graph call, which the shared compilation cache (memory, then disk)
compiles once per input shapes. So compiled code can never disagree with
eager about what an op means.

`torch.compile(model)` with no backend named picks "tpu" when the example
inputs live on tpu and Inductor otherwise.
"""

import functools

import torch

from . import _C, precision

_stats = {"graphs_compiled": 0, "graph_calls": 0}


def stats():
    """Graphs compiled by the tpu backend (each Dynamo graph, forward and
    backward separately) and calls of them."""
    return dict(_stats)


def _run_fused(gm, matmul_precision):
    """A boxed callable that runs `gm` as one fused program per call."""

    def run(args):
        _stats["graph_calls"] += 1
        previous_mode = _C._get_eager_mode()
        previous_precision = _C._get_matmul_precision()
        _C._flush("graph_boundary")  # eager work so far runs as its own program (no wait)
        _C._set_eager_mode("defer_and_fuse")
        _C._set_matmul_precision(matmul_precision)
        try:
            out = gm(*args)
        finally:
            _C._flush("graph")
            _C._set_eager_mode(previous_mode)
            _C._set_matmul_precision(previous_precision)
        return out

    run._boxed_call = True
    return run


def _graph_compiler(gm, example_inputs):
    _stats["graphs_compiled"] += 1
    # The float32 matmul precision in force when the graph was compiled.
    return _run_fused(gm, precision.get_matmul_precision())


@functools.lru_cache(None)
def _aot_backend():
    from torch._dynamo.backends.common import aot_autograd

    # No decomposition table: the graphs keep the ATen ops eager uses, each
    # with its own lowering (composite ops were already decomposed by the
    # dispatcher while tracing).
    return aot_autograd(fw_compiler=_graph_compiler, bw_compiler=_graph_compiler)


def tpu_backend(gm, example_inputs):
    """The "tpu" torch.compile backend."""
    return _aot_backend()(gm, example_inputs)


def _on_tpu(example_inputs):
    return any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in example_inputs)


def device_aware_backend(gm, example_inputs):
    """Default backend: tpu for graphs whose inputs are on tpu, Inductor otherwise."""
    if _on_tpu(example_inputs):
        return tpu_backend(gm, example_inputs)
    from torch._dynamo import lookup_backend

    return lookup_backend("inductor")(gm, example_inputs)


_original_compile = torch.compile


@functools.wraps(_original_compile)
def _compile(*args, **kwargs):
    backend = kwargs.get("backend", "inductor")
    if backend == "tpu":  # also registered by name through the torch_dynamo_backends entry point
        kwargs["backend"] = tpu_backend
    elif backend == "inductor" and not kwargs.get("mode") and not kwargs.get("options"):
        # Only the untouched default (Inductor, no mode/options) is redirected.
        kwargs["backend"] = device_aware_backend
    return _original_compile(*args, **kwargs)


def install():
    # Importing torch._dynamo here would cost every `import torch_tpu` seconds;
    # Dynamo finds the "tpu" backend through our entry point when asked.
    torch.compile = _compile
