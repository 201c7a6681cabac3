"""torch.compile on tpu: compiled and eager tpu agree, graphs fuse into one
program each, the default backend follows the inputs' device."""

import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
from repo_paths import EXAMPLES

import torch_tpu
import torch_tpu.compile as tpu_compile

sys.path.insert(0, EXAMPLES)

import train_gpt  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    tpu_compile.reset_stats()  # counters and reasons start from zero in every test
    yield
    torch._dynamo.reset()


def grads(model):
    return [p.grad.cpu() for p in model.parameters()]


def test_mlp_outputs_and_gradients_match_eager():
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3)).tpu()
    compiled_model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3)).tpu()
    compiled_model.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_model, backend="tpu")
    x = torch.randn(16, 8).tpu()
    y_e, y_c = eager(x), compiled(x)
    torch.testing.assert_close(y_c.cpu(), y_e.cpu(), rtol=1e-5, atol=1e-6)
    y_e.square().sum().backward()
    y_c.square().sum().backward()
    for g_c, g_e in zip(grads(compiled_model), grads(eager)):
        torch.testing.assert_close(g_c, g_e, rtol=1e-5, atol=1e-6)


def test_each_graph_runs_as_one_program():
    f = torch.compile(lambda x: ((x * 2).sin() + x.cos()).softmax(-1).sum(-1), backend="tpu")
    x = torch.randn(4, 8).tpu()
    f(x)  # compile
    torch_tpu.sync()
    torch_tpu.reset_metrics()
    out = f(x)
    torch_tpu.sync()
    m = torch_tpu.metrics()
    assert m["programs_executed"] == 1 and m["compiles"] == 0
    torch.testing.assert_close(out.cpu(), ((x.cpu() * 2).sin() + x.cpu().cos()).softmax(-1).sum(-1))


def gpt_setup(dataset):
    config = train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=32, dropout=0.0
    )
    return config


def test_gpt_training_step_compiled_matches_eager():
    dataset = train_gpt.CharDataset()
    config = gpt_setup(dataset)
    runs = {}
    for name in ("eager", "compiled"):
        model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 11)
        # No backend named: tpu inputs pick the tpu backend.
        step_model = torch.compile(model) if name == "compiled" else model
        generator = torch.Generator().manual_seed(11)
        losses = []
        for _ in range(4):
            x, y = train_gpt.get_batch(dataset.data, 4, config.block_size, generator, "tpu")
            losses.append(train_gpt.train_step(step_model, optimizer, x, y).item())
        runs[name] = (losses, [p.detach().cpu() for p in model.parameters()])
    for a, b in zip(runs["eager"][0], runs["compiled"][0]):
        assert abs(a - b) <= 1e-5 * abs(a)
    for p_e, p_c in zip(runs["eager"][1], runs["compiled"][1]):
        torch.testing.assert_close(p_c, p_e, rtol=1e-4, atol=1e-5)


class WithGraphBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)

    def forward(self, x):
        h = self.a(x).relu()
        print("graph break here")
        if h.sum() > 0:  # data-dependent Python control flow
            return self.b(h) * 2
        return self.b(h) - 1


def test_model_with_graph_break_matches_eager(capsys):
    torch.manual_seed(3)
    model = WithGraphBreak().tpu()
    compiled = torch.compile(model, backend="tpu")
    for sign in (1.0, -1.0):
        x = (torch.rand(4, 6) * sign).tpu()
        torch.testing.assert_close(compiled(x).cpu(), model(x).cpu(), rtol=1e-5, atol=1e-6)
    assert "graph break here" in capsys.readouterr().out


def test_default_backend_follows_the_device():
    before = tpu_compile.stats()["graphs_compiled"]
    f = torch.compile(lambda x: x * 3 + 1)
    torch.testing.assert_close(f(torch.ones(3).tpu()).cpu(), torch.full((3,), 4.0))
    assert tpu_compile.stats()["graphs_compiled"] == before + 1
    torch._dynamo.reset()
    g = torch.compile(lambda x: x * 3 + 1)  # a CPU model still goes to Inductor
    torch.testing.assert_close(g(torch.ones(3)), torch.full((3,), 4.0))
    assert tpu_compile.stats()["graphs_compiled"] == before + 1


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_inductor_modes_on_a_tpu_model_run_the_tpu_backend(mode, monkeypatch):
    # Code written for CUDA names a mode; on tpu it used to reach Inductor,
    # which ran the graph op by op (and backend="tpu" with a mode raised a
    # TypeError).
    lin = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    for backend in ("inductor", "tpu"):
        torch._dynamo.reset()
        before = tpu_compile.stats()["graphs_compiled"]
        f = torch.compile(copy.deepcopy(lin).tpu(), backend=backend, mode=mode)
        torch.testing.assert_close(f(x.tpu()).cpu(), lin(x))
        assert tpu_compile.stats()["graphs_compiled"] == before + 1
    # A CPU model still gets Inductor, with the mode.
    # Its __init__ records the mode; the class itself stays, since Dynamo
    # checks backends with isinstance against it (torch 2.14).
    seen = []
    inductor_wrapper = torch._TorchCompileInductorWrapper
    init = inductor_wrapper.__init__

    def recording_init(self, mode, *args, **kwargs):
        seen.append(mode)
        init(self, mode, *args, **kwargs)

    monkeypatch.setattr(inductor_wrapper, "__init__", recording_init)
    torch._dynamo.reset()
    g = torch.compile(lambda x: x * 3 + 1, mode=mode)
    torch.testing.assert_close(g(torch.ones(3)), torch.full((3,), 4.0))
    assert seen == [mode]


def test_unknown_mode_raises_and_inductor_options_warn_on_tpu():
    x = torch.ones(3).tpu()
    for backend in ("tpu", "inductor"):
        with pytest.raises(RuntimeError, match="Unrecognized mode=fastest"):
            torch.compile(lambda x: x + 1, backend=backend, mode="fastest")
    with pytest.warns(UserWarning, match="configure Inductor"):
        out = torch.compile(lambda x: x + 1, options={"max_autotune": True})(x)
    torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))


def test_training_with_changing_lr_compiles_nothing_after_the_first_step():
    dataset = train_gpt.CharDataset()
    config = gpt_setup(dataset)
    model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 5)
    compiled = torch.compile(model, backend="tpu")
    generator = torch.Generator().manual_seed(5)
    for step in range(21):
        for group in optimizer.param_groups:
            group["lr"] = 1e-3 / (1 + step)
        x, y = train_gpt.get_batch(dataset.data, 4, config.block_size, generator, "tpu")
        train_gpt.train_step(compiled, optimizer, x, y)
        if step == 0:
            torch_tpu.sync()
            torch_tpu.reset_metrics()
            graphs = tpu_compile.stats()["graphs_compiled"]
    torch_tpu.sync()
    assert torch_tpu.metrics()["compiles"] == 0
    assert tpu_compile.stats()["graphs_compiled"] == graphs


def test_second_process_compiling_the_model_finds_every_program_on_disk(tmp_path):
    code = textwrap.dedent("""
        import torch, torch_tpu
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).tpu()
        c = torch.compile(m, backend="tpu")
        c(torch.randn(3, 8).tpu()).sum().backward()
        s = torch_tpu.cache_stats()
        print("COMPILES", s["compiles"], "DISK_HITS", s["disk"]["hits"], flush=True)
        # Then a normal interpreter exit: it used to abort now and then after a
        # compiled backward ("terminate called without an active exception").
    """)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        fields = r.stdout.split()
        outs.append(dict(zip(fields[::2], map(int, fields[1::2]))))
    assert outs[0]["COMPILES"] > 0
    assert outs[1]["COMPILES"] == 0 and outs[1]["DISK_HITS"] == outs[0]["COMPILES"]


def test_dump_hlo_writes_each_program_also_from_a_warm_disk_cache(tmp_path):
    code = textwrap.dedent("""
        import torch, torch_tpu
        f = torch.compile(lambda x: (x * 5).exp().sum(), backend="tpu")
        print(f(torch.ones(7, 3).tpu()).item())
    """)
    for run, dump in enumerate(("hlo_cold", "hlo_warm")):  # the second process loads every program from disk
        env = dict(os.environ, TORCH_TPU_DUMP_HLO=str(tmp_path / dump), TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        texts = [p.read_text() for p in (tmp_path / dump).iterdir()]
        assert any("stablehlo.exponential" in t and "tensor<7x3xf32>" in t for t in texts), run


def test_dynamic_shapes_compile_per_shape_and_stay_correct():
    f = torch.compile(lambda x: (x * 2).sum(0), backend="tpu", dynamic=True)
    for n in (3, 5, 9):
        x = torch.randn(n, 4)
        torch.testing.assert_close(f(x.tpu()).cpu(), (x * 2).sum(0))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16 * 3 * 3, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.conv2(x))
        return self.head(x.flatten(1))


def test_small_cnn_with_batch_norm_and_pooling_matches_eager():
    torch.manual_seed(2)
    eager = SmallCNN().tpu()
    twin = SmallCNN().tpu()
    twin.load_state_dict(eager.state_dict())
    compiled = torch.compile(twin)
    x = torch.randn(4, 3, 14, 14).tpu()
    y_e, y_c = eager(x), compiled(x)
    torch.testing.assert_close(y_c.cpu(), y_e.cpu(), rtol=1e-4, atol=1e-5)
    y_e.square().sum().backward()
    y_c.square().sum().backward()
    for g_c, g_e in zip(grads(twin), grads(eager)):
        torch.testing.assert_close(g_c, g_e, rtol=1e-4, atol=1e-5)
    # BatchNorm's running statistics (mutated inputs of the graph) are written back.
    torch.testing.assert_close(twin.bn1.running_mean.cpu(), eager.bn1.running_mean.cpu(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(twin.bn1.running_var.cpu(), eager.bn1.running_var.cpu(), rtol=1e-5, atol=1e-6)


def test_training_steps_replay_captured_programs_without_lowering_any_graph_op():
    dataset = train_gpt.CharDataset()
    config = gpt_setup(dataset)
    model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 3)
    compiled = torch.compile(model, backend="tpu")
    generator = torch.Generator().manual_seed(3)
    batches = [train_gpt.get_batch(dataset.data, 4, config.block_size, generator, "tpu") for _ in range(6)]
    for x, y in batches[:2]:
        train_gpt.train_step(compiled, optimizer, x, y)
    torch_tpu.sync()
    torch_tpu.reset_metrics()
    for x, y in batches[2:]:
        train_gpt.train_step(compiled, optimizer, x, y)
    torch_tpu.sync()
    m = torch_tpu.metrics()
    # Forward and backward graph of each of the 4 steps: replayed, not traced.
    assert m["graphs"]["graph_replays"] == 8 and m["graphs"]["graph_traces"] == 0
    assert m["graph_replays"] == 8
    # Ops recorded into graph programs run in defer_and_fuse mode; replays record none.
    assert m["ops_by_mode"].get("defer_and_fuse", 0) == 0
    assert m["compiles"] == 0


def test_batch_size_change_makes_a_dynamic_graph_that_replays_a_program_per_shape():
    # A smaller batch (the last of an epoch) makes Dynamo recompile with the
    # batch dimension dynamic; that graph went through SDPA's backend choice
    # with symbolic sizes (it used to raise "Cannot call numel() on tensor
    # with symbolic sizes/strides"), and returns sizes for the backward,
    # which used to make every later call trace the graph again.
    dataset = train_gpt.CharDataset()
    config = gpt_setup(dataset)
    generator = torch.Generator().manual_seed(5)
    sizes = [4, 4, 2, 4, 2, 4, 2, 4]
    batches = [train_gpt.get_batch(dataset.data, b, config.block_size, generator) for b in sizes]
    runs = {}
    for name in ("eager", "compiled"):
        model, optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 5)
        step_model = torch.compile(model, backend="tpu") if name == "compiled" else model
        losses = []
        for i, (x, y) in enumerate(batches):
            if i == 5:
                torch_tpu.sync()
                traces = tpu_compile.stats()["graph_traces"]
            losses.append(train_gpt.train_step(step_model, optimizer, x.tpu(), y.tpu()).item())
        runs[name] = (losses, [p.detach().cpu() for p in model.parameters()])
    stats = tpu_compile.stats()
    assert stats["recompiles"] == 1  # the dynamic graph, once
    assert stats["graph_traces"] == traces  # calls 5-7, both shapes seen before: replays only
    for a, b in zip(runs["eager"][0], runs["compiled"][0]):
        assert abs(a - b) <= 1e-5 * abs(a)
    for p_e, p_c in zip(runs["eager"][1], runs["compiled"][1]):
        torch.testing.assert_close(p_c, p_e, rtol=1e-4, atol=1e-5)


def test_a_graph_keeps_the_programs_of_its_most_recently_used_shapes(monkeypatch):
    monkeypatch.setattr(tpu_compile, "MAX_CAPTURES_PER_GRAPH", 3)
    f = torch.compile(lambda x: (x * 2).sum(0), backend="tpu", dynamic=True)
    for n in (2, 3, 4, 5, 3, 5, 3):  # 2 and 4 drop out; 3 and 5 stay in use
        x = torch.randn(n, 4)
        torch.testing.assert_close(f(x.tpu()).cpu(), (x * 2).sum(0))
    stats = tpu_compile.stats()
    assert stats["graph_traces"] == 4 and stats["graph_replays"] == 3, stats


def test_numbers_read_from_tensor_data_are_never_replayed():
    # The count of nonzeros in a CPU tensor is a number from its data, which a
    # replay's signature (dtypes and sizes) does not cover: such a graph is
    # traced on every call, unlike sizes of a dynamic graph.
    config = torch._dynamo.config
    with config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        f = torch.compile(lambda x, c: (x * 2, c.nonzero().shape[0]), backend="tpu", fullgraph=True)
        x = torch.ones(3).tpu()
        for v in (1, 2, 3):
            out, count = f(x, torch.arange(4) < v)
            assert count == v
            torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))


def test_input_with_another_storage_offset_is_traced_again_and_stays_correct():
    f = torch.compile(lambda x: x.sin() * x, backend="tpu")
    a = torch.randn(5, 8)
    ta = a.tpu()
    torch.testing.assert_close(f(ta[1:]).cpu(), a[1:].sin() * a[1:])
    torch.testing.assert_close(f(ta[1:]).cpu(), a[1:].sin() * a[1:])  # replayed
    before = tpu_compile.stats()
    # Same sizes and strides (no Dynamo guard fails), another storage offset:
    # the captured program does not match, so the graph is traced again.
    torch.testing.assert_close(f(ta[:-1]).cpu(), a[:-1].sin() * a[:-1])
    after = tpu_compile.stats()
    assert after["graph_traces"] == before["graph_traces"] + 1
    assert any("offset" in reason for reason in after["trace_reasons"]), after["trace_reasons"]
    torch.testing.assert_close(f(ta[:-1]).cpu(), a[:-1].sin() * a[:-1])  # its own capture now
    assert tpu_compile.stats()["graph_replays"] == after["graph_replays"] + 1


class _ScaledLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        # A Python number (wrapped into a fresh 0-d CPU tensor on every call),
        # a CPU tensor constant and a tensor made on the device in forward
        # (both lifted by AOTAutograd into attributes of the graph module).
        y = self.linear(x) * 2.5 - torch.tensor(0.25)
        return y + torch.tensor([1.0, 2.0, 3.0, 4.0], device=x.device)


def test_graphs_with_python_numbers_and_tensor_constants_are_replayed():
    torch.manual_seed(0)
    model = _ScaledLinear()
    model_tpu = _ScaledLinear().to("tpu")
    model_tpu.load_state_dict(model.state_dict())
    compiled = torch.compile(model_tpu, backend="tpu")
    x = torch.randn(3, 4)
    before = tpu_compile.stats()
    for _ in range(3):
        out = compiled(x.to("tpu"))
        out.sum().backward()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(model_tpu.linear.weight.grad.cpu(), 3 * model.linear.weight.grad)
    after = tpu_compile.stats()
    # Forward and backward graphs: traced on the first call, replayed on the next two.
    assert after["graph_replays"] - before["graph_replays"] == 4, after["trace_reasons"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_changing_float_beside_an_alpha_keeps_the_alpha(dtype):
    # Dynamo passes a float that changed between calls as a symbol, and
    # AOTAutograd's tensorify pass rebuilt add and sub without their alpha:
    # torch.add(x, s, alpha=3) computed x + s from the second value on.
    torch.manual_seed(0)
    x = (torch.randn(256) * 3).to(dtype)
    fns = {
        "add": lambda t, s: torch.add(t, s, alpha=3),
        "sub": lambda t, s: torch.sub(t, s, alpha=-2),
        "method": lambda t, s: t.add(s, alpha=0.5) * 2,
    }
    for name, fn in fns.items():
        compiled = torch.compile(fn, backend="tpu")
        for s in (0.5, 0.25, 1.7, -2.2, 0.25):
            torch.testing.assert_close(compiled(x.to("tpu"), s).cpu(), fn(x, s), msg=f"{name}, s={s}")
    # A float beside no alpha still becomes a tensor input: one graph for every value.
    torch._dynamo.reset()
    before = tpu_compile.stats()["graphs_compiled"]
    compiled = torch.compile(lambda t, s: t * s + s, backend="tpu")
    for s in (0.5, 0.25, 1.7, -2.2):
        torch.testing.assert_close(compiled(x.to("tpu"), s).cpu(), x * s + s)
    assert tpu_compile.stats()["graphs_compiled"] - before == 2  # the first value's, then the dynamic one


def test_graph_that_mutates_its_input_writes_it_back_on_every_call():
    def bump(x, counter):
        counter.add_(1)
        return x + counter

    f = torch.compile(bump, backend="tpu")
    counter = torch.zeros(3, device="tpu")
    x = torch.arange(3.0, device="tpu")
    outs = [f(x, counter).cpu() for _ in range(3)]
    torch_tpu.reset_metrics()
    outs.append(f(x, counter).cpu())
    # The write to `counter` is inside the graph's program: no eager copy_ after it.
    assert torch_tpu.metrics()["programs_executed"] == 1
    for k, out in enumerate(outs, start=1):
        torch.testing.assert_close(out, torch.arange(3.0) + k)
    torch.testing.assert_close(counter.cpu(), torch.full((3,), 4.0))


def test_random_ops_in_compiled_graphs_draw_from_the_device_generator():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True), backend="tpu")
    x = torch.ones(64, 64, device="tpu")
    torch.manual_seed(7)
    first = [f(x).cpu() for _ in range(3)]
    torch.manual_seed(7)
    again = [f(x).cpu() for _ in range(3)]
    for a, b in zip(first, again):
        assert torch.equal(a, b)  # reproducible for a seed
    assert not torch.equal(first[1], first[2])  # each call draws anew (replays too)
    kept = first[2].ne(0).float().mean().item()
    assert 0.4 < kept < 0.6
    assert set(first[2].unique().tolist()) <= {0.0, 2.0}


def test_dropout_backward_uses_the_forward_mask():
    # The partitioner recomputes cheap ops in the backward graph instead of
    # saving them; a random op is never recomputed (a new draw would not
    # match the forward's mask).
    f = torch.compile(lambda x: torch.nn.functional.dropout(x * 3, 0.5, training=True), backend="tpu")
    x = torch.ones(64, 64, device="tpu", requires_grad=True)
    y = f(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), (y.detach().cpu() != 0).float() * 6)


def test_forward_saves_only_what_the_backward_cannot_cheaply_recompute(monkeypatch):
    # AOTAutograd's min-cut partitioner: a chain of pointwise ops saves its
    # input alone and the backward program recomputes the rest (the default
    # partition would save every intermediate the derivatives read, each an
    # extra program output written to memory).
    graphs = []
    original = tpu_compile._graph_compiler

    def recording_compiler(gm, example_inputs, **kwargs):
        output = next(n for n in gm.graph.nodes if n.op == "output")
        graphs.append((len(example_inputs), len(output.args[0])))
        return original(gm, example_inputs, **kwargs)

    monkeypatch.setattr(tpu_compile, "_graph_compiler", recording_compiler)
    tpu_compile._aot_backend.cache_clear()
    torch._dynamo.reset()
    try:
        f = torch.compile(lambda x: torch.nn.functional.gelu(x.sin() * 2).cos().sum(), backend="tpu")
        x = torch.randn(8, device="tpu", requires_grad=True)
        f(x).backward()
        x_cpu = x.detach().cpu().requires_grad_()
        torch.nn.functional.gelu(x_cpu.sin() * 2).cos().sum().backward()
        torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
    finally:
        monkeypatch.undo()
        tpu_compile._aot_backend.cache_clear()
        torch._dynamo.reset()
    (fw_inputs, fw_outputs), (bw_inputs, bw_outputs) = graphs
    assert fw_outputs == 2  # the loss and x, saved for the backward
    assert bw_inputs == 2 and bw_outputs == 1


def test_recompiles_are_counted_with_dynamos_reason():
    f = torch.compile(lambda x: x.sin(), backend="tpu", dynamic=False)
    f(torch.randn(4, device="tpu"))
    assert tpu_compile.stats()["recompiles"] == 0
    f(torch.randn(6, device="tpu"))
    stats = torch_tpu.cache_stats()["graphs"]
    assert stats["recompiles"] == 1
    (reason,) = stats["recompile_reasons"]
    assert "size" in reason or "shape" in reason, reason


@torch.library.custom_op("torch_tpu_test::cpu_only_twice", mutates_args=(), device_types="cpu")
def cpu_only_twice(x: torch.Tensor) -> torch.Tensor:
    """An op with a CPU kernel and no tpu one."""
    return x * 2


@cpu_only_twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_op_without_lowering_raises_at_compile_naming_it():
    f = torch.compile(lambda x: cpu_only_twice(x.sin()).cos(), backend="tpu")
    x = torch.randn(3, device="tpu")
    torch_tpu.sync()
    before = torch_tpu.metrics()["programs_executed"]
    with pytest.raises(Exception, match="torch_tpu_test::cpu_only_twice.*no tpu lowering"):
        f(x)
    torch_tpu.sync()
    assert torch_tpu.metrics()["programs_executed"] == before  # refused before running anything


def test_op_without_lowering_runs_on_cpu_inside_the_graph_with_the_fallback_on():
    f = torch.compile(lambda x: cpu_only_twice(x.sin()).cos(), backend="tpu")
    x = torch.randn(3)
    torch_tpu.cpu_fallback(True)
    try:
        with pytest.warns(UserWarning, match="cpu_only_twice has no tpu lowering"):
            out = f(x.tpu())
        again = f(x.tpu())
    finally:
        torch_tpu.cpu_fallback(False)
    torch.testing.assert_close(out.cpu(), (x.sin() * 2).cos())
    torch.testing.assert_close(again.cpu(), (x.sin() * 2).cos())


@pytest.mark.parametrize("eager_steps_first", [0, 1])
def test_compiled_optimizer_step_matches_eager(eager_steps_first):
    # As Dynamo does for CUDA, compiling the step of an optimizer whose tpu
    # parameters have no state yet makes it capturable: step counts on tpu,
    # and the step replays as one program (it used to keep them on the CPU,
    # and the graph, computing on CPU tensors, was traced on every call).
    # After an eager step, Dynamo moves the CPU step counts to tpu itself.
    results = {}
    for name in ("eager", "compiled"):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
        step = opt.step
        torch_tpu.reset_metrics()
        for k in range(5):
            if name == "compiled" and k == eager_steps_first:
                step = torch.compile(opt.step, backend="tpu")
            x = torch.randn(4, 6, generator=torch.Generator().manual_seed(k)).tpu()
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            step()
        results[name] = [p.detach().cpu() for p in model.parameters()]
        graphs = torch_tpu.metrics()["graphs"]
        capturable = opt.param_groups[0]["capturable"]
    for a, b in zip(results["eager"], results["compiled"]):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert capturable == (eager_steps_first == 0)
    assert graphs["graph_replays"] >= 3 and not graphs["trace_reasons"], graphs


def test_arange_after_another_op_replays():
    # HF decoders build position_ids this way: the arange's fresh out= tensor
    # is resized inside the graph, which must not split the captured program.
    def f(h):
        y = h * 2
        return y + torch.arange(8, device=h.device)

    g = torch.compile(f, backend="tpu")
    h = torch.randn(8)
    outs = [g(h.to("tpu")).cpu() for _ in range(4)]
    for out in outs:
        torch.testing.assert_close(out, f(h))
    stats = tpu_compile.stats()
    assert stats["graph_replays"] == 3, stats["trace_reasons"]


def test_resizing_a_storage_the_pending_program_writes_keeps_its_values():
    with torch_tpu.modes.eager_mode("defer_and_fuse"):
        x = torch.zeros(4, device="tpu")
        x.add_(torch.arange(4.0, device="tpu"))  # pending
        x.resize_(6)
        assert x[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        y = torch.ones(2, device="tpu") * 3  # pending; an unrelated fresh tensor resized after it
        z = torch.empty(0, device="tpu")
        torch.arange(3, out=z)
        assert y.cpu().tolist() == [3.0, 3.0] and z.cpu().tolist() == [0, 1, 2]


class _HostScalars:
    """What Hugging Face caches and attention scalings hold: CPU scalar
    tensors that each forward moves to the model's device or computes with."""

    offset = torch.tensor(3)
    head_dim = torch.tensor(16.0)


def _scaled_with_host_scalars(h, step):
    position = _HostScalars.offset.to(h.device) + step.to(h.device)  # a constant and a CPU input, copied
    scale = torch.sqrt(_HostScalars.head_dim * 1)  # CPU arithmetic on constants only
    return h / scale + position, position


def test_host_scalars_copied_to_tpu_or_computed_from_constants_replay():
    g = torch.compile(_scaled_with_host_scalars, backend="tpu")
    h = torch.randn(4, 8)
    outs = []
    for step in range(4):
        out, position = g(h.to("tpu"), torch.tensor(step))
        expected, expected_position = _scaled_with_host_scalars(h, torch.tensor(step))
        torch.testing.assert_close(out.cpu(), expected)
        assert position.device.type == "tpu" and position.item() == expected_position.item()
        outs.append(position)
    # Each call returned a tensor of its own: the constant's device copy is not shared.
    outs[0].add_(100)
    assert [p.item() for p in outs] == [103, 4, 5, 6] and _HostScalars.offset.item() == 3
    stats = tpu_compile.stats()
    assert stats["graph_replays"] == 3 and not stats["trace_reasons"], stats["trace_reasons"]


def test_graph_without_tpu_inputs_that_makes_tpu_tensors_replays():
    # Between two graph breaks (Longformer's `.item()`), a graph may only
    # build tpu tensors from Python numbers; it is captured like any other.
    def masks(n, fill):
        mask = torch.full((n, n), fill, device="tpu").triu(1)
        return mask * 2, torch.arange(n, device="tpu")

    g = torch.compile(masks, backend="tpu")
    for fill in (1.0, 1.0, 1.0):
        mask, idx = g(5, fill)
        torch.testing.assert_close(mask.cpu(), torch.full((5, 5), fill).triu(1) * 2)
        torch.testing.assert_close(idx.cpu(), torch.arange(5))
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 3 and stats["graph_replays"] == 2, stats


@pytest.mark.parametrize("requires_grad", [False, True])
def test_graph_of_views_only_replays_without_a_program(requires_grad):
    # A graph that runs no device op (a vision tower's reshapes between two
    # graph breaks, higgs_audio_v2's) is captured as an empty program: later
    # calls rebuild its views of the new inputs instead of tracing again.
    def patches(x):
        return x.view(2, 3, 4).transpose(1, 2)[:, 1:], x.unsqueeze(0).expand(2, 24)

    g = torch.compile(patches, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(4):
        x = torch.randn(24).requires_grad_(requires_grad)
        x_tpu = x.detach().to("tpu").requires_grad_(requires_grad)
        outs, expected = g(x_tpu), patches(x)
        for a, e in zip(outs, expected):
            assert a.shape == e.shape and a.stride() == e.stride()
            torch.testing.assert_close(a.detach().cpu(), e.detach())
        if requires_grad:
            sum((o * (i + 1)).sum() for i, o in enumerate(outs)).backward()
            sum((o * (i + 1)).sum() for i, o in enumerate(expected)).backward()
            torch.testing.assert_close(x_tpu.grad.cpu(), x.grad)
        else:  # still views of the input: a write through one shows in x
            outs[0][0, 0, 0] = 100.0
            expected[0][0, 0, 0] = 100.0
            torch.testing.assert_close(x_tpu.cpu(), x)
    after = tpu_compile.stats()
    assert after["graph_traces"] - before["graph_traces"] <= (2 if requires_grad else 1), after["trace_reasons"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


def test_cpu_tensor_made_inside_the_graph_and_copied_to_tpu_replays():
    # Idefics3's vision embeddings build their patch mask on the host,
    # torch.ones(shape).to(tpu, bool); the host prologue makes it before each
    # call and the program takes it as an input, instead of an upload inside
    # the graph that a replay could not repeat.
    def masked(x, fill):
        mask = torch.ones(2, 4).to(device=x.device, dtype=torch.bool)
        mask[:, 1] = False
        return torch.where(mask, x, fill) + torch.arange(4.0).to(x.device)

    g = torch.compile(masked, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        x = torch.randn(2, 4)
        torch.testing.assert_close(g(x.to("tpu"), 0.5).cpu(), masked(x, 0.5))
    after = tpu_compile.stats()
    assert after["graph_replays"] - before["graph_replays"] == 2, after["trace_reasons"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


def test_large_mask_computed_on_the_host_from_aranges_replays():
    # LongT5's local attention builds a block-distance mask from two CPU
    # aranges; it reads no graph input, so the prologue computes it once,
    # whatever its size, and the program takes its tpu copy as an input.
    def banded(x):
        i = torch.arange(48, dtype=torch.int32)
        j = torch.arange(40, dtype=torch.int32)
        near = (i[:, None] - j[None, :]).abs() < 8  # 1,920 elements
        return x * near.to(x.device)

    g = torch.compile(banded, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        x = torch.randn(48, 40)
        torch.testing.assert_close(g(x.to("tpu")).cpu(), banded(x))
    after = tpu_compile.stats()
    assert after["graph_replays"] - before["graph_replays"] == 2, after["trace_reasons"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


def test_graph_with_nothing_on_tpu_is_not_counted_as_a_tpu_graph_call():
    # Dynamo can leave an empty graph (or one of CPU numbers) between two
    # breaks of a tpu model (mimi's encoder): it runs as Python, neither
    # traced nor replayed, and only tpu graphs count as graph calls.
    def host_only(x):
        return x * 2

    g = torch.compile(host_only, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        torch.testing.assert_close(g(torch.ones(3)), torch.full((3,), 2.0))
    after = tpu_compile.stats()
    assert after["graph_calls"] == before["graph_calls"]
    assert after["graph_replays"] == before["graph_replays"]


@pytest.mark.parametrize("index_from", ["host arithmetic", "an input"])
def test_tpu_tensor_indexed_by_a_cpu_index_replays(index_from):
    # SAM's attention indexes its relative-position table with coordinates
    # built on the host; a CPU index tensor can also be a graph input. Both
    # arrive on tpu before the program runs instead of being uploaded
    # inside it.
    def relative(table, idx):
        if idx is None:
            coords = torch.arange(6)
            idx = coords[:, None] - coords[None, :] + 5
        return table[idx].sum(-1)

    g = torch.compile(relative, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        table = torch.randn(11, 4)
        idx = torch.randint(0, 11, (6, 6)) if index_from == "an input" else None
        torch.testing.assert_close(g(table.to("tpu"), idx).cpu(), relative(table, idx))
    after = tpu_compile.stats()
    assert after["graph_replays"] - before["graph_replays"] == 2, after["trace_reasons"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


def test_graph_that_only_copies_to_the_host_runs_as_a_download():
    # Between two graph breaks Dynamo can leave a graph whose one op copies
    # a tpu tensor to CPU (VITS's): a host read, with nothing to capture or
    # replay, and not counted as a tpu graph call.
    def download(x):
        return x.to("cpu", torch.float32)

    g = torch.compile(download, backend="tpu")
    before = tpu_compile.stats()
    for _ in range(3):
        x = torch.randn(4, 3).to(torch.float16)
        out = g(x.to("tpu"))
        assert out.device.type == "cpu"
        torch.testing.assert_close(out, x.float())
    after = tpu_compile.stats()
    assert after["graph_calls"] == before["graph_calls"]
    assert not any(r.startswith("not replayable") for r in after["trace_reasons"]), after["trace_reasons"]


def test_a_dynamic_graph_one_step_runs_at_many_shapes_replays_every_one_next_step():
    # An audio codec's convolution block is one graph Dynamo made dynamic,
    # run at each layer's channels and length (EnCodec's forward: 30 shapes):
    # the next forward replays each shape's program instead of tracing again.
    def block(x, weight, bias):
        return torch.nn.functional.elu(torch.nn.functional.conv1d(x, weight, bias, padding=1)) + x

    g = torch.compile(block, backend="tpu", dynamic=True)
    # channels and lengths unlike the batch and kernel sizes, which Dynamo would tie to them
    layers = [(torch.randn(2, c, 40 + c), torch.randn(c, c, 3), torch.randn(c)) for c in range(4, 16)]
    for step in range(2):
        if step == 1:
            tpu_compile.reset_stats()
        for args in layers:
            got = g(*[a.to("tpu") for a in args])
            torch.testing.assert_close(got.cpu(), block(*args), rtol=1e-4, atol=1e-5)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 12 and stats["graph_replays"] == 12, stats["trace_reasons"]


def test_random_indices_drawn_on_the_host_replay_with_eagers_draws():
    # Informer's ProbSparse attention samples keys with a CPU torch.randint
    # and indexes tpu tensors with them: the host prologue draws them on
    # every call, in the graph's order, from the CPU generator as eager does.
    def sampled(x):
        first = x[:, torch.randint(8, (4,))]
        return first * 2 + x[:, torch.randint(8, (4,))]

    g = torch.compile(sampled, backend="tpu")
    x = torch.randn(2, 8, 3)
    for seed in range(3):
        if seed == 2:
            tpu_compile.reset_stats()
        torch.manual_seed(seed)
        expected = sampled(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(g(x.to("tpu")).cpu(), expected)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 1 and stats["graph_replays"] == 1, stats["trace_reasons"]


def test_an_empty_tensor_the_graph_returns_replays_as_a_new_empty_tensor():
    # Reformer returns a copy of an empty constant (no op writes it): a
    # replay returns a new tensor of its shape and dtype.
    def with_empty(x):
        return x * 2, torch.tensor([], device=x.device), torch.empty(0, 3, dtype=torch.int64, device=x.device)

    g = torch.compile(with_empty, backend="tpu")
    for _ in range(3):
        x = torch.randn(4)
        outs, expected = g(x.to("tpu")), with_empty(x)
        for a, e in zip(outs, expected):
            assert a.device.type == "tpu" and a.shape == e.shape and a.dtype == e.dtype
            torch.testing.assert_close(a.cpu(), e)
    stats = tpu_compile.stats()
    assert stats["graph_replays"] == 2 and not stats["trace_reasons"], stats["trace_reasons"]


def test_a_mask_written_with_a_row_per_element_and_interleaved_repeats_replay():
    # T5Gemma 2 writes one embedding row at every image token
    # (x[ids == image] = row) and Kimi K2.5's vision tower repeats each
    # image's index by its patch count with output_size given: neither
    # needs a host read, so the graph replays.
    def scatter(x, ids, row, counts):
        x = x * 2
        x[ids == 3] = row
        image = torch.repeat_interleave(counts, output_size=6)
        return x, x[:, :6].sum(-1) + image

    g = torch.compile(scatter, backend="tpu")
    ids = torch.tensor([[3, 1, 2, 3, 0, 0, 3, 1], [0, 0, 0, 0, 0, 0, 0, 3]])
    counts = torch.tensor([2, 0, 3, 1])
    for _ in range(3):
        x, row = torch.randn(2, 8, 4), torch.randn(4)
        outs = g(x.to("tpu"), ids.to("tpu"), row.to("tpu"), counts.to("tpu"))
        for a, e in zip(outs, scatter(x, ids, row, counts)):
            torch.testing.assert_close(a.cpu(), e)
    stats = tpu_compile.stats()
    assert stats["graph_replays"] == 2 and not stats["trace_reasons"], stats["trace_reasons"]


def test_cpu_tensors_the_graph_returns_as_it_took_them_replay():
    # LightGlue passes a CPU mask through a graph between two breaks (its
    # `.bool()` of a bool tensor is no op), and Inkling2's vision tower
    # returns a CPU tensor the host prologue computed: a replay returns the
    # call's own CPU tensor there.
    def passes(x, mask, sizes):
        return x * 2, mask.bool(), (sizes + 1).cumsum(0).to(torch.int32)

    g = torch.compile(passes, backend="tpu")
    for step in range(3):
        x, mask, sizes = torch.randn(4, 3), torch.arange(4) < step, torch.arange(3) + step
        outs, expected = g(x.to("tpu"), mask, sizes), passes(x, mask, sizes)
        assert outs[0].device.type == "tpu" and outs[1].device.type == "cpu" and outs[2].device.type == "cpu"
        assert outs[1] is mask  # as eager returns it
        for a, e in zip(outs, expected):
            assert a.dtype == e.dtype
            torch.testing.assert_close(a.cpu(), e)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 3 and stats["graph_replays"] == 2, stats["trace_reasons"]
    assert not stats["trace_reasons"], stats["trace_reasons"]


def test_graph_that_downloads_and_computes_on_the_host_runs_as_a_host_read():
    # Inkling2's vision tower copies its grid sizes to CPU and computes its
    # patch offsets from them there, a graph of its own between two breaks:
    # it makes no tpu tensor, so there is no program to capture, and it is
    # not counted as a tpu graph call.
    def offsets(grid):
        sizes = grid.to("cpu", torch.int64) * torch.tensor([1, 2, 2])
        return sizes, torch.nn.functional.pad((sizes.prod(-1) + 1).cumsum(0), (1, 0)).to(torch.int32)

    g = torch.compile(offsets, backend="tpu")
    for step in range(3):
        grid = torch.tensor([[1, 2, 3], [1, 4, 2 + step]])
        outs, expected = g(grid.to("tpu")), offsets(grid)
        for a, e in zip(outs, expected):
            assert a.device.type == "cpu" and a.dtype == e.dtype
            torch.testing.assert_close(a, e)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 0 and not stats["trace_reasons"], stats


def test_cpu_table_detached_and_copied_to_tpu_replays():
    # VideoMAE keeps its sinusoidal position table as a plain CPU attribute
    # and adds `table.detach().type_as(x).to(x.device, copy=True)`. The table
    # (past the host prologue's 1,024 elements, so the detach stays in the
    # graph) arrives on tpu before the program runs, instead of an upload
    # inside the graph that split it.
    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(32, 32)
            self.table = torch.randn(1, 40, 32)  # not a buffer: .to() leaves it on CPU

        def forward(self, x):
            return self.linear(x) + self.table.detach().type_as(x).to(device=x.device, copy=True)

    torch.manual_seed(0)
    model = Embed()
    model_tpu = copy.deepcopy(model).to("tpu")
    model_tpu.table = model.table
    g = torch.compile(model_tpu, backend="tpu")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 40, 32)
            torch.testing.assert_close(g(x.to("tpu")).cpu(), model(x), rtol=1e-5, atol=1e-5)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] == 3 and stats["graph_replays"] == 2, stats["trace_reasons"]
    assert not stats["trace_reasons"], stats["trace_reasons"]
