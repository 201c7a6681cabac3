"""TorchTPU's custom-kernel entry points, which Inductor's Pallas code
generator calls for tpu graphs (torch/_inductor/codegen/pallas.py):

    if not lookup_custom_kernel(name, key):
        register_custom_kernel(name, key, serialized_mlir_module=exported.mlir_module_serialized)
    results = call_custom_kernel(name, key, inputs=[...], output_shapes=[...], donate_argnums=[...])

A kernel is a StableHLO module (JAX's serialized export, or MLIR text)
registered once per (name, key). A call runs it as the op
`tpu_torch_pallas::call_custom_kernel` over the custom-kernel path of
`torch_tpu.pallas.jax_op` (csrc/device/custom_kernel.h): the module is
spliced into the program being built, so Strict runs it as one program,
DeferAndFuse fuses it with its neighbours and a compiled graph captures it.

A module holding code that only another platform's compiler runs (Mosaic's
`tpu_custom_call`, which `jax.export(platforms=['tpu'])` of a Pallas kernel
makes) is refused at registration on any other plugin, naming both.
"""

import re

import torch

from ... import _C
from ...pallas import jax_custom_op

# (name, kernel_key) -> StableHLO text. No lock: a dict's get and setdefault
# are atomic, and Dynamo traces a call's lookup (it cannot enter a lock).
_modules = {}

# Custom calls only one platform's compiler runs: Pallas kernels lowered by
# Mosaic TPU, by Mosaic GPU and by Triton.
_PLATFORM_CUSTOM_CALLS = {
    "tpu_custom_call": "tpu",
    "mosaic_gpu": "cuda",
    "mosaic_gpu_v2": "cuda",
    "__gpu$xla.gpu.triton": "cuda",
}
_CUSTOM_CALL = re.compile(r'stablehlo\.custom_call\s*@([\w$.]+)|call_target_name\s*=\s*"([^"]+)"')
_MLIR_BYTECODE_MAGIC = b"ML\xefR"


def _module_text(serialized):
    """StableHLO text, without locations, of a module given as JAX's
    serialized export (a portable artifact's MLIR bytecode) or as MLIR text.
    JAX reads it: Inductor's kernels are JAX's exports."""
    if isinstance(serialized, (bytes, bytearray, memoryview)):
        serialized = bytes(serialized)
        if not serialized.startswith(_MLIR_BYTECODE_MAGIC):
            serialized = serialized.decode()
    elif not isinstance(serialized, str):
        raise TypeError(
            f"register_custom_kernel: serialized_mlir_module must be bytes or str, not {type(serialized).__name__}"
        )
    jax_custom_op._import_jax()
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client
    from jax._src.lib.mlir import ir

    # How jax.export's Exported.mlir_module() reads its bytes; printed as
    # jax_op's modules are, without the locations the parser does not read.
    with mlir.make_ir_context():
        if isinstance(serialized, bytes):
            serialized = xla_client._xla.mlir.deserialize_portable_artifact(serialized)
        module = ir.Module.parse(serialized) if isinstance(serialized, str) else serialized
        return module.operation.get_asm(enable_debug_info=False)


def _check_platform(name, kernel_key, text):
    here = jax_custom_op._jax_platform()
    for match in _CUSTOM_CALL.finditer(text):
        target = match[1] or match[2]
        platform = _PLATFORM_CUSTOM_CALLS.get(target)
        if platform is not None and platform != here:
            raise RuntimeError(
                f"custom kernel {name!r} (key {kernel_key!r}) calls {target!r}, which only the {platform} "
                f"platform's compiler runs; this process's PJRT plugin is the {here} platform. Export the kernel "
                f"for platforms=['{here}'] (a Pallas kernel in interpret mode on cpu), or run on a {platform} "
                f"device (TORCH_TPU_PLATFORM={platform})."
            )


def register_custom_kernel(name, kernel_key, *, serialized_mlir_module):
    """Registers the module as kernel (name, kernel_key). A pair already
    registered keeps its first module, as TorchTPU's registry does."""
    key = (str(name), str(kernel_key))
    if key in _modules:
        return
    text = _module_text(serialized_mlir_module)
    _check_platform(name, kernel_key, text)
    text = jax_custom_op._fit_stablehlo_version(text, f"custom kernel {name!r}")
    _modules.setdefault(key, text)


def lookup_custom_kernel(name, kernel_key):
    """Whether (name, kernel_key) is registered."""
    return (str(name), str(kernel_key)) in _modules


def _registered(name, kernel_key):
    text = _modules.get((name, kernel_key))
    if text is None:
        raise RuntimeError(
            f"unknown custom kernel {name!r} with key {kernel_key!r}; call "
            f"torch_tpu._internal.pallas.tpu_torch_pallas.register_custom_kernel({name!r}, {kernel_key!r}, ...) "
            "to register it before calling it"
        )
    return text


def call_custom_kernel(name, kernel_key, *, inputs, output_shapes, donate_argnums=()):
    """Runs kernel (name, kernel_key) on `inputs` (tpu tensors of one device)
    and returns new tensors of `output_shapes`' shapes and dtypes (tensors
    whose data is not read).

    `donate_argnums` names inputs whose buffers the kernel may reuse; TorchTPU
    may overwrite them, this implementation leaves them intact (allowed:
    nothing may read a donated input afterwards, so keeping it is not
    observable). Results are always new tensors, as TorchTPU's are."""
    inputs, output_shapes = list(inputs), list(output_shapes)
    for what, tensors in (("inputs", inputs), ("output_shapes", output_shapes)):
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"call_custom_kernel: {what}[{i}] is a {type(t).__name__}, not a tensor")
    donated = [int(i) for i in donate_argnums]
    for i in donated:
        if not -len(inputs) <= i < len(inputs):
            raise IndexError(f"call_custom_kernel: donate_argnums {i} is out of range for {len(inputs)} inputs")
    if len({i % len(inputs) for i in donated}) != len(donated):
        raise ValueError(f"call_custom_kernel: donate_argnums {donated} repeats an input")
    _registered(name, kernel_key)
    if not output_shapes:
        return []
    return list(torch.ops.tpu_torch_pallas.call_custom_kernel(name, kernel_key, inputs, output_shapes))


def _device_of(inputs):
    """The inputs' one tpu device (None without inputs); as a PyTorch op, a
    RuntimeError naming two devices otherwise."""
    if not inputs:
        return None
    first = inputs[0].device
    for t in inputs:
        if t.device.type != "tpu" or t.device != first:
            a, b = (first, t.device) if first.type == "tpu" else (t.device, first)
            if a == b:  # every input on one device, which is not tpu
                b = torch.device("tpu")
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{a} and {b}! (call_custom_kernel runs on tpu)"
            )
    return first


def _tpu_kernel(name, kernel_key, inputs, output_shapes):
    _device_of(inputs)
    specs = [(o.dtype, list(o.shape), -1) for o in output_shapes]
    return _C._run_custom_kernel(f"custom kernel {name!r}", _registered(name, kernel_key), inputs, specs)


def _fake_kernel(name, kernel_key, inputs, output_shapes):
    device = _device_of(inputs) or output_shapes[0].device
    return [torch.empty(o.shape, dtype=o.dtype, device=device) for o in output_shapes]


_lib = torch.library.Library("tpu_torch_pallas", "DEF")
# The placeholders are tensors so a compiled graph carries their shapes
# and dtypes, which the fake kernel returns; their data is never read.
_lib.define("call_custom_kernel(str name, str kernel_key, Tensor[] inputs, Tensor[] output_shapes) -> Tensor[]")
_lib.impl("call_custom_kernel", _tpu_kernel, "PrivateUse1")
torch.library.register_fake("tpu_torch_pallas::call_custom_kernel", _fake_kernel, lib=_lib)
