"""Custom kernels (torch_tpu.pallas.jax_op): JAX and Pallas functions as torch
ops on tpu tensors, checked against the same math in PyTorch on CPU, in
Strict, DeferAndFuse and compiled graphs (which replay their programs)."""

import sys

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from jax.experimental import pallas as pl
from reference import in_mode

import torch_tpu
import torch_tpu.compile as tpu_compile
from torch_tpu.pallas import jax_op

EAGER_MODES = ["strict", "debug", "defer_and_fuse"]
MODES = EAGER_MODES + ["compiled"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    tpu_compile.reset_stats()
    yield
    torch._dynamo.reset()


# ---- a fused RMSNorm written in jnp, inside a torch model ------------------


@jax_op("jaxop_test::rms_norm", autograd=True)
def rms_norm(x, weight, eps: float):
    xf = x.astype(jnp.promote_types(x.dtype, jnp.float32))  # bf16 computes in f32, f64 stays f64
    normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (normed * weight).astype(x.dtype)


class JaxRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, dim, norm):
        super().__init__()
        self.norm = norm
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.proj(self.norm(x)).relu()


def make_models(dim):
    torch.manual_seed(0)
    reference = Block(dim, nn.RMSNorm(dim, eps=1e-6))
    with torch.no_grad():
        reference.norm.weight.uniform_(0.5, 1.5)
    ours = Block(dim, JaxRMSNorm(dim, eps=1e-6))
    ours.load_state_dict(reference.state_dict())
    return reference, ours.tpu()


@pytest.mark.parametrize("mode", MODES)
def test_rms_norm_in_a_model_matches_nn_rmsnorm_forward_and_backward(mode):
    reference, ours = make_models(16)
    step = in_mode(mode, lambda x: ours(x))
    for seed in range(3):  # compiled: traced once, then replayed
        torch.manual_seed(seed)
        x = torch.randn(4, 8, 16)
        ours.zero_grad()
        reference.zero_grad()
        out = step(x.tpu())
        out.square().sum().backward()
        expected = reference(x)
        expected.square().sum().backward()
        torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
        for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=name)
    if mode == "compiled":
        stats = tpu_compile.stats()
        assert stats["graph_replays"] >= 4, stats  # forward and backward of calls 2 and 3


def test_rms_norm_gradcheck_against_pytorch():
    x = torch.randn(3, 5, dtype=torch.float64)
    w = torch.rand(5, dtype=torch.float64) + 0.5

    def ours(x, w):
        return rms_norm(x.tpu(), w.tpu(), 1e-6).cpu()

    assert torch.autograd.gradcheck(ours, (x.requires_grad_(), w.requires_grad_()))
    reference = F.rms_norm(x, (5,), w, eps=1e-6)
    torch.testing.assert_close(ours(x, w), reference)


_sin_traces = [0]


@jax_op("jaxop_test::sin_residual", autograd=True)
def jax_sin(x):
    _sin_traces[0] += 1
    return jnp.sin(x)


@pytest.mark.parametrize("mode", MODES)
def test_backward_runs_the_pullback_over_kept_residuals_without_the_forward(mode):
    run = in_mode(mode, lambda x: jax_sin(x) * 3)
    for seed in range(2):
        torch.manual_seed(seed)
        x = torch.randn(4, 8, dtype=torch.float64)
        tx = x.tpu().requires_grad_()
        out = run(tx)
        if mode != "compiled":
            # jax.vjp's residual for sin is cos(x): the context keeps it as a
            # tpu tensor, computed by the forward program.
            (saved,) = out.grad_fn.next_functions[0][0].saved_tensors
            assert saved.device.type == "tpu"
            torch.testing.assert_close(saved.cpu(), x.cos())
        traces = _sin_traces[0]
        out.sum().backward()
        assert _sin_traces[0] == traces  # backward never traces the function again
        torch.testing.assert_close(out.detach().cpu(), x.sin() * 3)
        torch.testing.assert_close(tx.grad.cpu(), 3 * x.cos())
    # The backward program is the pullback alone: it multiplies by the
    # residual and computes no sine or cosine.
    (backward,) = jax_sin._vjp._backward_ops.values()
    for text in backward._modules.values():
        assert "sine" not in text and "cosine" not in text, text
    (forward_module,) = jax_sin._vjp.forward_op._modules.values()
    assert "cosine" in forward_module


def test_call_without_grad_computes_no_residuals():
    @jax_op("jaxop_test::exp_no_grad", autograd=True)
    def exp(x):
        return jnp.exp(x)

    x = torch.randn(5)
    with torch.no_grad():
        out = exp(x.tpu().requires_grad_())
    torch.testing.assert_close(out.cpu(), x.exp())
    out = exp(x.tpu())  # nothing requires grad
    assert out.grad_fn is None
    assert not exp._vjp.forward_op._modules and len(exp._modules) == 1


def test_residual_that_is_a_result_is_saved_as_that_result():
    @jax_op("jaxop_test::exp_residual", autograd=True)
    def exp(x):
        return jnp.exp(x)

    x = torch.randn(6, dtype=torch.float64)
    tx = x.tpu().requires_grad_()
    out = exp(tx)
    (saved,) = out.grad_fn.saved_tensors  # exp's pullback keeps exp(x): the result itself
    assert saved.data_ptr() == out.data_ptr()
    assert torch.autograd.gradcheck(lambda x: exp(x.tpu()).cpu(), (x.requires_grad_(),))


@jax_op("jaxop_test::gather_exp_and_argmax", autograd=True)
def gather_exp_and_argmax(x, index):
    picked = jnp.exp(x[index])
    return picked, jnp.argmax(picked, axis=-1)


@pytest.mark.parametrize("mode", ["strict", "compiled"])
def test_vjp_with_an_integer_argument_and_an_integer_result(mode):
    """The integer index is closed over (a residual the pullback keeps), the
    integer result gets no gradient (its cotangent is float0 to JAX, an
    unused argument of the backward program)."""
    x = torch.randn(5, 4, dtype=torch.float64)
    index = torch.tensor([0, 3, 3])
    run = in_mode(mode, lambda x, i: gather_exp_and_argmax(x, i))
    tx = x.tpu().requires_grad_()
    picked, argmax = run(tx, index.tpu())
    assert not argmax.requires_grad
    picked.sin().sum().backward()
    reference = x.clone().requires_grad_()
    reference[index].exp().sin().sum().backward()
    torch.testing.assert_close(argmax.cpu(), x[index].exp().argmax(-1))
    torch.testing.assert_close(tx.grad.cpu(), reference.grad)
    assert torch.autograd.gradcheck(lambda x: gather_exp_and_argmax(x.tpu(), index.tpu())[0].cpu(), (reference,))


def test_function_that_ignores_an_argument_still_takes_it():
    @jax_op("jaxop_test::first_of_two")
    def first(x, unused):
        return x * 2

    x = torch.randn(3)
    torch.testing.assert_close(first(x.tpu(), torch.ones(2).tpu()).cpu(), x * 2)


@jax_op("jaxop_test::shifted_and_range")
def shifted_and_range(x, n: int):
    return x + n, jnp.arange(n)


def test_bfloat16_tensors_several_results_and_an_int_static_argument():
    x = torch.randn(4, 16).bfloat16()
    w = (torch.rand(16) + 0.5).bfloat16()
    out = rms_norm(x.tpu(), w.tpu(), 1e-6)
    assert out.dtype == torch.bfloat16
    expected = (F.rms_norm(x.float(), (16,), eps=1e-6) * w.float()).bfloat16()
    torch.testing.assert_close(out.cpu(), expected)
    shifted, positions = shifted_and_range(x.tpu(), 3)
    torch.testing.assert_close(shifted.cpu(), x + 3)
    torch.testing.assert_close(positions.cpu(), torch.arange(3))


def test_register_autograd_works_as_for_any_custom_op():
    @jax_op("jaxop_test::cube")
    def cube(x):
        return x**3

    def backward(ctx, grads):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grads[0]

    cube.register_autograd(backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
    x = torch.randn(5)
    tx = x.tpu().requires_grad_()
    cube(tx).sum().backward()
    torch.testing.assert_close(tx.grad.cpu(), 3 * x * x)


def test_rms_norm_fuses_with_its_neighbours_under_defer_and_fuse():
    x = torch.randn(8, 16)
    w = torch.rand(16) + 0.5
    tx, tw = x.tpu(), w.tpu()
    with torch_tpu.eager_mode("defer_and_fuse"):
        rms_norm(tx * 2, tw, 1e-6).exp()  # warm: compiles the fused program
        torch_tpu.sync()
        torch_tpu.reset_metrics()
        out = rms_norm(tx * 2, tw, 1e-6).exp()
        torch_tpu.sync()
    assert torch_tpu.metrics()["programs_executed"] == 1
    torch.testing.assert_close(out.cpu(), F.rms_norm(x * 2, (16,), w, eps=1e-6).exp(), rtol=1e-5, atol=1e-5)


def test_static_arguments_are_part_of_the_cache_key():
    x = torch.randn(4, 16)
    w = torch.ones(16)
    for eps in (1e-6, 1.0, 10.0):
        torch.testing.assert_close(
            rms_norm(x.tpu(), w.tpu(), eps).cpu(), F.rms_norm(x, (16,), w, eps=eps), rtol=1e-5, atol=1e-6
        )


# ---- a Pallas kernel (interpret mode on the CPU plugin) --------------------


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, scale):
    q, k, v = q_ref[...], k_ref[...], v_ref[...]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * scale
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    o_ref[...] = (jnp.dot(p, v) / jnp.sum(p, axis=-1, keepdims=True)).astype(o_ref.dtype)


@jax_op("jaxop_test::pallas_attention")
def pallas_attention(q, k, v):
    """One grid step per (batch, head): softmax(q k^T / sqrt(d)) v."""
    b, h, s, d = q.shape
    spec = pl.BlockSpec((None, None, s, d), lambda i, j: (i, j, 0, 0))
    return pl.pallas_call(
        lambda *refs: _attention_kernel(*refs, scale=d**-0.5),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(b, h),
        in_specs=[spec, spec, spec],
        out_specs=spec,
    )(q, k, v)


@pytest.mark.parametrize("mode", MODES)
def test_pallas_attention_matches_scaled_dot_product_attention(mode):
    run = in_mode(mode, lambda q, k, v: pallas_attention(q, k, v) * 2)
    for seed in range(3):
        torch.manual_seed(seed)
        q, k, v = (torch.randn(2, 3, 8, 16) for _ in range(3))
        out = run(q.tpu(), k.tpu(), v.tpu())
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v) * 2, rtol=1e-5, atol=1e-5)
    if mode == "compiled":
        assert tpu_compile.stats()["graph_replays"] == 2


def test_pallas_kernels_run_in_interpret_mode_on_the_cpu_plugin():
    assert torch_tpu.plugin_info()["platform_name"].lower() == "cpu"
    assert torch_tpu.pallas.interpret_pallas()


# ---- a donated KV-cache update in a decode loop ----------------------------


@jax_op("jaxop_test::write_kv", donate_argnums=(0,))
def write_kv(cache, new, position):
    """cache [B, T, D] gets new [B, 1, D] at `position` (a 0-d int tensor)."""
    return jax.lax.dynamic_update_slice(cache, new, (0, position, 0))


def update_and_sum_over_time(cache, new, position):
    """The new cache, and the sum over time so far (a decode step's read):
    the op returns the latter alone, as a 1-tuple."""
    updated = jax.lax.dynamic_update_slice(cache, new, (0, position, 0))
    return updated, jnp.sum(updated, axis=1)


write_kv_and_read = jax_op("jaxop_test::write_kv_and_read", update_and_sum_over_time, donate_argnums=(0,))


def decode_loop(step, cache, steps, seed=0):
    torch.manual_seed(seed)
    news = [torch.randn(cache.shape[0], 1, cache.shape[2]) for _ in range(steps)]
    reads = []
    for t, new in enumerate(news):
        reads.append(step(cache, new.tpu(), torch.tensor(t).tpu()))
    return news, reads


@pytest.mark.parametrize("mode", MODES)
def test_donated_kv_cache_is_updated_in_place_without_a_copy(mode):
    step = in_mode(mode, lambda cache, new, pos: write_kv_and_read(cache, new, pos)[0] * 1.0)
    cache = torch.zeros(2, 64, 32).tpu()
    storage, ptr = cache.untyped_storage()._cdata, cache.data_ptr()
    decode_loop(step, cache, 3)  # warms every program
    cache.zero_()
    torch_tpu.sync()
    torch_tpu.reset_metrics()  # peak_device_bytes starts from what is live now
    live = torch_tpu.metrics()["live_device_bytes"]
    news, reads = decode_loop(step, cache, 6, seed=1)
    torch_tpu.sync()
    # The cache kept its storage and pointer, and no step had a second
    # cache-sized buffer alive: its old buffer was the new one's memory.
    assert cache.untyped_storage()._cdata == storage and cache.data_ptr() == ptr
    assert torch_tpu.metrics()["peak_device_bytes"] - live < cache.nbytes
    expected = torch.zeros(2, 64, 32)
    for t, (new, read) in enumerate(zip(news, reads)):
        expected[:, t : t + 1] = new
        torch.testing.assert_close(read.cpu(), expected.sum(1))
    torch.testing.assert_close(cache.cpu(), expected)
    if mode == "compiled":
        assert tpu_compile.stats()["graph_replays"] >= 6


def test_donated_kv_cache_is_updated_in_place_in_a_compiled_training_step():
    """A graph whose other inputs require grad is a training graph; the cache
    requires none, so AOTAutograd keeps its mutation inside the forward
    program (keep_inference_input_mutations holds for training graphs too):
    no copy_ after the graph, no second cache-sized buffer."""
    torch.manual_seed(0)
    reference = nn.Linear(32, 4)
    ours = nn.Linear(32, 4)
    ours.load_state_dict(reference.state_dict())
    ours.tpu()

    def step(cache, new, pos):
        return ours(write_kv_and_read(cache, new, pos)[0]).square().sum()

    run = torch.compile(step, backend="tpu")
    cache = torch.zeros(2, 64, 32).tpu()
    storage, ptr = cache.untyped_storage()._cdata, cache.data_ptr()
    for t in range(3):  # warms the forward and backward programs
        run(cache, torch.randn(2, 1, 32).tpu(), torch.tensor(t).tpu()).backward()
    cache.zero_()
    ours.zero_grad(set_to_none=False)
    torch_tpu.sync()
    torch_tpu.reset_metrics()
    live = torch_tpu.metrics()["live_device_bytes"]
    expected_cache = torch.zeros(2, 64, 32)
    for t in range(4):
        new = torch.randn(2, 1, 32)
        loss = run(cache, new.tpu(), torch.tensor(t).tpu())
        loss.backward()
        expected_cache[:, t : t + 1] = new
        expected_loss = reference(expected_cache.sum(1)).square().sum()
        expected_loss.backward()
        torch.testing.assert_close(loss.detach().cpu(), expected_loss.detach(), rtol=1e-5, atol=1e-5)
    torch_tpu.sync()
    assert cache.untyped_storage()._cdata == storage and cache.data_ptr() == ptr
    assert torch_tpu.metrics()["peak_device_bytes"] - live < cache.nbytes
    torch.testing.assert_close(cache.cpu(), expected_cache)
    for p, q in zip(ours.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-4)
    assert tpu_compile.stats()["graph_replays"] >= 8  # forward and backward of every measured step


@pytest.mark.parametrize("mode", ["strict", "compiled"])
def test_donating_op_given_an_argument_that_requires_grad_raises(mode):
    # An op of its own, so its first JAX trace happens here whatever ran
    # before: compiled, the refused first call makes Dynamo run the frame
    # eagerly from then on with its frame hook installed, and the op's JAX
    # trace must not be handed to Dynamo (it raised InternalTorchDynamoError).
    op = jax_op(f"jaxop_test::write_kv_and_read_{mode}", update_and_sum_over_time, donate_argnums=(0,))
    w = torch.ones(32).tpu().requires_grad_()
    run = in_mode(mode, lambda cache, new, pos: op(cache, new * w, pos)[0])
    cache = torch.zeros(2, 8, 32).tpu()
    with pytest.raises(RuntimeError, match="argument 'new' requires grad.*donates arguments"):
        run(cache, torch.ones(2, 1, 32).tpu(), torch.tensor(0).tpu())
    with torch.no_grad():
        run(cache, torch.ones(2, 1, 32).tpu(), torch.tensor(0).tpu())
    torch.testing.assert_close(cache[:, 0].cpu(), torch.ones(2, 32))


def test_donated_argument_only_op_returns_nothing_and_writes_the_view_it_was_given():
    cache = torch.zeros(3, 5, 2)
    tcache = cache.tpu()
    for t in range(5):
        new = torch.randn(2, 1, 2)
        assert write_kv(tcache[1:], new.tpu(), torch.tensor(t).tpu()) is None
        cache[1:, t : t + 1] = new
    torch.testing.assert_close(tcache.cpu(), cache)


# ---- bad input: clear Python exceptions at the call ------------------------


def test_non_array_argument_without_annotation_raises_type_error():
    with pytest.raises(TypeError, match=r"argument 'eps' is a float.*annotated.*eps: float"):

        @jax_op("jaxop_test::unannotated")
        def scaled(x, eps):
            return x * eps

        scaled(torch.ones(3).tpu(), 0.5)


def test_tensor_on_another_device_raises_like_pytorch():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*tpu:0 and cpu"):
        rms_norm(torch.ones(2, 4).tpu(), torch.ones(4), 1e-6)


_shape_flip = {"wide": False}


@jax_op("jaxop_test::unstable")
def unstable(x):
    # Traces differently once the flag flips: its module no longer returns
    # what the fake kernel promised.
    return jnp.concatenate([x, x]) if _shape_flip["wide"] else x.astype(jnp.float64)


def test_module_disagreeing_with_the_fake_kernel_raises_runtime_error():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.ones(3).tpu()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = unstable(mode.from_tensor(x))
    assert fake.shape == (3,) and fake.dtype == torch.float64
    _shape_flip["wide"] = True
    try:
        with pytest.raises(RuntimeError, match=r"result 0 .* is tensor<6xf32>, its fake kernel says tensor<3xf64>"):
            unstable(x)
    finally:
        _shape_flip["wide"] = False


def test_result_dtype_comes_from_jax_eval_shape():
    x = torch.arange(6, dtype=torch.int64).tpu()
    out = unstable(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), torch.arange(6, dtype=torch.float64))


def test_donated_result_must_match_its_argument():
    @jax_op("jaxop_test::bad_donation", donate_argnums=(0,))
    def bad(cache, new):
        return new

    with pytest.raises(ValueError, match="donated argument 'cache'"):
        bad(torch.zeros(4).tpu(), torch.zeros(2).tpu())


def test_missing_jax_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(ImportError, match=r"pip install torch_tpu\[jax\]"):
        jax_op("jaxop_test::no_jax", lambda x: x)


# ---- StableHLO versions -----------------------------------------------------


def test_plugin_reads_the_stablehlo_jax_emits():
    from jaxlib.mlir.dialects import stablehlo

    from torch_tpu.pallas.jax_custom_op import _version_tuple

    plugin = torch_tpu.plugin_info()["attributes"]["stablehlo_current_version"]
    # The pinned JAX emits what the plugin reads, or a module is checked
    # against the plugin's version before it reaches its compiler.
    assert _version_tuple(stablehlo.get_current_version()) <= _version_tuple(plugin) or _version_tuple(
        stablehlo.get_minimum_version()
    ) <= _version_tuple(plugin)


def test_module_the_plugins_stablehlo_cannot_express_raises_naming_both_versions(monkeypatch):
    from jaxlib.mlir.dialects import stablehlo

    import torch_tpu.pallas.jax_custom_op as jax_op_module

    monkeypatch.setattr(jax_op_module, "_plugin_attribute", lambda name: "0.1.0")

    @jax_op("jaxop_test::old_plugin")
    def double(x):
        return x * 2

    pattern = rf"JAX emits StableHLO {stablehlo.get_current_version()}.*up to 0\.1\.0"
    with pytest.raises(RuntimeError, match=pattern):
        double(torch.ones(3).tpu())


# ---- exported modules in the compilation cache's disk tier ------------------

_EXPORT_SCRIPT = """
import json

import jax.numpy as jnp
import torch

import torch_tpu
from torch_tpu.pallas import export_stats, jax_op


@jax_op("jaxop_disk::scaled_tanh", autograd=True)
def scaled_tanh(x, scale: float):
    return jnp.tanh(x) * scale


x = torch.linspace(-2, 2, 12).reshape(3, 4).tpu()
plain = scaled_tanh(x, 0.5)  # no grad: the op's own module
x.requires_grad_()
out = scaled_tanh(x, 0.5)  # the forward with residuals, then the pullback
out.sum().backward()
print(json.dumps({"stats": export_stats(), "modules": torch_tpu.cache_stats()["modules"],
                  "plain": plain.cpu().tolist(), "grad": x.grad.cpu().tolist()}))
"""


def test_a_second_process_reads_exported_modules_from_the_disk_tier_without_lowering(tmp_path):
    import json
    import os
    import subprocess

    script = tmp_path / "export_twice.py"
    script.write_text(_EXPORT_SCRIPT)
    cache = tmp_path / "cache"
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache))
    runs = []

    def run():
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.splitlines()[-1]))
        return runs[-1], done.stderr

    first, _ = run()
    second, _ = run()
    # The op, its forward with residuals and its pullback: three modules.
    assert first["stats"] == {"lowerings": 3, "disk_hits": 0} and first["modules"]["writes"] == 3
    assert second["stats"] == {"lowerings": 0, "disk_hits": 3} and second["modules"]["hits"] == 3
    # A damaged entry is ignored with a warning, exported again and rewritten.
    modules = sorted(cache.glob("*.mlir"))
    assert len(modules) == 3
    modules[0].write_bytes(modules[0].read_bytes()[:-20])
    third, stderr = run()
    assert third["stats"] == {"lowerings": 1, "disk_hits": 2} and third["modules"]["writes"] == 1
    assert "is unusable (truncated)" in stderr
    x = torch.linspace(-2, 2, 12).reshape(3, 4)
    for run in runs:
        torch.testing.assert_close(torch.tensor(run["plain"]), x.tanh() * 0.5)
        torch.testing.assert_close(torch.tensor(run["grad"]), 0.5 * (1 - x.tanh() ** 2))


def test_export_cache_key_follows_the_function_code_and_static_values():
    from torch_tpu.pallas.jax_custom_op import _function_fingerprint

    def double(x):
        return x * 2

    def triple(x):
        return x * 3

    assert _function_fingerprint(double) == _function_fingerprint(double)
    assert _function_fingerprint(double) != _function_fingerprint(triple)

    def scaled_by(table):
        return lambda x: x * table

    assert _function_fingerprint(scaled_by(jnp.arange(3.0))) != _function_fingerprint(scaled_by(jnp.ones(3)))
    before = _function_fingerprint(unstable._fn)
    _shape_flip["wide"] = True  # a global the function reads
    try:
        assert _function_fingerprint(unstable._fn) != before
    finally:
        _shape_flip["wide"] = False
