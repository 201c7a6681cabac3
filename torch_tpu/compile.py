"""`torch.compile` on tpu: backend "tpu".

Dynamo captures FX graphs; AOTAutograd turns them into functional ATen
forward and backward graphs; each graph runs through the same kernels and
lowerings as eager, recorded DeferAndFuse-style into ONE StableHLO program
per graph call, which the shared compilation cache (memory, then disk)
compiles once per input shapes. So compiled code can never disagree with
eager about what an op means.

`torch.compile(model)` with no backend named picks "tpu" for graphs that
take or make tpu tensors and Inductor otherwise; options naming Inductor's
tpu code generator ({"tpu_backend": "pallas"}) pick Inductor's Pallas path.
"""

import collections
import functools
import operator
import warnings

import torch
import torch.utils._pytree as pytree

from . import _C, precision
from . import profiler as _profiler

# How many captured programs one graph keeps (one per input signature:
# sizes of a graph Dynamo made dynamic, strides, storage sizes, aliasing...);
# past it, the least recently replayed one is dropped, and the call is traced
# (correct, only slower) and captured in its place. A dynamic graph may run
# at many shapes in one step, each a program of its own: an audio codec's
# convolution block, one graph for every layer's channels and length
# (EnCodec's forward calls one at 30 shapes, Mimi's at 10).
MAX_CAPTURES_PER_GRAPH = 64

_stats = {"graphs_compiled": 0, "graph_calls": 0, "graph_replays": 0, "graph_traces": 0, "recompiles": 0}
_trace_reasons = collections.Counter()  # why a graph call was traced again instead of replayed
_recompile_reasons = collections.Counter()  # Dynamo's, from its guard failures


def stats():
    """torch.compile on tpu: graphs_compiled (Dynamo graphs handed to the tpu
    backend; forward and backward count separately), graph_calls (calls of
    graphs that run on tpu: one with no tpu tensor in or out, such as an
    empty graph Dynamo leaves between two breaks, runs as Python and is
    not counted, as is one that only copies tpu tensors to the host and
    computes on CPU),
    graph_replays (calls that ran the captured program directly),
    graph_traces (calls that ran the graph's ops to record its program),
    recompiles (Dynamo recompiled a function on tpu) and, per reason,
    trace_reasons and recompile_reasons."""
    out = dict(_stats)
    out["trace_reasons"] = dict(_trace_reasons)
    out["recompile_reasons"] = dict(_recompile_reasons)
    return out


def reset_stats():
    for k in _stats:
        _stats[k] = 0
    _trace_reasons.clear()
    _recompile_reasons.clear()


def _device_of(args):
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "tpu":
            return a.device.index or 0
    return None


def _numbers_read_from_data(gm):
    """Whether `gm` binds symbols whose values come from tensor data (an
    `.item()`, a nonzero count): numbers such a graph returns may differ
    between calls with the same input signature."""
    return any(node.meta.get("unbacked_bindings") for node in gm.graph.nodes)


def _copy_target_device(node):
    """The device a graph node's `aten._to_copy` copies to; None for another
    op, or a copy that keeps its input's device (a dtype conversion)."""
    if node.target is not torch.ops.aten._to_copy.default:
        return None
    device = node.kwargs.get("device")
    return torch.device(device) if device is not None else None


def _holds_tpu_tensor(value):
    return any(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in pytree.tree_leaves(value))


def _only_reads_to_host(gm):
    """Whether `gm` only copies tpu tensors to CPU and computes on the host:
    every op that reads a tpu tensor is a `.to("cpu")` and no op makes one
    (VITS's download that Dynamo put in a graph of its own between two
    breaks; Inkling2's vision tower downloads its grid sizes and computes
    its patch offsets from them on CPU). A host read, with no device work
    to capture or replay: the graph runs as Python."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]

    def to_host(node):
        device = _copy_target_device(node)
        return device is not None and device.type == "cpu"

    for node in ops:
        if "val" not in node.meta or _holds_tpu_tensor(node.meta["val"]):
            return False
        if not to_host(node) and any(_holds_tpu_tensor(a.meta.get("val")) for a in node.all_input_nodes):
            return False
    return bool(ops)


def _host_inputs_returned(gm):
    """{output position: input position} for the outputs that are the
    graph's own non-tpu tensor inputs, returned as they are (LightGlue's
    CPU mask passed between two graph breaks, a host prologue's result): a
    replay returns the call's own input there, as running the graph
    does."""
    positions = {n: k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    returned = {}
    for i, node in enumerate(results):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if node in positions and isinstance(value, torch.Tensor) and value.device.type != "tpu":
            returned[i] = positions[node]
    return returned


def _debug_checks(outputs, kind):
    """Debug mode for a compiled graph, as for an eager op: the call waits
    for the program, so an out-of-range index it found raises here, at the
    call; with check_nans on, a floating output holding NaN or Inf raises,
    naming the graph and the output."""
    _C._synchronize(-1)  # raises the program's pending index checks
    if not _C._check_nans():
        return
    for k, t in enumerate(outputs):
        # On the host, as eager Debug checks an op's results (debug_checks.cpp).
        if (
            isinstance(t, torch.Tensor)
            and t.device.type == "tpu"
            and t.numel()
            and (t.is_floating_point() or t.is_complex())
            and not bool(torch.isfinite(t.cpu()).all())
        ):
            raise RuntimeError(
                f"tpu debug (TORCH_TPU_CHECK_NANS): a compiled {kind} graph produced NaN or Inf "
                f"in output {k} of {len(outputs)}"
            )


def _run_fused(gm, kind="forward"):
    """A boxed callable that runs `gm` as one program per call.

    The first call (per input signature) runs the graph's ops through the
    eager kernels, recorded into one pending program, and captures it; later
    calls bind their inputs to that program and run it, lowering nothing.

    A graph Dynamo made dynamic (it marks a dimension dynamic once it sees it
    change) also returns numbers: sizes the backward graph takes as inputs.
    They are functions of the input sizes and numbers, which a replay matches
    exactly, so each capture keeps the ones its trace returned.

    A call runs at the float32 matmul precision in force for its thread
    when it is made (torch.tpu.precision, torch.set_float32_matmul_precision),
    as an eager op would: each capture is made at one, and a call at another
    traces again.
    """
    captures = []  # (its key_of(args), capture, {output position: number}), most recently replayed first
    # The graph's integer and bool inputs (a dynamic graph's sizes): a
    # capture's signature holds them by value, so a call replays only
    # captures made with the same ones, and the others are not tried.
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    number_inputs = [
        k for k, n in enumerate(placeholders) if isinstance(n.meta.get("val"), (bool, int, torch.SymInt, torch.SymBool))
    ]
    log_site = _profiler._current_site()  # the profiler's and compile log's name for it (torch_tpu/profiler.py)
    out_type = [None]  # the graph's own return container
    numbers_are_data = _numbers_read_from_data(gm)
    host_read = _only_reads_to_host(gm)
    inputs_returned = _host_inputs_returned(gm)
    # A graph with no tpu input that makes tpu tensors (Longformer's masks
    # between two graph breaks) is captured on the device it makes them on.
    factory_device = next(
        (
            v.device.index or 0
            for n in gm.graph.nodes
            if isinstance(v := n.meta.get("val"), torch.Tensor) and v.device.type == "tpu"
        ),
        None,
    )

    def trace(args, device, key):
        _stats["graph_traces"] += 1
        # Both settings are the calling thread's own: other threads keep
        # theirs while this graph traces. The precision is the one in force
        # now (the thread's own where it has one), made explicit so that
        # the trace keeps it whatever the graph's code does.
        previous_mode = _C._get_eager_mode()
        _C._set_eager_mode("defer_and_fuse")
        outer_precision = _C._set_thread_matmul_precision(key[1].value)
        cpu_versions = [(a, a._version) for a in args if isinstance(a, torch.Tensor) and a.device.type == "cpu"]
        logged = _profiler._trace_started(log_site, kind)
        try:
            _C._capture_begin(device)
            try:
                out = gm(*args)
            except BaseException:
                _C._capture_abort()
                raise
            flat = list(out) if isinstance(out, (list, tuple)) else [out]
            out_type[0] = type(out) if isinstance(out, (list, tuple)) else None
            numbers = (
                {} if numbers_are_data else {i: v for i, v in enumerate(flat) if isinstance(v, (bool, int, float))}
            )
            tensors = [None if i in numbers or i in inputs_returned else v for i, v in enumerate(flat)]
            capture, why = _C._capture_end(device, args, tensors)
            if capture is not None and any(t._version != v for t, v in cpu_versions):
                # CPU work inside the graph (an optimizer's CPU step counts
                # incremented in place) is not part of the program.
                capture, why = None, "the graph writes CPU tensors"
        finally:
            _C._set_eager_mode(previous_mode)
            _C._set_thread_matmul_precision(outer_precision)
        _profiler._trace_ended(logged, log_site, kind, gm, args)
        if capture is not None:
            if len(captures) >= MAX_CAPTURES_PER_GRAPH:
                captures.pop()
            captures.insert(0, (key, capture, numbers))
        else:
            _trace_reasons["not replayable: " + why] += 1
        return out

    def run(args):
        device = _device_of(args)
        if device is None:
            device = factory_device
        if device is None or host_read:  # nothing of the graph is on tpu, or it only downloads and computes on CPU
            return gm(*args)
        _stats["graph_calls"] += 1
        _C._flush("graph_boundary")  # eager work so far runs as its own program (no wait)
        key = key_of(args)
        out = replay(args, key)
        if out is None:
            if captures:
                _trace_reasons["inputs changed: " + mismatch(key)] += 1
            out = trace(args, device, key)
        if _C._get_eager_mode() == "debug":
            _debug_checks(list(out) if isinstance(out, (list, tuple)) else [out], kind)
        return out

    def key_of(args):
        """What a capture must share with a call to be replayed for it: the
        graph's number inputs and the matmul precision in force."""
        return tuple(args[k] if k < len(args) else None for k in number_inputs), precision.current_precision()

    def mismatch(key):
        """Why the call matched no capture: the most recently replayed one's
        mismatch among those with its key, else the first number or the
        precision that differs from that capture's."""
        for captured_key, capture, _ in captures:
            if captured_key == key:
                return capture.mismatch
        (captured_numbers, captured_precision), (numbers_in, precision_in) = captures[0][0], key
        if captured_numbers == numbers_in:
            return f"matmul precision changed: {captured_precision.name} -> {precision_in.name}"
        k = next(k for k, (a, b) in zip(number_inputs, zip(numbers_in, captured_numbers)) if a != b)
        return f"input {k}: value changed"

    def replay(args, key):
        for position, (captured_key, capture, numbers) in enumerate(captures):
            if captured_key != key:
                continue
            out = capture.replay(args)
            if out is not None:
                _stats["graph_replays"] += 1
                for i, v in numbers.items():
                    out[i] = v
                for i, k in inputs_returned.items():
                    out[i] = args[k]
                if position:
                    captures.insert(0, captures.pop(position))
                return out_type[0](out) if out_type[0] is not None else out[0]
        return None

    run._boxed_call = True
    run.captured = lambda: bool(captures)
    return run


# Dispatch keys whose kernels serve tpu tensors besides our own.
_SHARED_KERNEL_KEYS = (
    "PrivateUse1",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


def _ops_without_tpu_kernel(gm):
    missing = []
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        name = target.name()
        if not any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _SHARED_KERNEL_KEYS):
            if name not in missing:
                missing.append(name)
    return missing


def _check_lowerings(gm):
    """Ops with no tpu kernel fail here, when the graph is compiled, naming
    them; with the CPU fallback on they run on CPU inside the graph, which
    then runs as the programs before and after them (never replayed)."""
    missing = _ops_without_tpu_kernel(gm)
    if not missing:
        return
    names = ", ".join(missing)
    if not _C._cpu_fallback_enabled():
        raise NotImplementedError(
            f"torch.compile on tpu: the graph uses {names}, which has no tpu lowering. Enable the CPU fallback "
            "with torch_tpu.cpu_fallback(True) or TORCH_TPU_CPU_FALLBACK=1 to run it on CPU (the graph is split "
            "around it), or keep it out of the compiled region."
        )
    warnings.warn(
        f"torch.compile on tpu: {names} has no tpu lowering and runs on CPU; the graph is split around "
        "it into several programs",
        stacklevel=2,
    )


def _draws_on_host(node):
    """Whether graph node `node` draws random numbers into a CPU tensor."""
    value = node.meta.get("val")
    return (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in node.target.tags
        and isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
    )


def _host_steps(graph, inputs_on_host, draws):
    """The CPU work of `graph` a host prologue can do (see _host_prologue):
    (on_host, reads_inputs, steps). `draws`: random draws on the host are
    part of it, redone on each call."""
    on_host = dict(inputs_on_host)
    reads_inputs = set(on_host)  # host nodes whose value may differ between calls
    steps = []  # (node, target, args, kwargs), in graph order
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target._schema.is_mutable:
            continue
        draw = torch.Tag.nondeterministic_seeded in node.target.tags
        if draw and not (draws and _draws_on_host(node)):
            continue
        inputs = node.all_input_nodes
        value = node.meta.get("val")
        if any(a not in on_host for a in inputs):
            continue
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            continue
        per_call = draw or any(a in reads_inputs for a in inputs)
        if per_call and value.numel() > 1024:
            continue
        if per_call:
            reads_inputs.add(node)
        on_host[node] = ("step", len(steps))
        steps.append((node, node.target, node.args, node.kwargs))
    return on_host, reads_inputs, steps


def _host_prologue(gm):
    """Moves the CPU arithmetic a graph does on its CPU inputs and constants
    alone (DeBERTa's `torch.sqrt(torch.tensor(d) * scale)`, a cache's CPU
    step counter plus one), and on CPU tensors it makes from nothing
    (Idefics3's `torch.ones(shape).to(tpu, bool)` patch mask, LongT5's
    block-distance mask from two aranges), out of the graph, into a prologue
    that runs on the host before each call; the graph takes its results as
    trailing inputs. Left inside, that CPU work and its copy to tpu would
    happen outside the captured program, which then could not replay it.

    Work that reads no graph input is the same on every call: the prologue
    computes it once and returns the same tensors again, whatever their
    size. Work that reads inputs is redone each call, for results up to
    1024 elements, and so are random draws on the host (Informer's sampled
    keys, a CPU `torch.randint` that indexes a tpu tensor), in graph order:
    the CPU generator gives each the numbers eager would. Either every CPU
    draw of the graph moves or none does, so that none is drawn out of
    order.

    Returns (prologue, constant): a function from the graph's original
    inputs to the extra ones, and the positions among those extra inputs
    that never change; or (None, ())."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    inputs_on_host = {
        n: ("input", k)
        for k, n in enumerate(placeholders)
        if isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].device.type == "cpu"
    }
    on_host, reads_inputs, steps = _host_steps(graph, inputs_on_host, draws=True)
    if any(_draws_on_host(node) and node not in on_host for node in graph.nodes):
        on_host, reads_inputs, steps = _host_steps(graph, inputs_on_host, draws=False)
    results = [node for node, *_ in steps if any(user not in on_host for user in node.users)]
    if not results:
        return None, ()
    constant = tuple(k for k, node in enumerate(results) if node not in reads_inputs)
    anchor = placeholders[-1] if placeholders else None
    for k, node in enumerate(results):
        where = graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(node)
        with where:
            placeholder = graph.placeholder(f"_host_prologue_{k}")
        placeholder.meta.update(node.meta)
        node.replace_all_uses_with(placeholder, delete_user_cb=lambda user: user not in on_host)
        anchor = placeholder
    for node, *_ in reversed(steps):
        if not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    computed_once = {}  # the steps that read no input, from the first call

    def prologue(args):
        values = dict(computed_once)
        for node, target, node_args, node_kwargs in steps:
            if node in values:
                continue
            args_now, kwargs_now = torch.fx.node.map_arg(
                (node_args, node_kwargs),
                lambda a: args[on_host[a][1]] if on_host[a][0] == "input" else values[a],
            )
            values[node] = target(*args_now, **kwargs_now)
            if node not in reads_inputs:
                computed_once[node] = values[node]
        return [values[node] for node in results]

    return prologue, constant


def _constants_as_inputs(gm):
    """Turns the tensors a graph module holds (AOTAutograd lifts tensors made
    in user code, `torch.tensor(0.25)` or a tensor built on tpu inside
    forward, into attributes read by get_attr nodes) into trailing graph
    inputs, and returns them. A captured program binds its parameters to the
    graph's inputs; a tensor it reads from anywhere else would make every
    call trace the graph again.

    `lift_fresh_copy` of such a constant, there so that mutating the result
    cannot change the constant, is dropped when the graph does not return
    its result: AOTAutograd's graphs are functional, so inside the graph the
    copy is only read."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = placeholders[-1] if placeholders else None
    constants, const_nodes = [], set()
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = operator.attrgetter(node.target)(gm)
        if not isinstance(value, torch.Tensor):
            continue
        # New placeholders go after the existing ones (first in a graph without any), in order.
        first = next(iter(graph.nodes))
        where = graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(first)
        with where:
            placeholder = graph.placeholder(f"_graph_constant_{len(constants)}")
        placeholder.meta.update(node.meta)
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        constants.append(value)
        const_nodes.add(placeholder)
        anchor = placeholder
    for node in list(graph.nodes):
        if (
            node.op == "call_function"
            and node.target is torch.ops.aten.lift_fresh_copy.default
            and node.args[0] in const_nodes
            and all(user.op != "output" for user in node.users)
        ):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    if constants:
        graph.lint()
        gm.recompile()
    return constants


def _indexes_with_tensors(target):
    """Whether `target` is an advanced-indexing op: self, then a list of
    optional index tensors (`Tensor?[] indices`: index, index_put and their
    in-place and _unsafe_ forms), whose CPU and CUDA kernels accept index
    tensors on the CPU."""
    schema = getattr(target, "_schema", None)
    if schema is None or len(schema.arguments) < 2:
        return False
    indices = schema.arguments[1]
    return indices.name == "indices" and str(indices.type) == "List[Optional[Tensor]]"


# Ops whose result is their input under another name (`.detach()`).
_ALIASES = (torch.ops.aten.detach.default, torch.ops.aten.alias.default)


def _device_reading(user, node):
    """The tpu device on which graph node `user` reads CPU tensor `node`: a
    `_to_copy` to tpu, an index op on a tpu tensor taking `node` as one of
    its indices (CUDA accepts CPU indices), or an alias of `node` that only
    such ops read (VideoMAE's `table.detach().to(tpu)`); None for any other
    use."""
    if user.target in _ALIASES and user.args[0] is node and user.users:
        devices = {_device_reading(alias_user, user) for alias_user in user.users}
        return devices.pop() if len(devices) == 1 and None not in devices else None
    if user.target is torch.ops.aten._to_copy.default:
        device = _copy_target_device(user)
        return device if device is not None and device.type == "tpu" else None
    if _indexes_with_tensors(user.target) and len(user.args) > 1 and isinstance(user.args[1], (list, tuple)):
        indices, rest = user.args[1], [user.args[0], *user.args[2:]]
        value = user.args[0].meta.get("val") if isinstance(user.args[0], torch.fx.Node) else None
        if any(i is node for i in indices) and not any(a is node for a in rest):
            if isinstance(value, torch.Tensor) and value.device.type == "tpu":
                return value.device
    return None


def _host_inputs_copied_to_device(gm):
    """{placeholder position: tpu device} for the graph's CPU inputs that it
    only copies to tpu (`aten._to_copy(x, device="tpu")`; Hugging Face
    caches hold CPU scalar tensors that every forward moves to the model's
    device) or indexes tpu tensors with (SAM's relative positions, built on
    the host by the prologue). Inside a captured program that copy would be
    a host transfer, which splits the recording and stops the graph from
    replaying; made before the program runs, the input arrives on tpu and
    the `_to_copy` only converts its dtype on the device."""
    moved = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for position, node in enumerate(placeholders):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or not node.users:
            continue
        devices = {_device_reading(user, node) for user in node.users}
        if len(devices) == 1 and None not in devices:
            moved[position] = devices.pop()
    return moved


def _is_collective(node):
    """A c10d collective in a graph (functional collectives and their
    waits, the in-place c10d ops): run by the process group, not lowered."""
    target = node.target
    return (
        node.op == "call_function"
        and isinstance(target, torch._ops.OpOverload)
        and target.namespace in ("_c10d_functional", "c10d")
    )


# Functional collectives tpu_dist's in-program transport runs (the rest,
# and c10d's in-place ops, go through the host transport).
_IN_PROGRAM_COLLECTIVES = {
    "all_reduce",
    "all_reduce_",
    "broadcast",
    "broadcast_",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
}
_HOST_REDUCE_OPS = {"band", "bor", "bxor"}


def _in_program_group(group_name):
    """Whether the named group's tpu backend is tpu_dist with the in-program
    transport (every rank a thread of this process on its own device)."""
    try:
        group = torch._C._distributed_c10d._resolve_process_group(group_name)
        backend = group._get_backend(torch.device("tpu"))
    except (RuntimeError, ValueError):
        return False
    return bool(getattr(backend, "program_devices", None))


def _collectives_run_in_program(gm):
    """Whether every collective of the graph runs in-program, so the whole
    graph can be one program replicated over the group's devices (the
    collectives joining it, csrc/device/collective_kernels.cpp), as a TPU
    runs a compiled step."""
    groups = set()
    for node in gm.graph.nodes:
        if not _is_collective(node):
            continue
        target = node.target
        name = target._schema.name.split("::")[-1]
        if target.namespace != "_c10d_functional":
            return False
        if name == "wait_tensor":
            continue
        if name not in _IN_PROGRAM_COLLECTIVES or not isinstance(node.args[-1], str):
            return False
        if name.startswith("all_reduce") and node.args[1] in _HOST_REDUCE_OPS:
            return False
        if name == "reduce_scatter_tensor" and node.args[1] in _HOST_REDUCE_OPS:
            return False
        groups.add(node.args[-1])
    # One group per program: its devices are the program's replicas.
    return len(groups) == 1 and _in_program_group(groups.pop())


def _split_at_collectives(gm, kind):
    """A graph holding collectives runs as the runs of ops between them,
    each captured and replayed as one program, with the collectives called
    between the programs as eager calls to the process group.

    tpu_dist's collectives are host calls (gloo) or programs of their own
    (the in-program transport), so a collective cannot sit inside a
    captured program; without this split, a collective in a graph made the
    whole graph unreplayable (it ran op by op on every call)."""
    from torch.fx.passes.split_module import split_module

    part = [0]
    previous_was_collective = [False]

    def partition(node):
        collective = _is_collective(node)
        if collective != previous_was_collective[0]:
            part[0] += 1  # a run of collectives, or of ops, begins
            previous_was_collective[0] = collective
        return part[0]

    split = split_module(gm, None, partition, keep_original_order=True)
    for name, sub in list(split.named_children()):
        if any(_is_collective(n) for n in sub.graph.nodes):
            continue
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        runner = _graph_compiler(sub, [n.meta.get("val") for n in placeholders], kind)
        setattr(split, name, _Unboxed(runner))

    def run(args):
        return split(*args)

    run._boxed_call = True
    return run


class _Unboxed(torch.nn.Module):
    """A boxed graph runner (it takes one list) as a split graph's submodule,
    which its parent calls with *args."""

    def __init__(self, boxed):
        super().__init__()
        self.boxed = boxed

    def forward(self, *args):
        return self.boxed(list(args))


def _graph_compiler(gm, example_inputs, kind="forward"):
    if any(_is_collective(n) for n in gm.graph.nodes):
        if not _collectives_run_in_program(gm):
            return _split_at_collectives(gm, kind)
        return _one_program_or_split(gm, example_inputs, kind)
    return _graph_runner(gm, example_inputs, kind)


def _one_program_or_split(gm, example_inputs, kind):
    """A graph whose collectives all run in-program: one replicated program.
    Should its first call not capture (a collective the transport sent to
    the host after all), the graph runs split at its collectives from then
    on. Every rank decides alike: their graphs and groups are the same."""
    whole = _graph_runner(gm, example_inputs, kind)
    current = [whole]

    def run(args):
        out = current[0](args)
        if current[0] is whole and not whole.captured():
            current[0] = _split_at_collectives(gm, kind)
        return out

    run._boxed_call = True
    return run


def _graph_runner(gm, example_inputs, kind):
    _check_lowerings(gm)
    _stats["graphs_compiled"] += 1
    constants = _constants_as_inputs(gm)
    prologue, prologue_constant = _host_prologue(gm)
    moved = _host_inputs_copied_to_device(gm)
    n_inputs = len(example_inputs)
    first_prologue_input = n_inputs + len(constants)
    unchanging = set(range(n_inputs, first_prologue_input)) | {first_prologue_input + k for k in prologue_constant}
    constants_on_device = {}  # constants are copied once, at the first call (here a fake mode may be active)
    run = _run_fused(gm, kind)
    if not constants and not moved and prologue is None:
        return run

    def run_with_constants(args):
        args = list(args) + constants
        if prologue is not None:
            args += prologue(args)  # reads the CPU values, before any is moved
        for position, device in moved.items():
            if position in unchanging:
                if position not in constants_on_device:
                    constants_on_device[position] = args[position].to(device)
                args[position] = constants_on_device[position]
            else:
                args[position] = args[position].to(device, non_blocking=True)
        return run(args)

    run_with_constants._boxed_call = True
    run_with_constants.captured = run.captured
    return run_with_constants


@functools.lru_cache(None)
def _aot_backend():
    from torch._dynamo.backends.common import aot_autograd

    # No decomposition table: the graphs keep the ATen ops eager uses, each
    # with its own lowering (composite ops were already decomposed by the
    # dispatcher while tracing).
    # keep_inference_input_mutations: an inference graph that mutates an
    # input (BatchNorm running stats in eval-mode updates, user in-place
    # code) writes it inside the program, whose replays donate the old
    # buffer, instead of an eager copy_ after the graph.
    # min_cut_rematerialization_partition (Inductor's choice): the backward
    # program recomputes cheap pointwise ops from fewer saved tensors instead
    # of the forward writing every intermediate out (each saved tensor is a
    # program output, a copy XLA cannot fuse away). Random ops are never
    # recomputed. GPT example: 37 -> 34 ms per compiled training step.
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(
        fw_compiler=_graph_compiler,
        bw_compiler=functools.partial(_graph_compiler, kind="backward"),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )


def _note_recompile():
    """Counts a Dynamo recompile of a function on tpu, with Dynamo's reason
    (the first failed guard). Dynamo records the reason in its metrics
    context while it compiles; there is no public accessor, so a missing
    one is reported as unknown rather than failing the compile."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    if compile_id is None or not getattr(compile_id, "frame_compile_id", 0):
        return
    _stats["recompiles"] += 1
    reason = None
    try:
        from torch._dynamo.utils import get_metrics_context

        reason = getattr(get_metrics_context(), "_metrics", {}).get("recompile_reason")
    except ImportError:
        pass
    _recompile_reasons[reason or "unknown"] += 1


def _floats_an_alpha_would_lose(gm):
    """The symbols of the Python floats a Dynamo graph passes, changing
    between calls, to an op beside an `alpha` (`torch.add(x, s, alpha=3)`).

    AOTAutograd's tensorify_python_scalars pass (torch/fx/passes/
    _tensorify_python_scalars.py) turns the ops that read such a float into
    tensor ops, rebuilding each from its positional arguments alone: the add
    above became `x + s` (torch 2.13; aot_eager and Inductor compute the
    same wrong result)."""
    try:
        from torch.utils._sympy.symbol import SymT, symbol_is_type
    except ImportError:
        return set()
    names = set()
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method") or node.kwargs.get("alpha", 1) == 1:
            continue
        for arg in node.args:
            value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
            if isinstance(value, torch.SymFloat):
                names.update(str(s) for s in value.node._expr.free_symbols if symbol_is_type(s, SymT.FLOAT))
    return names


def _specialize_floats_an_alpha_would_lose(gm):
    """Has Dynamo make such floats constants of the graph, as the pass does
    for an op it cannot rewrite: its analysis restarts with each one
    specialized (a new value recompiles, exactly as eager computes)."""
    names = _floats_an_alpha_would_lose(gm)
    if not names:
        return
    try:
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._dynamo.symbolic_convert import TensorifyState
    except ImportError:
        return
    # Raised whether or not the symbol was specialized before: should a torch
    # not specialize it, Dynamo stops after 100 restarts and runs the frame
    # eagerly, which is slow but never the wrong answer.
    for name in names:
        TensorifyState.specialize(name)
    raise TensorifyScalarRestartAnalysis


def tpu_backend(gm, example_inputs, mode=None, options=None):
    """The "tpu" torch.compile backend.

    torch.compile's `mode` and `options` tune Inductor's code generation
    (CUDA graphs, autotuned kernels); a tpu graph always runs as one XLA
    program, so every mode means the same here (torch.compile checked its
    name); options are ignored with a warning."""
    if options:
        warnings.warn(
            f"torch.compile options {sorted(options)} configure Inductor; graphs on tpu run as XLA "
            f"programs and ignore them (options={{'{INDUCTOR_TPU_OPTION}': 'pallas'}} selects Inductor's tpu path)",
            stacklevel=2,
        )
    _specialize_floats_an_alpha_would_lose(gm)
    _note_recompile()
    _profiler._note_graph(gm)
    return _aot_backend()(gm, example_inputs)


def _on_tpu(example_inputs):
    return any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in example_inputs)


def _makes_tpu_tensors(gm):
    """Whether a Dynamo graph makes tpu tensors (create_block_mask(...,
    device="tpu") takes none): its nodes' example values say where."""
    return any(
        isinstance(v := n.meta.get("example_value", n.meta.get("val")), torch.Tensor) and v.device.type == "tpu"
        for n in gm.graph.nodes
    )


# Inductor's own option naming its tpu code generator (torch._inductor.config
# .tpu_backend, whose only value is "pallas"): a call that passes it asks for
# Inductor's Pallas path on tpu graphs instead of ours.
INDUCTOR_TPU_OPTION = "tpu_backend"


def _options_named_by_user(wrapper):
    """The options of an Inductor backend object that torch.compile's call
    named: its config, unless that is exactly the options of a mode (a
    mode, and options, are never both given)."""
    from torch._inductor import list_mode_options

    config = wrapper.config
    if any(config == dict(options) for options in list_mode_options(None, wrapper.dynamic).values()):
        return {}
    return config


_inductor_call = torch._TorchCompileInductorWrapper.__call__


def inductor_or_tpu(self, model_, inputs_, **kwargs):
    """`_TorchCompileInductorWrapper.__call__`, the backend torch.compile
    makes for "inductor", its default: graphs that take or make tpu tensors
    go to the tpu backend, unless the options name Inductor's tpu code
    generator (docs/modes.md, torch.compile); every other graph goes to Inductor's
    own `__call__`, with the same object, so CPU and CUDA graphs compile as
    without torch_tpu."""
    if INDUCTOR_TPU_OPTION not in self.config and (_on_tpu(inputs_) or _makes_tpu_tensors(model_)):
        return tpu_backend(model_, inputs_, options=_options_named_by_user(self))
    return _inductor_call(self, model_, inputs_, **kwargs)


def make_tpu_optimizers_capturable(dynamo_optimizer):
    """Dynamo compiles `optimizer.step` with `capturable=True` (step counts on
    the device, so the step is one program with no CPU work) when every
    parameter of a group is on CUDA or XPU and has no state yet; the same
    rule for tpu. Without it, the compiled step writes CPU step counts and
    is traced again on every call. Other devices keep Dynamo's rule.
    `dynamo_optimizer` is `torch._dynamo.variables.optimizer`, patched when
    it is imported (torch_tpu/_global_patches.py)."""
    variable = getattr(dynamo_optimizer, "OptimizerVariable", None)
    original = getattr(variable, "_set_capturable", None)
    if original is None or getattr(original, "_tpu_aware", False):
        return

    def _set_capturable(self, tx):
        for group in self.value.param_groups:
            params = group.get("params", [])
            if (
                "capturable" in group
                and params
                and all(p.device.type == "tpu" for p in params)
                and all(p not in self.value.state for p in params)
            ):
                group["capturable"] = True
        return original(self, tx)

    _set_capturable._tpu_aware = True
    variable._set_capturable = _set_capturable


_original_compile = torch.compile


# torch.compile (torch_tpu/_global_patches.py), which checks the mode of
# backend="tpu" at the call, as torch.compile does for "inductor" (a custom
# backend gets its mode only when the first graph compiles). Every other
# call reaches torch.compile with its arguments untouched.
@functools.wraps(_original_compile)
def compile_checking_tpu_mode(*args, **kwargs):
    if kwargs.get("backend") == "tpu" and kwargs.get("mode") is not None and kwargs.get("options") is None:
        from torch._inductor import list_mode_options

        list_mode_options(kwargs["mode"])  # an unknown one raises Inductor's RuntimeError here, at the call
    return _original_compile(*args, **kwargs)
