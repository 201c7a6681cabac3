"""torch_tpu loads with every `import torch`, so what it changes in torch
reaches CPU and CUDA users too. Each test runs the same script in a process
where torch_tpu autoloads and in one where it does not
(TORCH_DEVICE_BACKEND_AUTOLOAD=0) and checks that non-tpu work sees the
same thing; the last ones check that every change torch_tpu makes to torch
at import is listed in torch_tpu.global_patches()."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from repo_paths import DOCS

import torch_tpu


def _run(code, autoload=True, drop_env=()):
    """Runs `code` in a new interpreter and returns the JSON it printed
    after "RESULT"."""
    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if autoload else "0"
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-4000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT") :])


def _with_and_without_torch_tpu(code):
    loaded = _run(code, autoload=True)
    alone = _run(code, autoload=False)
    assert loaded.pop("torch_tpu_loaded") is True
    assert alone.pop("torch_tpu_loaded") is False
    return loaded, alone


_LOADED = 'import sys\nprint("RESULT" + json.dumps(dict(out, torch_tpu_loaded="torch_tpu" in sys.modules)))\n'

CPU_COMPILE = """
import json
import torch
import torch._inductor.compile_fx as compile_fx_module
from torch._dynamo.utils import counters

calls = []  # the Inductor options each graph compiled with
stock_compile_fx = compile_fx_module.compile_fx


def recording_compile_fx(gm, inputs, *args, **kwargs):
    calls.append(sorted((k, repr(v)) for k, v in (kwargs.get("config_patches") or {}).items()))
    return stock_compile_fx(gm, inputs, *args, **kwargs)


compile_fx_module.compile_fx = recording_compile_fx


def f(x, n):
    return (x.sin() * n + x.cos()).sum(-1)


out = {}
compiled = torch.compile(f)
# The same shape again (a guard hit), new sizes (a recompile, then dynamic),
# a new Python number (a recompile).
inputs = ((torch.ones(2, 4), 2), (torch.ones(2, 4), 2), (torch.ones(3, 4), 2), (torch.ones(5, 4), 3))
out["results"] = [compiled(x, n).tolist() for x, n in inputs]
out["compile_fx_calls"] = list(calls)
out["stats"] = dict(counters["stats"])
out["frames"] = dict(counters["frames"])
out["recompiles"] = dict(counters["recompiles"])
out["aot_graphs"] = counters["aot_autograd"]["total"]
errors = []
for kwargs in (
    {"mode": "fastest"},
    {"options": {"no_such_option": 1}},
    {"mode": "default", "options": {}},
    {"backend": "no_such_backend"},
):
    try:
        torch.compile(f, **kwargs)
        errors.append(None)
    except Exception as e:
        errors.append([type(e).__name__, str(e)[:300]])
out["errors"] = errors
torch._dynamo.reset()
del calls[:]
g = torch.compile(lambda x: torch.relu(x) + 1, mode="max-autotune-no-cudagraphs")
out["mode_result"] = g(torch.arange(-2.0, 2.0)).tolist()
out["mode_compile_fx_calls"] = calls
"""


def test_cpu_torch_compile_gets_stock_inductor():
    loaded, alone = _with_and_without_torch_tpu(CPU_COMPILE + _LOADED)
    assert loaded == alone
    assert alone["frames"]["total"] >= 2 and alone["compile_fx_calls"]  # the test saw Inductor compile
    assert ["max_autotune", "True"] in alone["mode_compile_fx_calls"][0]
    assert [e[0] for e in alone["errors"][:3]] == ["RuntimeError"] * 3


PRINTING = """
import json
import torch

out = {}
torch.manual_seed(0)
tensors = {
    "scalar": torch.tensor(3.25),
    "empty": torch.empty(0, 3),
    "int64": torch.arange(-5, 5),
    "int8": torch.arange(-4, 4, dtype=torch.int8),
    "uint8": torch.arange(6, dtype=torch.uint8).reshape(2, 3),
    "bool": torch.tensor([True, False, True]),
    "float16": torch.randn(3, 2).half(),
    "bfloat16": torch.randn(4).bfloat16(),
    "float64": torch.randn(2, 2, 2, dtype=torch.float64),
    "complex64": torch.randn(3, dtype=torch.complex64),
    "sci": torch.tensor([1e-10, 1.0, 3e12]),
    "nonfinite": torch.tensor([float("nan"), float("inf"), -float("inf"), 0.5]),
    "summarized": torch.randn(40, 50),
    "requires_grad": torch.randn(3, requires_grad=True),
    "grad_fn": torch.randn(2, requires_grad=True) * 2,
    "transposed": torch.randn(3, 4).t(),
    "meta": torch.empty(2, 3, device="meta"),
    "sparse": torch.eye(3).to_sparse(),
}
out["default"] = {name: repr(t) for name, t in tensors.items()}
torch.set_printoptions(sci_mode=True, precision=2)
out["sci_mode"] = {name: str(t) for name, t in tensors.items()}
torch.set_printoptions(sci_mode=False, precision=6, linewidth=40, threshold=10, edgeitems=2)
out["narrow"] = {name: str(t) for name, t in tensors.items()}
"""


def test_printing_cpu_tensors_is_unchanged():
    loaded, alone = _with_and_without_torch_tpu(PRINTING + _LOADED)
    for options in alone:
        for name in alone[options]:
            assert loaded[options][name] == alone[options][name], (options, name)


FAKE_SHAPES = """
import json
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

aten = torch.ops.aten


def describe(make):
    try:
        with FakeTensorMode():
            result = make()
    except Exception as e:
        return [type(e).__name__, str(e).splitlines()[0][:200] if str(e) else ""]
    flat = result if isinstance(result, (tuple, list)) else [result]
    return [
        [list(t.shape), str(t.dtype), list(t.stride()), str(t.device)] if isinstance(t, torch.Tensor) else repr(t)
        for t in flat
    ]


def channels_last(*shape):
    return torch.randn(*shape).to(memory_format=torch.channels_last)


cases = {
    # The fake convolution rules torch_tpu wraps (memory formats).
    "conv2d": lambda: torch.nn.functional.conv2d(torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)),
    "conv2d_channels_last": lambda: torch.nn.functional.conv2d(channels_last(2, 3, 8, 8), torch.randn(4, 3, 3, 3)),
    "conv2d_weight_channels_last": lambda: aten.convolution(
        torch.randn(2, 3, 8, 8), channels_last(4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
    ),
    "_convolution": lambda: aten._convolution(
        channels_last(1, 2, 5, 5), torch.randn(2, 2, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
        False, False, True, True,
    ),
    "conv_transpose": lambda: torch.nn.functional.conv_transpose2d(channels_last(1, 4, 5, 5), torch.randn(4, 2, 3, 3)),
    "convolution_backward": lambda: aten.convolution_backward(
        channels_last(2, 4, 6, 6), channels_last(2, 3, 8, 8), torch.randn(4, 3, 3, 3), [4],
        [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True],
    ),
    # The fake _grouped_mm rule torch_tpu adds (tpu inputs only).
    "grouped_mm_float32": lambda: aten._grouped_mm(
        torch.randn(6, 4), torch.randn(2, 4, 5), torch.tensor([3, 6], dtype=torch.int32)
    ),
    "grouped_mm_bfloat16": lambda: aten._grouped_mm(
        torch.randn(6, 8).bfloat16(), torch.randn(2, 8, 16).bfloat16().transpose(-2, -1).contiguous().transpose(-2, -1),
        torch.tensor([3, 6], dtype=torch.int32),
    ),
    # Ops torch_tpu gives the Meta kernel PyTorch lacks: PyTorch's fake mode
    # ran their CPU kernel; the shapes must agree. (_thnn_fused_gru_cell has
    # no CPU kernel: its fake CPU call raised and now has shapes, as on CUDA.)
    "histogram": lambda: torch.histogram(torch.randn(10), bins=4),
    "histogramdd": lambda: torch.histogramdd(torch.randn(10, 2), bins=[3, 4])[0],
    "multi_margin_loss_backward": lambda: aten.multi_margin_loss_backward(
        torch.tensor(1.0), torch.randn(3, 5), torch.tensor([0, 1, 2]), 1, 1.0, None, 1
    ),
    "multilabel_margin_loss_backward": lambda: aten.multilabel_margin_loss_backward(
        torch.tensor(1.0), torch.randn(3, 5), torch.zeros(3, 5, dtype=torch.long), 1, torch.zeros(3, 5)
    ),
    "geqrf": lambda: torch.geqrf(torch.randn(5, 3)),
    "fractional_max_pool3d_backward": lambda: aten.fractional_max_pool3d_backward(
        torch.randn(1, 2, 2, 2, 2), torch.randn(1, 2, 4, 4, 4), [2, 2, 2], [2, 2, 2],
        torch.zeros(1, 2, 2, 2, 2, dtype=torch.long),
    ),
}
out = {name: describe(make) for name, make in cases.items()}
"""


def test_fake_tensor_shapes_of_the_patched_ops_on_cpu_are_unchanged():
    loaded, alone = _with_and_without_torch_tpu(FAKE_SHAPES + _LOADED)
    assert loaded == alone
    assert alone["conv2d_channels_last"][0][2] == [144, 1, 24, 4]  # channels_last strides: the case means something


MATMUL_PRECISION = """
import inspect
import json
import warnings

import torch

out = {"values": [], "errors": []}
for value in ("high", "medium", "highest"):
    torch.set_float32_matmul_precision(value)
    out["values"].append(torch.get_float32_matmul_precision())
for bad in ("bogus", 3):  # PyTorch ignores an unknown name with a warning and raises for a non-str
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.set_float32_matmul_precision(bad)
            out["errors"].append(None)
        except Exception as e:
            out["errors"].append([type(e).__name__, str(e)])
    out["errors"].append([str(w.message) for w in caught])
out["after_errors"] = torch.get_float32_matmul_precision()
setter = torch.set_float32_matmul_precision
out["name"] = [setter.__name__, setter.__qualname__, setter.__doc__, str(inspect.signature(setter))]
a, b = torch.randn(64, 64), torch.randn(64, 64)
torch.set_float32_matmul_precision("medium")
out["cpu_matmul"] = (a @ b).sum().item()
"""


def test_float32_matmul_precision_round_trips_as_without_torch_tpu():
    loaded, alone = _with_and_without_torch_tpu(
        MATMUL_PRECISION.replace("a, b = ", "torch.manual_seed(0)\na, b = ") + _LOADED
    )
    assert loaded == alone
    assert alone["values"] == ["high", "medium", "highest"]


def test_float32_matmul_precision_also_sets_tpus():
    previous = torch_tpu.get_matmul_precision()
    try:
        import torch

        torch.set_float32_matmul_precision("high")
        assert torch_tpu.get_matmul_precision() == "high"
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision("highest")
        torch_tpu.set_matmul_precision(previous)


def test_autograd_device_threads_stay_on_until_the_first_tpu_tensor():
    out = _run(
        """
        import json, threading
        import torch
        out = {"at_import": torch.autograd.is_multithreading_enabled()}
        torch.ones(2).sum()  # CPU work leaves it alone
        out["after_cpu_work"] = torch.autograd.is_multithreading_enabled()
        seen = []
        worker = threading.Thread(target=lambda: (torch.ones(2, device="tpu"),
                                                  seen.append(torch.autograd.is_multithreading_enabled())))
        worker.start()
        worker.join()
        out["tpu_thread"] = seen[0]
        out["main_after_tpu_elsewhere"] = torch.autograd.is_multithreading_enabled()
        print("RESULT" + json.dumps(out))
        """
    )
    assert out == {"at_import": True, "after_cpu_work": True, "tpu_thread": False, "main_after_tpu_elsewhere": True}


GLIBC_PAGES = """
    import json, os, resource
    os.environ["TORCH_TPU_GLIBC_MALLOC_TUNING"] = {tuning!r}
    import torch, torch_tpu
    from torch_tpu import info

    def faults_per_step(step):
        for _ in range(5):
            step()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            step()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20

    # Four 1 MiB products at a time, freed together: a program's outputs on
    # tpu, then the same on CPU in the same process.
    lhs = [torch.randn(64, 64, 16) for _ in range(4)]
    rhs = [torch.randn(64, 16, 64) for _ in range(4)]
    on_tpu = [(a.to("tpu"), b.to("tpu")) for a, b in zip(lhs, rhs)]

    def tpu_step():
        outs = [torch.bmm(a, b) for a, b in on_tpu]
        torch_tpu.synchronize()

    def cpu_step():
        outs = [torch.bmm(a, b) for a, b in zip(lhs, rhs)]

    from torch_tpu import _global_patches
    out = {{"malloc": info.malloc_in_use(), "tpu": faults_per_step(tpu_step), "cpu": faults_per_step(cpu_step),
           "set": _global_patches.glibc_malloc_keeps_freed_device_pages()}}
    print("RESULT" + json.dumps(out))
"""


def test_on_the_cpu_plugin_glibc_keeps_the_pages_of_freed_buffers():
    # On glibc's dynamic thresholds each step faulted its 4 MiB in again
    # (256 pages a buffer: 535-992 faults a step in 2026-12-06's runs, or
    # none, depending on the largest block the process had freed before);
    # with them fixed, 0-2 a step, once 65 while the machine was busy.
    out = _run(GLIBC_PAGES.format(tuning="1"), drop_env=("LD_PRELOAD",))
    assert out["malloc"] == "glibc"
    assert out["set"] is True
    assert out["tpu"] < 128, out
    assert out["cpu"] < 128, out  # the thresholds are the process's: CPU tensors of that size too


def test_glibc_malloc_tuning_can_be_turned_off():
    out = _run(GLIBC_PAGES.format(tuning="0"), drop_env=("LD_PRELOAD",))
    assert out["malloc"] == "glibc" and out["set"] is False


# ---- every change to torch is listed --------------------------------------

SNAPSHOT = """
import atexit
import json
import os
import sys
from multiprocessing.reduction import ForkingPickler

import torch
import torch._tensor_str
import torch.distributed as dist
import torch.multiprocessing
import torch.nn.utils.rnn
from torch._subclasses import fake_impls
from torch.optim import optimizer

DISPATCH_KEYS = (
    "Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
    "CPU", "CUDA", "Autograd", "AutogradCPU", "AutogradCUDA", "AutogradOther", "Conjugate", "Negative",
    "ZeroTensor", "AutocastCPU", "AutocastCUDA", "Python", "BackendSelect", "ADInplaceOrView", "Functionalize",
    "FuncTorchBatched", "SparseCPU", "QuantizedCPU", "NestedTensorCPU",
)
NAMESPACES = {
    "torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module,
    "torch.UntypedStorage": torch.UntypedStorage, "torch.TypedStorage": torch.TypedStorage,
    "torch.nn.utils.rnn.PackedSequence": torch.nn.utils.rnn.PackedSequence,
    "torch._tensor_str": torch._tensor_str, "torch.autograd": torch.autograd, "torch.utils": torch.utils,
    "torch.library": torch.library, "torch.nn.functional": torch.nn.functional, "torch.optim": torch.optim,
    "torch.backends": torch.backends, "torch.distributed": dist, "torch.multiprocessing": torch.multiprocessing,
    "torch._TorchCompileInductorWrapper": torch._TorchCompileInductorWrapper,
    "torch._TorchCompileWrapper": torch._TorchCompileWrapper, "torch.random": torch.random,
    "torch.serialization": torch.serialization,
}


def snapshot():
    s = {}
    for prefix, namespace in NAMESPACES.items():
        for name, value in list(vars(namespace).items()):
            s[f"{prefix}.{name}"] = id(value)
    for op, rule in fake_impls.op_implementations_dict.items():
        s[f"fake_impls.op_implementations_dict[{op}]"] = id(rule)
    s["fake_impls.op_implementations_checks"] = [id(check) for check in fake_impls.op_implementations_checks]
    for key in DISPATCH_KEYS:
        for op in torch._C._dispatch_get_registrations_for_dispatch_key(key):
            s[f"dispatch[{key}]:{op.split('::')[0]}"] = s.get(f"dispatch[{key}]:{op.split('::')[0]}", 0) + 1
    s["sys.meta_path"] = [type(finder).__name__ for finder in sys.meta_path]
    reducers = ForkingPickler._extra_reducers.items()
    s["ForkingPickler"] = sorted(f"{c.__module__}.{c.__qualname__}:{id(r)}" for c, r in reducers)
    s["dist.Backend"] = sorted(dist.Backend._plugins)
    s["optimizer hooks"] = [len(optimizer._global_optimizer_pre_hooks), len(optimizer._global_optimizer_post_hooks)]
    s["atexit"] = atexit._ncallbacks()
    for name, value in os.environ.items():
        s[f"os.environ[{name}]"] = value
    s["torch modules"] = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
    s["state"] = [
        torch.autograd.is_multithreading_enabled(), torch.is_grad_enabled(), str(torch.get_default_dtype()),
        torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_num_threads(),
        torch._C._get_privateuse1_backend_name(), str(torch.accelerator.current_accelerator()),
    ]
    return s


def dynamo_snapshot():
    import torch._dynamo.device_interface as device_interface
    from torch._dynamo.variables import optimizer as dynamo_optimizer

    registered = dict(device_interface.get_registered_device_interfaces())
    interface = device_interface.get_interface_for_device("tpu") if "tpu" in registered else None
    return {
        "OptimizerVariable._set_capturable": id(vars(dynamo_optimizer.OptimizerVariable)["_set_capturable"]),
        "device_interface[tpu]": getattr(interface, "__module__", None),
    }


before = snapshot()
import torch_tpu

after = snapshot()
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
dynamo_before = dynamo_snapshot()  # Dynamo's first import, after torch_tpu's
"""

_DEVICE = "torch.utils.rename_privateuse1_backend('tpu'), torch.tpu, Tensor.tpu/is_tpu, Module.tpu ..."

# What a listed patch changes, as the snapshot above names it: the key, and
# the patch (its torch_tpu.global_patches() name) that explains it.
_EXPLAINED_BY = {
    "torch.compile": "torch.compile",
    "torch.set_float32_matmul_precision": "torch.set_float32_matmul_precision",
    "torch._tensor_str._tensor_str": "torch._tensor_str._tensor_str",
    "torch._TorchCompileInductorWrapper.__call__": "torch._TorchCompileInductorWrapper.__call__",
    "torch.tpu": _DEVICE,
    "state": _DEVICE,
    "torch modules": _DEVICE,
    "fake_impls.op_implementations_checks": "fake_impls.op_implementations_checks (ops whose row serves fake tensors)",
    "dispatch[Meta]:aten": "Meta kernels for ATen ops PyTorch has none for",
    "dispatch[Conjugate]:aten": "aten::_copy_from(_and_resize) fall through the Conjugate and Negative keys",
    "dispatch[Negative]:aten": "aten::_copy_from(_and_resize) fall through the Conjugate and Negative keys",
    "os.environ[TF_CPP_MIN_LOG_LEVEL]": "os.environ['TF_CPP_MIN_LOG_LEVEL']",
    "os.environ[XLA_FLAGS]": "os.environ['XLA_FLAGS']",
    "sys.meta_path": "library integrations: accelerate, transformers, torchvision, fbgemm_gpu (sys.meta_path)",
    "optimizer hooks": "torch.optim.optimizer.register_optimizer_step_post_hook",
    "atexit": "atexit.register",
    "ForkingPickler": "multiprocessing.reduction.ForkingPickler: torch.Tensor, Parameter, UntypedStorage",
    "dist.Backend": "torch.distributed.Backend.register_backend('tpu_dist', 'tpu')",
}
_CONVOLUTION_RULES = "fake_impls.op_implementations_dict (convolution, convolution_backward)"
_GENERATED_METHOD_OWNERS = (
    "torch.Tensor.",
    "torch.nn.Module.",
    "torch.TypedStorage.",
    "torch.UntypedStorage.",
    "torch.nn.utils.rnn.PackedSequence.",
)


def _explanation(key, before, after):
    if key in _EXPLAINED_BY:
        return _EXPLAINED_BY[key]
    if key.startswith("fake_impls.op_implementations_dict[aten.") and "convolution" in key:
        return _CONVOLUTION_RULES
    # generate_methods_for_privateuse1_backend adds `tpu` and `is_tpu`; it replaces nothing.
    owner = next((o for o in _GENERATED_METHOD_OWNERS if key.startswith(o)), None)
    if owner and key[len(owner) :] in ("tpu", "is_tpu") and before.get(key) is None:
        return _DEVICE
    return None


def test_every_change_to_torch_at_import_is_listed():
    out = _run(
        SNAPSHOT
        + """
out = {"changed": changed, "before": {k: before.get(k) for k in changed}, "after": {k: after.get(k) for k in changed}}
print("RESULT" + json.dumps(out))
""",
        autoload=False,
        # The variables torch_tpu sets, as a process that never loaded it has them.
        drop_env=("TF_CPP_MIN_LOG_LEVEL", "XLA_FLAGS"),
    )
    listed = {patch.name for patch in torch_tpu.global_patches()}
    unexplained = [k for k in out["changed"] if _explanation(k, out["before"], out["after"]) is None]
    assert not unexplained, (
        "importing torch_tpu changed these without a listed patch; apply the change in torch_tpu/_global_patches.py "
        f"with its reason and name it in _EXPLAINED_BY: {[(k, out['before'][k], out['after'][k]) for k in unexplained]}"
    )
    assert {_explanation(k, out["before"], out["after"]) for k in out["changed"]} <= listed
    # The registration renames PrivateUse1, which torch.accelerator then
    # prefers (listed); nothing else of torch's state moves.
    assert out["before"]["state"][:-2] == out["after"]["state"][:-2]
    assert out["after"]["state"][-2:] == ["tpu", "tpu"]
    # Dynamo is not imported by importing torch_tpu (it takes seconds, and changes torch itself).
    new_modules = set(out["after"]["torch modules"]) - set(out["before"]["torch modules"])
    assert "torch.tpu" in new_modules and all(m.startswith("torch.tpu") for m in new_modules), new_modules
    # The patches replaced at import are all seen, so the list is no longer than what happens.
    assert "os.environ[TF_CPP_MIN_LOG_LEVEL]" in out["changed"]
    for name in (
        "torch.compile",
        "torch.set_float32_matmul_precision",
        "torch._tensor_str._tensor_str",
        "torch._TorchCompileInductorWrapper.__call__",
    ):
        assert name in out["changed"], name


def test_changes_made_when_dynamo_loads_are_listed():
    code = SNAPSHOT + 'out = {"with": dynamo_before}\nprint("RESULT" + json.dumps(out))\n'
    loaded = _run(code, autoload=False)["with"]
    alone = _run(code.replace("import torch_tpu\n", ""), autoload=False)["with"]
    changed = {k for k in alone if alone[k] != loaded[k]}
    assert changed == {"OptimizerVariable._set_capturable", "device_interface[tpu]"}
    listed = {patch.name for patch in torch_tpu.global_patches()}
    assert "torch._dynamo.variables.optimizer.OptimizerVariable._set_capturable" in listed
    assert "torch._dynamo.device_interface: the 'tpu' DeviceInterface" in listed
    assert loaded["device_interface[tpu]"] == "torch_tpu.dynamo_device_interface"


def test_global_patches_says_why_and_what_each_changes_for_other_devices():
    patches = torch_tpu.global_patches()
    assert len({p.name for p in patches}) == len(patches)
    for patch in patches:
        assert patch.reason and patch.when and patch.non_tpu, patch


@pytest.mark.parametrize("name", ["torch.compile", "torch.set_float32_matmul_precision"])
def test_wrapped_torch_functions_keep_their_name_and_documentation(name):
    import torch

    wrapper = eval(name, {"torch": torch})
    stock = wrapper.__wrapped__
    assert (wrapper.__name__, wrapper.__doc__, wrapper.__module__) == (stock.__name__, stock.__doc__, stock.__module__)


def test_docs_list_every_patch():
    path = os.path.join(DOCS, "global_patches.md")
    with open(path) as f:
        text = f.read()
    missing = [p.name for p in torch_tpu.global_patches() if f"`{p.name}`" not in text]
    assert not missing, f"docs/global_patches.md does not list {missing}"
