"""`jax_op`: a JAX (or Pallas) function as a torch.library custom op on tpu tensors.

The op's tpu kernel exports the function to StableHLO for its arguments'
shapes and dtypes (once per signature) and hands the module to the C++ core
(csrc/device/custom_kernel.h), which splices its functions into the program
being built and calls its `main` there, as a lowering emits its ops: Strict
runs it as one program, DeferAndFuse and compiled graphs fuse it with their
other ops. The fake kernel takes result shapes from `jax.eval_shape`, so the
op traces under torch.compile without a graph break.
"""

import contextlib
import functools
import hashlib
import inspect
import os
import threading
import types
import typing

import torch

from .. import _C

_INSTALL_HINT = "pip install torch_tpu[jax]"
_STATIC_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def _import_jax():
    try:
        import jax
        import jax.export  # noqa: F401
        import jax.numpy  # noqa: F401
    except ImportError as e:
        raise ImportError(f"torch_tpu.pallas.jax_op needs JAX, an optional dependency: {_INSTALL_HINT}") from e
    _keep_jax_off_the_device(jax)
    return jax


def _keep_jax_off_the_device(jax):
    """Lowering starts one JAX client (it asks for a default device) though
    it runs nothing; where JAX has not started any and JAX_PLATFORMS does
    not choose, it is the CPU one, so JAX never opens the TPU or GPU our
    plugin drives. A process that uses JAX's runtime itself keeps its own."""
    from jax._src import xla_bridge

    if os.environ.get("JAX_PLATFORMS") or xla_bridge.backends_are_initialized():
        return
    jax.config.update("jax_platforms", "cpu")


def _plugin_attribute(name):
    from .. import plugin_info

    return plugin_info()["attributes"].get(name)


def _jax_platform():
    """The JAX platform our plugin runs: JAX lowers for it (a Pallas kernel
    takes Mosaic on TPU, interpret mode elsewhere) without running it."""
    from .. import plugin_info

    name = plugin_info()["platform_name"].lower()
    for platform in ("tpu", "cuda", "rocm", "cpu"):
        if platform in name:
            return platform
    raise RuntimeError(f"torch_tpu.pallas: JAX has no platform for the PJRT plugin's platform {name!r}")


def interpret_pallas():
    """Whether Pallas kernels run in interpret mode on this device: on the CPU
    plugin (JAX's CPU platform has no other mode), where jax_op lowers them
    so whatever they pass as `interpret=`; on TPU Mosaic compiles them, on
    GPU Triton or Mosaic GPU."""
    return _jax_platform() == "cpu"


@contextlib.contextmanager
def _export_context(jax):
    """64-bit types as torch has them: JAX's default maps int64 and float64
    to 32 bits, so its module would not take our tensors."""
    _interpret_pallas_on_cpu()
    with jax.enable_x64(True):
        yield


_pallas_on_cpu = []


def _interpret_pallas_on_cpu():
    """Lowers every pallas_call for the CPU platform in interpret mode. A
    kernel written for TPU (no `interpret=`) runs unchanged on the CPU plugin:
    on CPU, interpret mode is the only one there is (JAX's own CPU lowering
    raises "Only interpret mode is supported"), so nothing else changes."""
    if _pallas_on_cpu:
        return
    try:
        from jax._src.interpreters import mlir
        from jax._src.pallas import pallas_call
    except ImportError:  # no Pallas in this JAX: nothing to lower
        _pallas_on_cpu.append(False)
        return

    def interpreted(ctx, *in_nodes, interpret, **params):
        return pallas_call._pallas_call_lowering(ctx, *in_nodes, interpret=interpret or True, **params)

    mlir.register_lowering(pallas_call.pallas_call_p, interpreted, platform="cpu")
    _pallas_on_cpu.append(True)


def _version_tuple(version):
    return tuple(int(p) for p in str(version).split("."))


def _fit_stablehlo_version(text, op_name):
    """The module as the plugin can read it. JAX may emit a newer StableHLO
    than the plugin's parser knows; a module that only uses what the
    plugin's version has is serializable to that version, anything else
    fails here, naming both versions, rather than in the plugin's compiler."""
    plugin_version = _plugin_attribute("stablehlo_current_version")
    if not plugin_version:
        return text
    from jaxlib.mlir.dialects import stablehlo

    jax_version = stablehlo.get_current_version()
    if _version_tuple(jax_version) <= _version_tuple(plugin_version):
        return text
    try:
        stablehlo.serialize_portable_artifact_str(text, str(plugin_version))
    except Exception as e:
        raise RuntimeError(
            f"{op_name}: JAX emits StableHLO {jax_version}, the PJRT plugin reads StableHLO up to "
            f"{plugin_version}, and the function uses what {plugin_version} lacks ({e}). Install a JAX whose "
            f"StableHLO is at most {plugin_version}, or a newer plugin."
        ) from e
    return text


def _jnp_dtype(dtype):
    import jax.numpy as jnp

    return jnp.dtype(str(dtype).removeprefix("torch."))


def _torch_dtype(dtype):
    try:
        return getattr(torch, str(dtype))
    except AttributeError:
        raise TypeError(f"JAX returned a {dtype} array, which torch has no dtype for") from None


def _concrete_shape(t):
    # A size Dynamo made symbolic: the op is exported per concrete shape.
    return tuple(int(s) for s in t.shape)


class JaxOp:
    """A JAX function as the custom op `name` (see `jax_op`). Calling it calls
    the op; `op` is the torch.library operator (torch.ops.<ns>.<name>)."""

    def __init__(self, name, fn, donate_argnums=None, autograd=False, _params=None, _source=None):
        self._jax = _import_jax()
        # JAX traces the function with Dynamo's frame hook off (see _results).
        # Applied per op, not as a decorator: torch.compiler.disable imports
        # Dynamo (seconds, and its own changes to torch), which importing
        # torch_tpu, so every `import torch`, must not.
        self._results = torch.compiler.disable(self._results)
        self._module = torch.compiler.disable(self._module)
        if "::" not in name:
            raise ValueError(f"jax_op: the name {name!r} must be 'namespace::name'")
        self.name = name
        self._fn = fn
        # The function whose code keys the on-disk export cache: a vjp op's is its forward's.
        self._source = _source._source if _source is not None else fn
        self._params = _params if _params is not None else _parameters(fn, name)
        arrays = [i for i, (_, kind) in enumerate(self._params) if kind is None]
        if not arrays:
            raise TypeError(f"jax_op {name}: the function takes no array argument")
        self._donated = _donated_params(donate_argnums, self._params, name)
        if autograd and self._donated:
            raise ValueError(f"jax_op {name}: autograd=True and donate_argnums: a donated input is gone by backward")
        self._lock = threading.Lock()
        self._avals = {}  # signature -> (flat result avals, whether the function returned one array)
        self._modules = {}  # signature -> StableHLO text
        self._returns_one = None
        self._define()
        if autograd:
            self._vjp = _Vjp(self)
            self._lib.impl(self.name.split("::")[1], self._vjp.autograd_kernel, "Autograd", with_keyset=True)

    # ---- the torch ops ----------------------------------------------------
    # `op` (torch.ops.<ns>.<name>) is functional: it returns every result,
    # donated arguments' new values included. With donation there is also
    # `<name>_`, which writes those into the donated arguments in the same
    # program and returns the rest: eager calls run it. A compiled graph runs
    # `op` and `copy_`s the new values back, which functionalization turns
    # into the graph's input mutation: the captured program writes the
    # storage and its replays donate the old buffer, so neither copies
    # (auto_functionalize cannot take the in-place op: it returns Tensor[]).
    def _schema(self, inplace):
        args = []
        for i, (pname, kind) in enumerate(self._params):
            if kind is None:
                args.append(f"Tensor(a{i}!) {pname}" if inplace and i in self._donated else f"Tensor {pname}")
            else:
                args.append(f"{_STATIC_TYPES[kind]} {pname}")
        return f"({', '.join(args)}) -> Tensor[]"

    def _define(self):
        ns, opname = self.name.split("::")
        self._lib = torch.library.Library(ns, "FRAGMENT")
        self._lib.define(opname + self._schema(inplace=False))
        self._lib.impl(opname, lambda *v: self._tpu_kernel(v, inplace=False), "PrivateUse1")
        torch.library.register_fake(self.name, lambda *v: self._fake_kernel(v, inplace=False), lib=self._lib)
        self.op = getattr(getattr(torch.ops, ns), opname).default
        self.inplace_op = None
        if self._donated:
            self._lib.define(opname + "_" + self._schema(inplace=True))
            self._lib.impl(opname + "_", lambda *v: self._tpu_kernel(v, inplace=True), "PrivateUse1")
            torch.library.register_fake(self.name + "_", lambda *v: self._fake_kernel(v, inplace=True), lib=self._lib)
            self.inplace_op = getattr(getattr(torch.ops, ns), opname + "_").default

    def __call__(self, *args, **kwargs):
        values = self._arrange(args, kwargs)
        for (pname, kind), v in zip(self._params, values):
            if kind is None and not isinstance(v, torch.Tensor):
                raise TypeError(
                    f"{self.name}: argument '{pname}' is a {type(v).__name__}, not a tensor; a non-array argument "
                    f"must be annotated with its type (`{pname}: {type(v).__name__}`) to be passed as a static "
                    "argument"
                )
            if kind is not None and isinstance(v, torch.Tensor):
                raise TypeError(
                    f"{self.name}: argument '{pname}' is annotated {kind.__name__} (a static argument), got a tensor"
                )
        if self._donated and torch.is_grad_enabled():
            self._check_no_grad_through_donation(values)
        if self._donated and not torch.compiler.is_compiling():
            outs = self.inplace_op(*values)
        else:
            outs = self.op(*values)
            if self._donated:
                for i, new in zip(self._donated, outs):
                    values[i].copy_(new)
                outs = outs[len(self._donated) :]
        if self._returns_one:
            return outs[0] if outs else None
        return tuple(outs)

    def _check_no_grad_through_donation(self, values):
        """A donating op has no autograd (autograd=True excludes donation).
        An argument that requires grad would write a value with history into
        the donated tensor: the gradient through the op would be silently
        wrong, and a compiled graph would have to apply that write as an
        eager copy_ after the graph (AOTAutograd records a mutation autograd
        must see outside the graph), copying the cache every call."""
        for (pname, kind), v in zip(self._params, values):
            if kind is None and v.requires_grad:
                raise RuntimeError(
                    f"{self.name}: argument '{pname}' requires grad, but the op donates arguments and so has no "
                    "autograd; pass it .detach()ed or call the op under torch.no_grad()"
                )

    def register_autograd(self, backward, /, *, setup_context=None):
        """As torch.library.register_autograd for the op (which returns a
        list: `backward(ctx, grads)` gets one list of output gradients)."""
        torch.library.register_autograd(self.name, backward, setup_context=setup_context, lib=self._lib)

    def _arrange(self, args, kwargs):
        if len(args) > len(self._params):
            raise TypeError(f"{self.name}: takes {len(self._params)} arguments, got {len(args)}")
        values = list(args)
        for pname, _ in self._params[len(args) :]:
            if pname not in kwargs:
                raise TypeError(f"{self.name}: missing argument '{pname}'")
            values.append(kwargs.pop(pname))
        if kwargs:
            raise TypeError(f"{self.name}: unexpected argument '{next(iter(kwargs))}'")
        return values

    # ---- kernels ----------------------------------------------------------
    def _signature(self, values):
        sig = []
        for (_, kind), v in zip(self._params, values):
            if kind is None:
                sig.append((_concrete_shape(v), v.dtype))
            else:
                sig.append((type(v), v))  # 1, 1.0 and True differ as static arguments
        return tuple(sig)

    def _check_devices(self, values):
        tensors = [v for (_, kind), v in zip(self._params, values) if kind is None]
        first = tensors[0].device
        for t in tensors:
            if t.device.type != "tpu" or t.device != first:
                other = t.device if t.device != first else first
                a, b = (first, other) if first.type == "tpu" else (other, first)
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two devices, "
                    f"{a} and {b}! ({self.name} runs on tpu)"
                )
        return tensors

    # JAX traces the function by running its Python. A compiled function that
    # runs this op eagerly (after a graph break, or as a frame Dynamo skipped)
    # still has Dynamo's frame hook installed, which would try to compile
    # JAX's own frames and fail on its types: JAX runs with the hook off
    # (torch.compiler.disable, applied in __init__).
    def _results(self, values):
        """(flat result avals, the function returned one array) for these
        arguments, from jax.eval_shape: the op's contract, which the fake
        kernel reports and the exported module must keep."""
        key = self._signature(values)
        with self._lock:
            found = self._avals.get(key)
        if found is None:
            jax = self._jax
            with _export_context(jax):
                out = jax.eval_shape(self._flat_fn(values), *self._array_specs(values))
            leaves, treedef = jax.tree_util.tree_flatten(out)
            found = (
                tuple((tuple(a.shape), _torch_dtype(a.dtype)) for a in leaves),
                treedef.num_leaves == 1 and treedef.num_nodes == 1,
            )
            with self._lock:
                self._avals[key] = found
        if self._returns_one is None:
            self._returns_one = found[1]
        elif self._returns_one != found[1]:
            raise TypeError(f"{self.name}: the function returns one array for some arguments and several for others")
        self._check_donations(found[0], values)
        return found[0]

    def _check_donations(self, results, values):
        if len(results) < len(self._donated):
            raise ValueError(
                f"{self.name}: donates {len(self._donated)} arguments, but the function returns {len(results)} "
                "arrays; it returns the donated arguments' new values first, in donate_argnums order"
            )
        for (shape, dtype), i in zip(results, self._donated):
            t = values[i]
            if tuple(t.shape) != shape or t.dtype != dtype:
                raise ValueError(
                    f"{self.name}: result for donated argument '{self._params[i][0]}' is {dtype} {list(shape)}, "
                    f"the argument {t.dtype} {list(t.shape)}; the function returns the donated arguments' new values "
                    "first, in donate_argnums order"
                )

    def _array_specs(self, values):
        return [
            self._jax.ShapeDtypeStruct(_concrete_shape(v), _jnp_dtype(v.dtype))
            for (_, kind), v in zip(self._params, values)
            if kind is None
        ]

    def _flat_fn(self, values):
        """The function of the array arguments alone, the static ones bound."""
        statics = {i: v for i, ((_, kind), v) in enumerate(zip(self._params, values)) if kind is not None}
        fn, n = self._fn, len(self._params)

        def flat(*arrays):
            it = iter(arrays)
            return fn(*[statics[i] if i in statics else next(it) for i in range(n)])

        return flat

    def _module(self, values):
        """The function's StableHLO for these arguments: from memory, else
        from the compilation cache's disk tier (another process exported it),
        else lowered by JAX and stored there."""
        key = self._signature(values)
        with self._lock:
            text = self._modules.get(key)
        if text is None:
            identity = self._export_identity(values)
            text = _C._cache_load_module(identity)
            if text is None:
                jax = self._jax
                with _export_context(jax):
                    # keep_unused: the call passes every argument (an integer result's
                    # cotangent, an argument the function ignores).
                    traced = jax.jit(self._flat_fn(values), keep_unused=True).trace(*self._array_specs(values))
                    lowered = traced.lower(lowering_platforms=(_jax_platform(),))
                _export_stats["lowerings"] += 1
                text = _fit_stablehlo_version(lowered.as_text(debug_info=False), self.name)
                _C._cache_store_module(identity, text)
            else:
                _export_stats["disk_hits"] += 1
            with self._lock:
                self._modules[key] = text
        return text

    def _export_identity(self, values):
        """Everything the exported text depends on, as the disk tier's key:
        the op, the function's code (_function_fingerprint), the arguments'
        shapes, dtypes and static values, the donations, JAX's version and
        the platform it lowers for, and this exporter's own code."""
        import jaxlib

        return "\n".join(
            [
                "torch_tpu jax_op export v1",
                self.name,
                _function_fingerprint(self._source),
                _exporter_fingerprint(),
                _signature_text(self._params, values),
                f"donate={self._donated}",
                f"jax={self._jax.__version__} jaxlib={jaxlib.__version__}",
                f"platform={_jax_platform()} stablehlo={_plugin_attribute('stablehlo_current_version')}",
            ]
        )

    def _fake_kernel(self, values, inplace):
        tensors = self._check_devices(values)
        results = self._results(values)
        return [tensors[0].new_empty(shape, dtype=dtype) for shape, dtype in results[len(self._donated) * inplace :]]

    def _tpu_kernel(self, values, inplace):
        tensors = self._check_devices(values)
        results = self._results(values)
        array_index = {i: k for k, i in enumerate(i for i, (_, kind) in enumerate(self._params) if kind is None)}
        donated = self._donated if inplace else []
        donors = [array_index[i] for i in donated] + [-1] * (len(results) - len(donated))
        specs = [(dtype, list(shape), donor) for (shape, dtype), donor in zip(results, donors)]
        return _C._run_custom_kernel(self.name, self._module(values), tensors, specs)


_export_stats = {"lowerings": 0, "disk_hits": 0}


def export_stats():
    """{lowerings: modules JAX lowered in this process, disk_hits: modules
    read from the compilation cache's disk tier instead}."""
    return dict(_export_stats)


def reset_export_stats():
    for k in _export_stats:
        _export_stats[k] = 0


_file_digests = {}


def _source_file_digest(path):
    """The defining file's bytes, hashed once per modification time."""
    try:
        stat = os.stat(path)
    except (OSError, TypeError):
        return "no-file"
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _file_digests:
        with open(path, "rb") as f:
            _file_digests[key] = hashlib.sha256(f.read()).hexdigest()
    return _file_digests[key]


def _exporter_fingerprint():
    """This file: how functions are wrapped (the vjp's forward and pullback) is part of what is exported."""
    return _source_file_digest(__file__)


_OPAQUE_MODULES = ("jax", "jaxlib", "numpy", "torch", "builtins", "functools", "math")


def _function_fingerprint(fn):
    """A digest of what `fn` computes, as far as Python shows it: its code
    (bytecode, constants, names, nested code), its defaults and closure
    values, the same of the functions and the plain values (numbers,
    strings, containers of them, NumPy and JAX arrays) it reads as globals,
    and the bytes of each defining file. Functions of JAX, NumPy and the standard library are
    covered by JAX's version in the key. A change the digest cannot see (an
    object's attribute read at trace time) is not detected: bump the op's
    name, or clear the cache directory."""
    digest = hashlib.sha256()
    seen = set()

    def value(v, depth):
        if isinstance(v, (bool, int, float, complex, str, bytes, type(None))):
            digest.update(repr((type(v).__name__, v)).encode())
        elif isinstance(v, (tuple, list, frozenset, set)) and depth < 4:
            digest.update(f"{type(v).__name__}{len(v)}".encode())
            for x in sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v:
                value(x, depth + 1)
        elif isinstance(v, dict) and depth < 4:
            digest.update(f"dict{len(v)}".encode())
            for k in sorted(v, key=repr):
                value(k, depth + 1)
                value(v[k], depth + 1)
        elif callable(v) and depth < 4:
            function(v, depth + 1)
        elif type(v).__module__.split(".")[0] in ("numpy", "jaxlib", "jax") and hasattr(v, "__array__"):
            # A constant array the function closes over is baked into its module.
            import numpy as np

            array = np.asarray(v)
            digest.update(f"array{array.shape}{array.dtype}".encode())
            digest.update(array.tobytes())
        else:
            digest.update(type(v).__qualname__.encode())

    def code(c, globals_, depth):
        digest.update(c.co_code)
        digest.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                code(const, globals_, depth)
            else:
                value(const, depth)
        for name in c.co_names:
            if globals_ is not None and name in globals_:
                value(globals_[name], depth)

    def function(f, depth):
        if isinstance(f, functools.partial):
            function(f.func, depth)
            value(f.args, depth)
            value(f.keywords, depth)
            return
        module = getattr(f, "__module__", None) or ""
        if module.split(".")[0] in _OPAQUE_MODULES:
            digest.update(f"{module}.{getattr(f, '__qualname__', '')}".encode())
            return
        f = inspect.unwrap(f) if hasattr(f, "__wrapped__") else f
        c = getattr(f, "__code__", None)
        if c is None:
            digest.update(type(f).__qualname__.encode())
            return
        if id(f) in seen:
            return
        seen.add(id(f))
        digest.update(f"{module}.{f.__qualname__}".encode())
        digest.update(_source_file_digest(c.co_filename).encode())
        value(f.__defaults__, depth)
        value(f.__kwdefaults__, depth)
        for cell in f.__closure__ or ():
            try:
                value(cell.cell_contents, depth)
            except ValueError:  # an empty cell
                pass
        code(c, f.__globals__, depth)

    function(fn, 0)
    return digest.hexdigest()


def _parameters(fn, name):
    """(name, static type or None for an array) per parameter of `fn`."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {})
    params = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"jax_op {name}: parameter '{p.name}' is {p.kind.description}; jax_op takes named ones")
        hint = hints.get(p.name, inspect.Parameter.empty)
        if hint in _STATIC_TYPES:
            params.append((p.name, hint))
        elif hint is inspect.Parameter.empty or _is_array_type(hint):
            params.append((p.name, None))
        else:
            raise TypeError(
                f"jax_op {name}: parameter '{p.name}' is annotated {hint!r}; an array argument is annotated "
                "jax.Array (or not at all), a static one bool, int, float or str"
            )
    return params


def _is_array_type(hint):
    import jax

    return hint in (jax.Array, jax.numpy.ndarray) or getattr(hint, "__name__", "") in ("Array", "ArrayLike")


def _donated_params(donate_argnums, params, name):
    if donate_argnums is None:
        return []
    nums = [donate_argnums] if isinstance(donate_argnums, int) else list(donate_argnums)
    for i in nums:
        if not 0 <= i < len(params) or params[i][1] is not None:
            raise ValueError(f"jax_op {name}: donate_argnums {i} is not an array argument")
    if len(set(nums)) != len(nums):
        raise ValueError(f"jax_op {name}: donate_argnums {nums} repeats an argument")
    return nums


def _signature_text(params, values):
    """The array arguments' shapes and dtypes and the static values, as text:
    the same for tpu tensors and for the JAX arrays they are traced as."""
    parts = []
    for (_, kind), v in zip(params, values):
        if kind is None:
            parts.append(f"{tuple(int(s) for s in v.shape)}:{str(v.dtype).removeprefix('torch.')}")
        else:
            parts.append(f"{type(v).__name__}:{v!r}")
    return ",".join(parts)


class _ResidualLayout:
    """What jax.vjp of a forward keeps for its backward, for one signature:
    `tree`, the pytree of its pullback, whose leaves are the residuals;
    `n_outputs`, the forward's results; `sources`, per leaf, where the tpu
    tensor holding it comes from: ("input", argument index), ("output", k)
    or ("new", j), the j-th extra result of the forward with residuals."""

    def __init__(self, tree, n_outputs, sources):
        self.tree, self.n_outputs, self.sources = tree, n_outputs, sources


class _Vjp:
    """The autograd of a jax_op(autograd=True), from jax.vjp of its function.

    Without grad the op runs as it is. With grad, it runs `<name>_vjp_fwd`,
    the function linearized by jax.vjp, returning its results and then the
    residuals of its pullback (the leaves of that pytree which are neither
    an argument nor a result); the autograd context keeps them as tpu
    tensors, and backward runs `<name>_vjp_bwd<R>_<N>` over those R leaves
    and N cotangents: the pullback alone, never the forward again. Both are
    jax_ops: fused under DeferAndFuse, recorded in compiled graphs (their
    fake kernels are jax.eval_shape of these functions)."""

    def __init__(self, forward):
        self._forward = forward
        self._layouts = {}  # _signature_text of the forward's arguments -> _ResidualLayout
        self._lock = threading.Lock()
        self.forward_op = JaxOp(
            forward.name + "_vjp_fwd", self._forward_with_residuals, _params=forward._params, _source=forward
        )
        self._backward_ops = {}  # (leaves, cotangents) -> JaxOp
        self._statics = [i for i, (_, kind) in enumerate(forward._params) if kind is not None]

    def autograd_kernel(self, keyset, *values):
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*values):
            return list(_VjpFunction.apply(self, *values))
        with torch._C._AutoDispatchBelowAutograd():
            return self._forward.op.redispatch(keyset & torch._C._after_autograd_keyset, *values)

    def layout(self, key):
        with self._lock:
            found = self._layouts.get(key)
        if found is None:
            raise RuntimeError(f"internal: {self._forward.name} has no residual layout for {key}")
        return found

    def _floats(self, args):
        jnp = self._forward._jax.numpy
        return [
            i
            for i, (_, kind) in enumerate(self._forward._params)
            if kind is None and jnp.issubdtype(args[i].dtype, jnp.floating)
        ]

    def _forward_with_residuals(self, *args):
        forward = self._forward
        jax = forward._jax
        floats = self._floats(args)

        structure = []

        def of_floats(*xs):
            full = list(args)
            for i, x in zip(floats, xs):
                full[i] = x
            leaves, treedef = jax.tree_util.tree_flatten(forward._fn(*full))
            structure.append(treedef)
            return leaves

        outputs, pullback = jax.vjp(of_floats, *[args[i] for i in floats])
        if forward._returns_one is None:  # the op's calls return what the function does
            forward._returns_one = structure[0].num_leaves == 1 and structure[0].num_nodes == 1
        leaves, tree = jax.tree_util.tree_flatten(pullback)
        arrays = [i for i, (_, kind) in enumerate(forward._params) if kind is None]
        sources, new = [], []
        # A residual that is an argument or a result is already a tpu tensor
        # (jax.vjp keeps x itself for sin's cos, exp's result for exp):
        # saved as that tensor, not written out again.
        for leaf in leaves:
            source = next((("input", i) for i in arrays if args[i] is leaf), None)
            source = source or next((("output", k) for k, o in enumerate(outputs) if o is leaf), None)
            if source is None:
                source = ("new", len(new))
                new.append(leaf)
            sources.append(source)
        with self._lock:
            self._layouts[_signature_text(forward._params, args)] = _ResidualLayout(tree, len(outputs), sources)
        return tuple(outputs), tuple(new)

    def backward_op(self, n_leaves, n_cotangents):
        key = (n_leaves, n_cotangents)
        with self._lock:
            op = self._backward_ops.get(key)
        if op is None:
            forward = self._forward
            params = [forward._params[i] for i in self._statics] + [("forward_signature", str)]
            params += [(f"residual{k}", None) for k in range(n_leaves)]
            params += [(f"cotangent{k}", None) for k in range(n_cotangents)]
            op = JaxOp(
                f"{forward.name}_vjp_bwd{n_leaves}_{n_cotangents}", self._pullback, _params=params, _source=forward
            )
            with self._lock:
                op = self._backward_ops.setdefault(key, op)
        return op

    def _pullback(self, *args):
        jax = self._forward._jax
        jnp = jax.numpy
        n_static = len(self._statics)
        layout = self.layout(args[n_static])
        rest = args[n_static + 1 :]
        leaves, cotangents = rest[: len(layout.sources)], rest[len(layout.sources) :]
        pullback = jax.tree_util.tree_unflatten(layout.tree, leaves)
        # An integer result's cotangent is float0 to jax.vjp.
        cotangents = [c if jnp.issubdtype(c.dtype, jnp.inexact) else _float0_zeros(jax, c.shape) for c in cotangents]
        return tuple(pullback(list(cotangents)))


def _float0_zeros(jax, shape):
    import numpy as np

    return np.zeros(shape, dtype=jax.dtypes.float0)


class _VjpFunction(torch.autograd.Function):
    """A jax_op(autograd=True) call that needs grad: the forward with
    residuals, which the context keeps, and the pullback over them."""

    @staticmethod
    def forward(ctx, vjp, *values):
        forward = vjp._forward
        with torch._C._AutoDispatchBelowAutograd():
            flat = vjp.forward_op.op(*values)
        key = _signature_text(forward._params, values)
        layout = vjp.layout(key)
        outputs, new = flat[: layout.n_outputs], flat[layout.n_outputs :]
        pick = {"input": values, "output": outputs, "new": new}
        ctx.save_for_backward(*[pick[kind][i] for kind, i in layout.sources])
        ctx.vjp, ctx.key = vjp, key
        ctx.statics = [values[i] for i in vjp._statics]
        ctx.floats = [
            i for i, (_, kind) in enumerate(forward._params) if kind is None and values[i].is_floating_point()
        ]
        ctx.n_values = len(values)
        ctx.outputs = [(o.shape, o.dtype, o.device) for o in outputs]
        ctx.mark_non_differentiable(*[o for o in outputs if not (o.is_floating_point() or o.is_complex())])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        leaves = ctx.saved_tensors
        cotangents = [
            g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
            for g, (shape, dtype, device) in zip(grads, ctx.outputs)
        ]
        op = ctx.vjp.backward_op(len(leaves), len(cotangents))
        grad_values = op.op(*ctx.statics, ctx.key, *leaves, *cotangents)
        out = [None] * ctx.n_values
        for i, g in zip(ctx.floats, grad_values):
            out[i] = g
        return (None, *out)


def jax_op(name, fn=None, /, *, donate_argnums=None, autograd=False):
    """`fn`, a JAX (or Pallas) function, as the custom op `name`
    ("namespace::name") on tpu tensors; a decorator without `fn`.

    Parameters without annotation (or annotated jax.Array) take tpu tensors;
    those annotated bool, int, float or str are static: part of the op's
    schema and of its cache key. `donate_argnums`: arguments updated in
    place; `fn` returns their new values first, in that order, and the op
    returns its other results. `autograd=True`: the backward is jax.vjp of
    `fn`. Returns a JaxOp: calling it calls the op (docs/custom_kernels.md).
    """
    if fn is None:
        return lambda f: JaxOp(name, f, donate_argnums, autograd)
    return JaxOp(name, fn, donate_argnums, autograd)
