"""torch.profiler and "why did this compile?" for tpu (docs/profiling.md).

**torch.profiler.** With `ProfilerActivity.PrivateUse1` among the
activities, every program the device runs is a device event named
`tpu <program>`: an eager op's program (named by the op), a DeferAndFuse
flush (`fused N ops (cut: R)`, R the flush's reason, its ops in the event's
args), a compiled graph (`GPT.forward backward (N ops)`: the function Dynamo
compiled). Each event's duration is device time: from when the program
could start (launched, and the earlier programs that ended before it done)
to its PJRT completion event; its args hold bytes in and out and how its
executable was found (`compiled`, `disk cache`, `cache hit`, or `replayed`
for a captured program run again without any lookup). The events are
linked to the host op that launched them, so `key_averages()` shows their
time in the tpu columns of that op too, and `export_chrome_trace()` writes
them on the device's own row (Perfetto opens it).

The route is PyTorch's PrivateUse1 activity profiler (a Kineto child
profiler, csrc/device/program_profiler.h). With no profiler running, a
launch costs one relaxed atomic load (`programs_profiled()` says whether
one records).

The PJRT profiler extension (PJRT_Extension_Type_Profiler), where a plugin
has one, would add the plugin's own timeline; the XLA:CPU plugin has none
(its extensions: layouts, FFI, memory descriptions, phase compile), so the
device events above are the whole device timeline there.

**Compile log.** `TORCH_TPU_LOG_COMPILES=1`, `set_compile_log(True)` or
`with explain_compiles():` print one line to stderr for each new program
after a call site's first (a Strict op, a DeferAndFuse flush of the same
ops, a compiled graph), saying what differs from the site's nearest earlier
variant: a dimension (`self dim 1: 32 -> 48`), a dtype, a Python number
baked into the program, strides, inputs sharing storage. A site with more
than `variants_warning` variants (TORCH_TPU_COMPILE_VARIANTS_WARN, default
8) warns once while the log is on.
"""

import contextlib
import sys
import threading

import torch

from . import _C

__all__ = ["programs_profiled", "program_events", "set_compile_log", "compile_log_enabled", "explain_compiles"]


def programs_profiled():
    """Whether a torch.profiler session records tpu programs now."""
    return _C._programs_profiled()


def program_events(prof):
    """The tpu program events of a finished torch.profiler session."""
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def set_compile_log(enabled=True, variants_warning=None):
    """Turns the compile log on or off; `variants_warning`: warn when a call
    site has more variants than this (0 never; default: unchanged)."""
    _, current = _C._compile_log()
    _C._set_compile_log(bool(enabled), current if variants_warning is None else int(variants_warning))


def compile_log_enabled():
    return _C._compile_log()[0]


@contextlib.contextmanager
def explain_compiles(variants_warning=None):
    """Prints why each program compiled inside the block (set_compile_log)."""
    before = _C._compile_log()
    set_compile_log(True, variants_warning)
    try:
        yield
    finally:
        _C._set_compile_log(*before)


# ---- torch.compile's side (torch_tpu/compile.py calls these) -----------------


_site = threading.local()


def _note_graph(gm):
    """Called by the tpu backend with Dynamo's graph: what the profiler and
    the compile log call the programs AOTAutograd then compiles from it
    (_current_site)."""
    _site.value = _graph_site(gm, logged=compile_log_enabled())


def _current_site():
    return getattr(_site, "value", None)


def _graph_site(gm, logged):
    """A Dynamo graph, as the profiler and the log name it: its function and
    frame (recompiles of one function share them); with `logged`, also its
    inputs' names as Dynamo's guards print them (L['x']) and Dynamo's reason
    when this is a recompile."""
    from torch._guards import CompileContext, TracingContext

    compile_id = CompileContext.current_compile_id()
    frame = "?" if compile_id is None else compile_id.frame_id
    try:
        code = TracingContext.get_traced_code()
        function = getattr(code[0], "co_qualname", code[0].co_name) if code else None
    except (AttributeError, RuntimeError, IndexError):
        function = None
    frame = f"{function} (frame {frame})" if function else f"frame {frame}"
    if not logged:
        return {"frame": frame, "function": function, "names": []}
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)  # a property in newer torch, a method before
        names.append(str(name() if callable(name) else name) if name is not None else node.name)
    reason = None
    if compile_id is not None and getattr(compile_id, "frame_compile_id", 0):
        try:
            from torch._dynamo.utils import get_metrics_context

            reason = getattr(get_metrics_context(), "_metrics", {}).get("recompile_reason")
        except ImportError:
            pass
    return {"frame": frame, "function": function, "names": names, "reason": reason}


def _trace_started(site, kind):
    """Before a graph's trace: names its program for the profiler; returns
    the counters its log line compares, while the log is on (else None)."""
    function = site.get("function") if site else None
    _C._name_next_graph(f"{function} {kind}" if function else "")
    if not compile_log_enabled():
        return None
    m = _C._metrics()
    return m["compiles"], m["cache_misses"]


def _trace_ended(started, site, kind, gm, args):
    """Logs the graph's new program, if its trace made one."""
    if started is None:
        return
    m = _C._metrics()
    if m["cache_misses"] == started[1]:
        return  # its program was in memory already
    how = "compiled" if m["compiles"] > started[0] else "loaded from the disk cache"
    site = site if site is not None else {"frame": "graph", "names": []}
    frame, names = site["frame"], site["names"]
    reason = site.pop("reason", None)  # Dynamo's, for the first program of its new graph only
    args = list(args)
    if kind != "forward" or len(names) != len(args):
        # AOT's inputs (primals_1, tangents_1) have no names of the user's, and
        # a dynamic graph's size inputs shift their positions: the tensors, in order.
        args = [a for a in args if isinstance(a, torch.Tensor)]
        names = [f"{kind} input {k}" for k in range(len(args))]
    what = f"compiled graph of {frame}, {kind}"
    line = _C._log_graph_compile(f"{frame} {kind}", what, how, args, names)
    if line and reason:
        sys.stderr.write(f"[torch_tpu compile]   Dynamo recompiled it: {reason}\n")
