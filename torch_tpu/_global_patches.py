"""Every change torch_tpu makes outside its own namespace, in one place.

torch_tpu loads with every `import torch` (PyTorch's `torch.backends` device
autoload entry point, torch_tpu/_autoload.py), so whatever it changes in
torch or in the process reaches every user of torch in that environment,
CPU and CUDA work included. Each change is one function below; its
docstring says why it is needed, what it changes for work that never
touches a tpu tensor, and since when (commit, torch versions). `torch_tpu.
global_patches()` lists them (tests/runtime/test_global_patches.py fails when
importing torch_tpu changes torch in a way this list does not name, and
checks that CPU torch.compile, printing, fake tensors and the matmul
precision behave as without torch_tpu).

Where the code that does the tpu side lives elsewhere (the printing of a
tpu tensor in _printing.py, the fake rules in fake_kernels.py), only the act
of installing it is here. The `_made_elsewhere` entries are listed only:
C++ registrations made when `torch_tpu._C` loads, and the device's own
definition in torch_tpu/__init__.py (it must come before `_C` loads).
"""

import collections
import os

import torch

GlobalPatch = collections.namedtuple("GlobalPatch", "name reason when non_tpu")

_PATCHES = []  # (GlobalPatch, function applied by apply_at_import or None), in order


def _listed(name, when, non_tpu, at_import=True):
    """Lists the decorated function as the patch `name`, its docstring's
    first line as the reason; apply_at_import applies it if `at_import`."""

    def add(function):
        reason = function.__doc__.strip().splitlines()[0]
        _PATCHES.append((GlobalPatch(name, reason, when, non_tpu), function if at_import else None))
        return function

    return add


def _made_elsewhere(name, reason, when, non_tpu):
    _PATCHES.append((GlobalPatch(name, reason, when, non_tpu), None))


def global_patches():
    """Every change torch_tpu makes to torch or to the process: a list of
    GlobalPatch(name, reason, when, non_tpu), in the order they apply."""
    return [patch for patch, _ in _PATCHES]


# ---- the process environment (before the PJRT plugin loads) ---------------


@_listed(
    "os.environ['TF_CPP_MIN_LOG_LEVEL']",
    "import (before anything can start the plugin)",
    "set to 1 only when unset: TensorFlow or JAX in the same process also log warnings and up",
    at_import=False,
)
def quiet_xla_info_logs(platform):
    """The XLA plugins log every client start at INFO through absl; keep warnings.

    absl reads the variable once, when the plugin first logs, so it is set
    at import. A user's own value wins. Since a21c8bc (2026-11-29)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


@_listed(
    "os.environ['XLA_FLAGS']",
    "import (before anything can start the plugin)",
    "on the XLA:CPU plugin with AVX-512 only: JAX or TensorFlow's XLA:CPU in the same process reads the flag too",
    at_import=False,
)
def xla_cpu_vector_width(platform):
    """XLA:CPU compiles its fusions for 512-bit vectors on AVX-512 hosts (4-10% faster steps).

    The plugin reads XLA_FLAGS at its first compilation and the flags are
    part of every compilation cache key (measurements and rule:
    torch_tpu/_plugin.py, cpu_plugin_xla_flags). A user's own setting of the
    flag wins; other platforms are left alone. Since cc2a9d1 (2026-11-30)."""
    from . import _plugin

    _plugin.tune_xla_flags(platform)


def apply_process_environment(platform):
    """The environment variables, set before anything can start the plugin."""
    quiet_xla_info_logs(platform)
    xla_cpu_vector_width(platform)


# ---- made by the device's definition and the native core ------------------

_made_elsewhere(
    "torch.utils.rename_privateuse1_backend('tpu'), torch.tpu, Tensor.tpu/is_tpu, Module.tpu ...",
    "The device itself: PyTorch's PrivateUse1 registration APIs name it, add its module and its methods.",
    "import (torch_tpu/__init__.py, before _C loads; its hooks when _C loads)",
    "adds names; another PrivateUse1 backend cannot load in the same process; and "
    "torch.accelerator.current_accelerator() is tpu even where CUDA is available (ATen's getAccelerator "
    "prefers any registered PrivateUse1 backend), so code that picks its device through torch.accelerator "
    "picks tpu: set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to keep torch_tpu out of such a process",
)
_made_elsewhere(
    "torch.set_autocast_dtype('tpu', torch.bfloat16)",
    "torch.autocast('tpu') without a dtype means bfloat16, the TPU's native matmul type.",
    "import (torch_tpu/__init__.py)",
    "none: the tpu autocast dtype only",
)
_made_elsewhere(
    "Meta kernels for ATen ops PyTorch has none for",
    "Shape inference for the lowered ops whose meta kernel PyTorch lacks (csrc/device/op_table.cpp, "
    "register_missing_meta_kernels; geqrf in csrc/device/linalg_kernels.cpp).",
    "when torch_tpu._C loads",
    "meta tensors of those ops (histogram, fused optimizers' tensor_lr overloads, GRU cells, geqrf...) get "
    "shapes where PyTorch raised NotImplementedError; fake CPU tensors get the shapes PyTorch's fake mode "
    "found by running the CPU kernel (and _thnn_fused_gru_cell, which has none, shapes instead of an error). "
    "A meta tensor has no device, so this cannot be limited to tpu; an op PyTorch has a Meta kernel for is "
    "never touched",
)
_made_elsewhere(
    "aten::_copy_from(_and_resize) fall through the Conjugate and Negative keys",
    "Conjugate and negative views reach the tpu copy kernel as they are (PyTorch's fallback recursed).",
    "when torch_tpu._C loads",
    "none: ATen calls _copy_from only when a side of a copy is a PrivateUse1 (or XLA, lazy...) tensor",
)
_made_elsewhere(
    "os.register_at_fork(before=...)",
    "A child forked after the plugin started reports the parent's device count, as torch.cuda's does.",
    "import (torch_tpu/device_module.py)",
    "none unless the tpu device was started",
)


# ---- torch's Python functions and tables ----------------------------------


@_listed(
    "torch._tensor_str._tensor_str",
    "import",
    "none: a non-tpu tensor goes to PyTorch's own function, unchanged",
)
def print_tpu_tensors_from_a_host_copy():
    """Printing a tpu tensor formats one host copy (one transfer), as PyTorch does for XLA tensors.

    PyTorch copies only "xla", "lazy", "ipu" and "mtia" tensors to the host
    before formatting (torch/_tensor_str.py, _str_intern); a PrivateUse1
    tensor would be formatted with device ops and many host reads. There is
    no hook for a device, so the module's formatter is wrapped. Since
    a2aa8d9 (2026-11-29); the same function and device list in torch 2.13
    and 2.14."""
    import torch._tensor_str as tensor_str

    from . import _printing

    tensor_str._tensor_str = _printing._tensor_str_on_host


@_listed(
    "fake_impls.op_implementations_dict (convolution, convolution_backward)",
    "import",
    "none: PyTorch's rule runs first and its result is returned for every non-tpu input",
)
def fake_convolution_memory_format():
    """Fake convolutions on tpu take eager's channels_last rule, so traced views of them work.

    PyTorch's fake convolution asks ATen which backend the device uses, and
    ATen answers "contiguous" for every PrivateUse1 device
    (torch_tpu/memory_format.py). op_implementations_dict is where
    FakeTensorMode finds its convolution rule; there is no public hook for
    a device's layouts. Since 7085554 (2026-12-02); torch 2.13 and 2.14."""
    from . import memory_format

    memory_format.install()


@_listed(
    "fake_impls.op_implementations_checks (ops whose row serves fake tensors)",
    "import",
    "none: the rule returns NotImplemented for non-tpu inputs, and PyTorch's meta kernel runs as before",
)
def fake_tensors_from_row_meta_kernels():
    """Fake tensors on tpu take their shapes from the C++ meta kernel of the op's row.

    For the rows marked `.fake_from_meta()`, where PyTorch's fake rule
    rejects what the device runs: _grouped_mm's admits only CUDA's bfloat16,
    the device lowers CPU's dtypes too (transformers' MoE layers). The rule
    is torch_tpu/fake_kernels.py's, one for every such row. `register_op_impl`
    with a predicate is the hook FakeTensorMode consults before meta kernels.
    Since b11a79b (2026-12-02); torch 2.13 and 2.14."""
    from torch._subclasses import fake_impls

    from . import fake_kernels

    # A torch without the hook keeps PyTorch's rule (eager is unaffected).
    if hasattr(fake_impls, "register_op_impl"):
        fake_impls.register_op_impl(fake_kernels.is_served_by_row)(fake_kernels.row_meta)


@_listed(
    "torch.set_float32_matmul_precision",
    "import",
    "none: PyTorch's own setter runs first, with the same argument, errors and effect",
)
def float32_matmul_precision_sets_tpu_too():
    """torch.set_float32_matmul_precision also sets tpu's, so code written for CUDA behaves the same.

    tpu keeps its own setting (default "medium", torch_tpu/precision.py):
    PyTorch's default, "highest", is not the TPU's, and PyTorch offers no
    hook for a device to follow the setting. The wrapper calls PyTorch's
    setter first, so torch.get_float32_matmul_precision and CPU/CUDA see
    exactly what they would. Since a2aa8d9 (2026-11-29)."""
    from . import precision

    torch.set_float32_matmul_precision = precision.set_float32_matmul_precision_for_tpu_too


@_listed(
    "torch.optim.optimizer.register_optimizer_step_post_hook",
    "import",
    "one check per optimizer step (whether the thread runs tpu's DeferAndFuse mode); nothing else",
)
def flush_deferred_work_after_optimizer_steps():
    """Under DeferAndFuse, an optimizer step ends a fused program, so each step compiles once.

    Cutting at the step keeps the fused programs identical from step to
    step (torch_tpu/modes.py, _flush_after_optimizer_step). Since 474595e
    (2026-11-29)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from . import modes

    register_optimizer_step_post_hook(modes._flush_after_optimizer_step)


@_listed(
    "atexit.register",
    "import",
    "none unless the tpu device was started",
)
def wait_for_launched_programs_at_exit():
    """Programs still running at exit would race the plugin's static destructors.

    Exit waits for launched programs; pending DeferAndFuse work nobody can
    read any more is dropped (torch_tpu/modes.py, _wait_at_exit). Since
    a930369 (2026-11-30)."""
    import atexit

    from . import modes

    atexit.register(modes._wait_at_exit)


# ---- torch.compile ---------------------------------------------------------


@_listed(
    "torch._dynamo.device_interface: the 'tpu' DeviceInterface",
    "import (applied when Dynamo is imported)",
    "none: only the interface registered for the device name 'tpu'",
)
def dynamo_device_interface_from_torch_tpu():
    """Dynamo and Inductor ask torch.tpu about the device, not PyTorch's TpuInterface for TorchTPU.

    PyTorch registers its own "tpu" interface (no float64, always device 0);
    ours is registered right after Dynamo fills its table, without
    importing Dynamo (torch_tpu/dynamo_device_interface.py). Since b6ac113
    (2026-12-03); torch 2.13 and 2.14 both register a TpuInterface."""
    from . import dynamo_device_interface

    dynamo_device_interface.install()


@_listed(
    "torch._TorchCompileInductorWrapper.__call__",
    "import",
    "none: a graph that takes and makes no tpu tensor goes to Inductor's own __call__, on the same "
    "backend object torch.compile made (same options, modes, errors, caches and guards)",
)
def default_backend_follows_the_device():
    """torch.compile(model) with its default backend, "inductor", runs graphs on tpu through the tpu backend.

    Code written for CUDA names no backend, or "inductor" with a mode; on
    tpu those graphs would reach Inductor, which runs them op by op. The
    backend object torch.compile makes for "inductor" decides per graph
    (torch_tpu/compile.py, inductor_or_tpu); options naming Inductor's own
    tpu code generator keep Inductor. torch.compile itself is not changed
    for this. Since issue 37 (before, torch.compile itself was replaced,
    2750214); `__call__(model_, inputs_, *, config_patches)` in torch 2.13
    and 2.14."""
    from . import compile as tpu_compile

    torch._TorchCompileInductorWrapper.__call__ = tpu_compile.inductor_or_tpu


@_listed(
    "torch.compile",
    "import",
    "none: a call whose backend is not 'tpu' reaches torch.compile with its arguments untouched",
)
def tpu_backend_checks_its_mode_at_the_call():
    """torch.compile(backend="tpu", mode=...) raises for an unknown mode at the call, as for Inductor.

    A custom backend gets its mode only when the first graph compiles; the
    wrapper checks it against Inductor's modes first (torch_tpu/compile.py,
    compile_checking_tpu_mode). functools.wraps keeps torch.compile's name,
    documentation and signature. Since 2750214 (2026-11-29); since issue 37
    it changes nothing but that check."""
    from . import compile as tpu_compile

    torch.compile = tpu_compile.compile_checking_tpu_mode


@_listed(
    "torch._dynamo.variables.optimizer.OptimizerVariable._set_capturable",
    "import (applied when Dynamo's optimizer support is imported)",
    "none: a group whose parameters are not all on tpu gets Dynamo's own rule",
)
def compiled_tpu_optimizers_are_capturable():
    """A compiled optimizer step on tpu keeps its step counts on the device (capturable), as on CUDA.

    Dynamo makes a group capturable only when its parameters are on CUDA or
    XPU; otherwise the compiled step writes CPU step counts and is traced
    again on every call (torch_tpu/compile.py,
    make_tpu_optimizers_capturable). Applied when Dynamo imports the module,
    so importing torch_tpu does not import Dynamo. Since c10aa84
    (2026-11-30); torch 2.13 and 2.14."""
    from . import compile as tpu_compile
    from .integrations import _when_imported

    _when_imported("torch._dynamo.variables.optimizer", tpu_compile.make_tpu_optimizers_capturable)


# ---- other PyTorch registries ---------------------------------------------


@_listed(
    "torch.distributed.Backend.register_backend('tpu_dist', 'tpu')",
    "import",
    "adds backend names only; c10d's own backends are unchanged",
)
def tpu_dist_backend():
    """init_process_group("tpu_dist") (or "tpu") runs collectives on tpu tensors (docs/distributed.md).

    Since 031aa57 (2026-12-01)."""
    from . import distributed

    distributed.install()


@_listed(
    "multiprocessing.reduction.ForkingPickler: torch.Tensor, Parameter, UntypedStorage",
    "import",
    "none: a non-tpu tensor or storage goes to torch's own reducer",
)
def tpu_tensors_through_multiprocessing():
    """A tpu tensor on a torch.multiprocessing Queue arrives as a host copy (no IPC handle exists).

    torch's reducer would ask the storage for a shared-memory handle, raise
    in the Queue's feeder thread and lose the item
    (torch_tpu/multiprocessing.py). Since e644845 (2026-12-03)."""
    from . import multiprocessing

    multiprocessing.install()


@_listed(
    "library integrations: accelerate, transformers, torchvision, fbgemm_gpu (sys.meta_path)",
    "import (each applied when its library is imported)",
    "torchvision next to the CPU torch wheel gets CPU kernels for its operators where its own extension "
    "cannot load (it failed at import); accelerate's device choices (get_max_memory, PartialState) and "
    "fp16 check take tpu whenever tpu is torch.accelerator's device, which with torch_tpu loaded it is, "
    "CUDA hosts included (see the device's entry); the Trainer's checkpoint and the DynamoBackend enum "
    "only add tpu (torch_tpu/integrations/)",
)
def library_integrations():
    """Libraries that place models on devices by name accept tpu, without being edited.

    Each hook runs when (and only if) the program imports that library
    (torch_tpu/integrations/__init__.py lists them). Since a26a802
    (2026-12-02)."""
    from . import integrations

    integrations.install()


# ---- at first tpu use ------------------------------------------------------


@_listed(
    "torch.autograd.set_multithreading_enabled(False)",
    "first tpu use (torch.tpu._lazy_init), for that thread",
    "none in a process that never makes a tpu tensor; in the thread that made the first one, CUDA "
    "backward also runs on that thread instead of autograd's per-device thread (CPU backward always "
    "runs on the calling thread)",
    at_import=False,
)
def backward_on_the_calling_thread():
    """Backward runs on the thread that calls it: autograd's tpu device thread could abort the process at exit.

    tpu ops only enqueue work, so a device thread gains nothing; and it
    drops its last reference to a finished graph task after waking the
    caller: when that holds a Python object (it can, after torch.compile)
    and the interpreter is exiting, the thread dies in a destructor
    ("terminate called without an active exception"). The setting is
    PyTorch's, per thread, and PyTorch has none per device: autograd sends
    every non-CPU device's work to its device thread. So it is set for the
    thread that first makes a tpu tensor (PyTorch calls torch.tpu._lazy_init
    there), not at import: a process that never uses tpu keeps autograd as
    it is. `torch_tpu.set_eager_mode` sets it for its thread too. At import
    since a930369 (2026-11-30); at first use since issue 37."""
    torch.autograd.set_multithreading_enabled(False)


# glibc's mallopt parameters (malloc.h) and the values set.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MALLOC_MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit hosts (half its 64 MiB heap size)
MALLOC_TRIM_THRESHOLD = 64 << 20


def _glibc():
    """libc as a ctypes library where this process's malloc is glibc's, else None."""
    import ctypes

    from .info import malloc_in_use

    if malloc_in_use() != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # another C library (musl)
        return None


@_listed(
    "glibc's malloc: mallopt(M_MMAP_THRESHOLD, 32 MiB), mallopt(M_TRIM_THRESHOLD, 64 MiB)",
    "first tpu use (torch.tpu._lazy_init), on the XLA:CPU plugin with glibc's malloc; "
    "TORCH_TPU_GLIBC_MALLOC_TUNING=0 leaves malloc as it is",
    "the whole process's malloc: blocks of 128 KiB to 32 MiB (CPU tensors of those sizes too) come from "
    "malloc's heaps rather than a mapping each, and up to 64 MiB freed at the top of a heap stays with the "
    "process until torch.tpu.empty_cache(); a process that never uses tpu keeps glibc's defaults",
    at_import=False,
)
def glibc_malloc_keeps_freed_device_pages():
    """On the XLA:CPU plugin, freed device buffers keep their pages instead of faulting them in again.

    The plugin's device memory is the host's malloc. A program's outputs
    are fresh buffers; glibc maps a buffer over its mmap threshold on its
    own and unmaps it when freed, and hands the top of a heap back to the
    kernel once more than its trim threshold is free there. Its dynamic
    thresholds settle at about the largest block freed so far, so a
    program whose outputs (1 MiB each, four of them) are freed together
    leaves more than that free, which glibc returns, and every next call
    faults those pages in again (zeroed by the kernel): a program of four
    64 x (64x16 @ 16x64) products took 822 us a product on glibc's
    defaults and 210 us with these thresholds (docs/performance.md,
    "glibc and a program's large outputs"). Fixed thresholds keep the
    pages, as tcmalloc (what scripts/train.sh preloads) and PyTorch's CUDA
    caching allocator do. torch.tpu.empty_cache() hands them back
    (malloc_trim), and so does an allocation about to be refused for want
    of host memory, before it reads the host's free memory again.
    Returns whether the thresholds were set. Since issue 39 (2026-12-06)."""
    if os.environ.get("TORCH_TPU_GLIBC_MALLOC_TUNING", "1") == "0":
        return False
    from . import _C

    if dict(_C._plugin_info())["platform_name"] != "cpu":
        return False
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)
    )


def apply_at_import():
    """Applies the patches made at import, in order (after the device's
    definition, the environment and `_C`)."""
    for _, function in _PATCHES:
        if function is not None:
            function()
