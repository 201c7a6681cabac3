"""The names PyTorch and Ray already call for torch_tpu:

- `torch_tpu._loader.load()` (Ray Train's tpu_dist backend; tests/integrations/test_ray.py
  runs Ray itself);
- `torch_tpu._internal.pallas.tpu_torch_pallas` (Inductor's Pallas code
  generator for tpu graphs): a module JAX exported for the CPU platform runs
  here and equals JAX's result, in Strict, DeferAndFuse and compiled; one
  holding Mosaic TPU code is refused on another plugin, naming both platforms;
- `torch.compile` with the default backend: tpu graphs run on our backend,
  Inductor's Pallas path when the call names Inductor's tpu code generator;
- Dynamo's device interface for "tpu", answering from torch.tpu.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from reference import in_mode

import torch_tpu
import torch_tpu.compile as tpu_compile
from torch_tpu._internal.pallas import tpu_torch_pallas

MODES = ["strict", "defer_and_fuse", "compiled"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    tpu_compile.reset_stats()
    yield
    torch._dynamo.reset()


def _platform():
    return torch_tpu.plugin_info()["platform_name"].lower()


# ---- torch_tpu._loader ----------------------------------------------------


def test_loader_load_is_idempotent_and_registers_tpu_dist():
    import torch.distributed as dist

    import torch_tpu._loader

    torch_tpu._loader.load()
    torch_tpu._loader.load()
    assert torch_tpu._loader._LOADED
    assert "TPU_DIST" in dist.Backend._plugins
    assert torch_tpu._loader._init_device("tpu") == torch.device("tpu")
    with pytest.raises(ValueError, match="xla_cpu"):
        torch_tpu._loader._init_device("xla_cpu")


# ---- tpu_torch_pallas -------------------------------------------------------


def _jax():
    pytest.importorskip("jax", reason="custom kernels need JAX: pip install torch_tpu[jax]")
    import jax.export

    return jax


def _sin_mul_and_colsum(x, y):
    import jax.numpy as jnp

    return jnp.sin(x) * y + 1, x.sum(0)


def _export(fn, *shapes, platforms=("cpu",)):
    jax = _jax()
    specs = [jax.ShapeDtypeStruct(s, jax.numpy.float32) for s in shapes]
    return jax.export.export(jax.jit(fn), platforms=list(platforms))(*specs)


def _registered_sin_kernel(key):
    exported = _export(_sin_mul_and_colsum, (4, 3), (4, 3))
    tpu_torch_pallas.register_custom_kernel("sin_mul", key, serialized_mlir_module=exported.mlir_module_serialized)
    return exported


def _call_sin_kernel(key, x, y):
    placeholders = [torch.empty(4, 3, device="tpu"), torch.empty(3, device="tpu")]
    return tpu_torch_pallas.call_custom_kernel("sin_mul", key, inputs=[x, y], output_shapes=placeholders)


@pytest.mark.parametrize("mode", MODES)
def test_module_exported_for_cpu_runs_and_equals_jax(mode):
    jax = _jax()
    key = f"cpu_module_{mode}"
    assert not tpu_torch_pallas.lookup_custom_kernel("sin_mul", key)
    _registered_sin_kernel(key)
    assert tpu_torch_pallas.lookup_custom_kernel("sin_mul", key)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    expected = jax.jit(_sin_mul_and_colsum)(x.numpy(), y.numpy())
    run = in_mode(mode, lambda a, b: [o * 2 for o in _call_sin_kernel(key, a, b)])
    outs = run(x.to("tpu"), y.to("tpu"))
    assert [o.device.type for o in outs] == ["tpu", "tpu"]
    for out, want in zip(outs, expected):
        np.testing.assert_allclose(out.cpu().numpy(), np.asarray(want) * 2, rtol=1e-6, atol=1e-6)
    if mode == "compiled":  # captured in the graph, not a break around it
        assert tpu_compile.stats()["graphs_compiled"] == 1


def test_module_text_is_accepted_and_a_registered_pair_keeps_its_first_module():
    exported = _export(_sin_mul_and_colsum, (4, 3), (4, 3))
    doubled = _export(lambda x, y: (x * 2, y.sum(0)), (4, 3), (4, 3))
    tpu_torch_pallas.register_custom_kernel("sin_mul", "text", serialized_mlir_module=exported.mlir_module())
    tpu_torch_pallas.register_custom_kernel("sin_mul", "text", serialized_mlir_module=doubled.mlir_module_serialized)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    out = _call_sin_kernel("text", x.to("tpu"), y.to("tpu"))[0]
    torch.testing.assert_close(out.cpu(), torch.sin(x) * y + 1)


def test_donated_input_keeps_its_value_and_results_are_new_tensors():
    _registered_sin_kernel("donate")
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    tx, ty = x.to("tpu"), y.to("tpu")
    placeholders = [torch.empty(4, 3, device="tpu"), torch.empty(3, device="tpu")]
    outs = tpu_torch_pallas.call_custom_kernel(
        "sin_mul", "donate", inputs=[tx, ty], output_shapes=placeholders, donate_argnums=[0]
    )
    torch.testing.assert_close(outs[0].cpu(), torch.sin(x) * y + 1)
    torch.testing.assert_close(tx.cpu(), x)
    assert outs[0].untyped_storage().data_ptr() != tx.untyped_storage().data_ptr()


def test_bad_calls_raise_what_pytorch_raises():
    _registered_sin_kernel("errors")
    x, y = torch.randn(4, 3, device="tpu"), torch.randn(4, 3, device="tpu")
    with pytest.raises(RuntimeError, match="unknown custom kernel 'sin_mul' with key 'nope'.*register_custom_kernel"):
        _call_sin_kernel("nope", x, y)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cpu"):
        _call_sin_kernel("errors", x, y.cpu())
    with pytest.raises(TypeError, match=r"inputs\[1\] is a float"):
        tpu_torch_pallas.call_custom_kernel("sin_mul", "errors", inputs=[x, 1.0], output_shapes=[x])
    with pytest.raises(IndexError, match="donate_argnums 2"):
        tpu_torch_pallas.call_custom_kernel("sin_mul", "errors", inputs=[x, y], output_shapes=[x], donate_argnums=[2])
    with pytest.raises(RuntimeError, match="result 1 .* is tensor<3xf32>"):
        tpu_torch_pallas.call_custom_kernel(
            "sin_mul", "errors", inputs=[x, y], output_shapes=[torch.empty(4, 3, device="tpu"), x]
        )
    with pytest.raises(TypeError, match="bytes or str"):
        tpu_torch_pallas.register_custom_kernel("sin_mul", "bad", serialized_mlir_module=3)
    assert tpu_torch_pallas.call_custom_kernel("sin_mul", "errors", inputs=[x, y], output_shapes=[]) == []


def _pallas_doubling_kernel():
    jax = _jax()
    from jax.experimental import pallas as pl

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return jax.jit(lambda x: pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))


@pytest.mark.skipif("tpu" in torch_tpu.plugin_info()["platform_name"].lower(), reason="a TPU runs Mosaic")
def test_module_with_mosaic_tpu_code_is_refused_naming_both_platforms():
    # What Inductor registers: a Pallas kernel exported for TPU, whose body is
    # Mosaic (stablehlo.custom_call @tpu_custom_call). JAX lowers it without a TPU.
    exported = _export(_pallas_doubling_kernel(), (8, 128), platforms=["tpu"])
    assert "tpu_custom_call" in exported.mlir_module()
    with pytest.raises(RuntimeError, match=f"'tpu_custom_call', which only the tpu platform.*is the {_platform()}"):
        tpu_torch_pallas.register_custom_kernel("double", "tpu", serialized_mlir_module=exported.mlir_module_serialized)
    assert not tpu_torch_pallas.lookup_custom_kernel("double", "tpu")


# ---- torch.compile's default backend on tpu graphs -------------------------


def test_default_compile_runs_graphs_that_take_tpu_tensors_on_the_tpu_backend():
    fn = torch.compile(lambda x: (x.sin() * 2).sum(0))
    x = torch.randn(5, 3)
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), (x.sin() * 2).sum(0))
    assert tpu_compile.stats()["graphs_compiled"] == 1


def test_default_compile_runs_create_block_mask_on_tpu_on_the_tpu_backend():
    # No tpu input: the graph makes its tensors on tpu. Inductor would
    # generate Mosaic TPU kernels for it, which the CPU plugin cannot run.
    from torch.nn.attention.flex_attention import create_block_mask

    def causal(b, h, q, kv):
        return q >= kv

    mask = torch.compile(create_block_mask)(causal, 1, 1, 256, 256, device="tpu")
    expected = create_block_mask(causal, 1, 1, 256, 256, device="cpu")
    assert tpu_compile.stats()["graphs_compiled"] >= 1
    assert mask.kv_num_blocks.device.type == "tpu"
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        torch.testing.assert_close(getattr(mask, name).cpu(), getattr(expected, name), msg=name)


def test_inductor_pallas_path_is_selectable_and_reaches_tpu_torch_pallas():
    # options={"tpu_backend": "pallas"} (Inductor's own option) routes a tpu
    # graph to Inductor, which writes a Pallas kernel, exports it for TPU and
    # calls tpu_torch_pallas. On a TPU it runs; on another plugin the Mosaic
    # module is refused there, inside Inductor's generated code.
    _jax()
    fn = torch.compile(lambda x: x * 2 + 1, options={tpu_compile.INDUCTOR_TPU_OPTION: "pallas"})
    x = torch.randn(8, 128)
    if "tpu" in _platform():
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), x * 2 + 1)
    else:
        with pytest.raises(RuntimeError, match="tpu_custom_call") as raised:
            fn(x.to("tpu"))
        files = [str(entry.path) for entry in raised.traceback]
        assert any(p.endswith(os.path.join("_inductor", "codegen", "pallas.py")) for p in files), files
        assert any(p.endswith("tpu_torch_pallas.py") for p in files), files
    assert tpu_compile.stats()["graphs_compiled"] == 0


# ---- Dynamo's device interface ------------------------------------------------

_ALL_DTYPES = [
    getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype) and not n.startswith("_")
]


def test_dynamo_interface_supports_what_the_device_holds():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("tpu")
    for dtype in (torch.float64, torch.complex64, torch.complex128, torch.half, torch.bfloat16):
        assert interface.is_dtype_supported(dtype), dtype
    for dtype in set(_ALL_DTYPES):
        try:
            torch.empty(1, dtype=dtype, device="tpu")
            holds = True
        except (TypeError, NotImplementedError, RuntimeError):
            holds = False
        assert interface.is_dtype_supported(dtype) == holds, dtype
    assert interface.is_available() and interface.device_count() == torch.tpu.device_count()
    from torch._inductor.runtime.hints import DeviceProperties

    assert DeviceProperties.create(torch.device("tpu", 0)).type == "tpu"


_CURRENT_DEVICE_CHECK = """
import sys, torch
order = sys.argv[1]
if order != "torch_tpu_first":
    import torch._dynamo.device_interface as di
    if order == "dynamo_table_filled_first":
        di.get_interface_for_device("cpu")
import torch_tpu
from torch._dynamo.device_interface import get_interface_for_device
interface = get_interface_for_device("tpu")
assert interface.is_dtype_supported(torch.float64), interface
seen = []
for index in (1, 0, 1):
    torch.tpu.set_device(index)
    seen.append((interface.current_device(), interface.Worker.current_device()))
previous = interface.exchange_device(0)
seen.append((previous, torch.tpu.current_device()))
print(seen)
"""


@pytest.mark.parametrize("order", ["torch_tpu_first", "dynamo_first", "dynamo_table_filled_first"])
def test_dynamo_interface_current_device_follows_set_device(order):
    # Our interface replaces PyTorch's whichever loads first (with autoload
    # off, `import torch` does not import torch_tpu).
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run(
        [sys.executable, "-c", _CURRENT_DEVICE_CHECK, order], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().splitlines()[-1] == "[(1, 1), (0, 0), (1, 1), (1, 0)]"
