"""The `tpu` device as PyTorch sees it: registration, torch.tpu, several devices."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torch_tpu


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, timeout=300
    )


def test_tpu_is_a_native_device():
    x = torch.ones(3, device="tpu")
    assert x.device.type == "tpu" and x.is_tpu
    assert x.device.index == 0
    assert isinstance(x, torch.Tensor) and type(x) is torch.Tensor  # no subclass, no lazy tensor
    assert x.untyped_storage().device.type == "tpu"


def test_generated_methods_move_tensors_and_modules():
    t = torch.arange(4).tpu()
    assert t.is_tpu
    m = torch.nn.Linear(2, 2).tpu()
    assert all(p.is_tpu for p in m.parameters())
    assert torch.equal(t.cpu(), torch.arange(4))


def test_torch_tpu_module_basics():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 1
    assert torch.tpu.current_device() == 0
    assert isinstance(torch.tpu.get_device_name(), str)
    props = torch.tpu.get_device_properties(0)
    assert props.name == torch.tpu.get_device_name(0)
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    torch.tpu.synchronize()


def test_accelerator_api_sees_tpu():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() == 1
    torch.accelerator.synchronize()


def test_streams_and_events_exist_for_fsdp_style_code():
    s = torch.tpu.current_stream()
    assert s.device.type == "tpu"
    e = torch.tpu.Event()
    e.record(s)
    s.wait_event(e)
    torch.tpu.default_stream().wait_stream(s)
    e.synchronize()
    assert e.query()


def test_rng_state_round_trip_reproduces_values():
    torch.tpu.manual_seed(123)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 123


def test_memory_allocated_tracks_live_storages():
    before = torch.tpu.memory_allocated()
    x = torch.ones(1024, 256, device="tpu")  # 1 MiB
    x.add_(1)
    assert torch.tpu.memory_allocated() >= before + x.nbytes
    del x


def test_lowered_ops_are_listed():
    ops = torch_tpu.lowered_ops()
    assert "aten::add.Tensor" in ops and "aten::add_.Tensor" in ops


def test_registered_ops_are_never_composite_implicit():
    # Registering a purely CompositeImplicitAutograd op for the device would
    # bypass its decomposition and break autograd. (Ops that also have a CPU
    # kernel, like silu_backward, are real backend ops.)
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    offenders = [
        name for name in torch_tpu.lowered_ops() if has(name, "CompositeImplicitAutograd") and not has(name, "CPU")
    ]
    assert offenders == []


def test_info_module_prints_plugin_and_devices():
    r = run_python("import runpy; runpy.run_module('torch_tpu.info', run_name='__main__')")
    assert r.returncode == 0, r.stderr
    assert "PJRT C API: plugin" in r.stdout
    assert "stablehlo_current_version" in r.stdout
    assert "tpu:0" in r.stdout


def test_two_devices_copy_between_them():
    r = run_python(
        """
        import torch, torch_tpu
        assert torch.tpu.device_count() == 2, torch.tpu.device_count()
        a = torch.arange(6.0).reshape(2, 3).to("tpu:1")
        assert a.device == torch.device("tpu:1")
        b = (a * 2).to("tpu:0")
        assert b.device == torch.device("tpu:0")
        c = a.t().to("tpu:0")          # a non-contiguous view across devices
        assert torch.equal(c.cpu(), torch.arange(6.0).reshape(2, 3).t())
        assert torch.equal(b.cpu(), torch.arange(6.0).reshape(2, 3) * 2)
        with torch.tpu.device(1):
            d = torch.ones(2, device="tpu")
        assert d.device.index == 1
        try:
            a + b
        except RuntimeError as e:
            assert "same device" in str(e)
        else:
            raise AssertionError("mixing tpu:0 and tpu:1 must raise")
        print("ok")
    """,
        TORCH_TPU_NUM_DEVICES="2",
    )
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_names_code_written_for_cuda_or_torchtpu_reaches_for():
    # torch.cuda's device_of, default_generators, OutOfMemoryError,
    # StreamContext and amp, and TorchTPU's _get_cache_stats, on two devices.
    r = run_python(
        """
        import warnings
        import torch, torch_tpu
        a = torch.ones(2, device="tpu:1")
        with torch.tpu.device_of(a):
            assert torch.tpu.current_device() == 1
            assert torch.ones(1, device="tpu").device.index == 1
        assert torch.tpu.current_device() == 0
        with torch.tpu.device_of(torch.ones(2)):  # not on tpu: no change
            assert torch.tpu.current_device() == 0

        gens = torch.tpu.default_generators
        assert gens is torch.tpu.default_generators and len(gens) == 2
        assert [g.device for g in gens] == [torch.device("tpu:0"), torch.device("tpu:1")]
        gens[1].manual_seed(7)
        first = torch.randn(4, device="tpu:1").cpu()
        torch.tpu.manual_seed_all(7)
        assert torch.equal(torch.randn(4, device="tpu:1").cpu(), first)  # the device's own generator
        assert gens[0].initial_seed() == 7 and torch.tpu.initial_seed() == 7

        assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
        stats = torch.tpu._get_cache_stats()
        assert stats == torch_tpu.cache_stats() and stats["memory"]["misses"] > 0

        s = torch.tpu.Stream()
        with torch.tpu.stream(s) as entered:
            assert entered is s
        assert isinstance(torch.tpu.stream(s), torch.tpu.StreamContext)

        from torch.tpu.amp import GradScaler, autocast, custom_fwd
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with autocast():
                y = torch.ones(4, 4, device="tpu") @ torch.ones(4, 4, device="tpu")
            scaler = GradScaler()

            class Twice(torch.autograd.Function):
                @staticmethod
                @custom_fwd(cast_inputs=torch.float32)
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            with torch.autocast("tpu"):
                z = Twice.apply(torch.ones(3, device="tpu", dtype=torch.bfloat16))
        assert y.dtype == torch.bfloat16  # tpu's autocast dtype
        assert z.dtype == torch.float32  # custom_fwd cast the input for tpu's autocast
        assert scaler._device == "tpu" and isinstance(scaler, torch.amp.GradScaler)
        said = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
        assert any("torch.amp.autocast('tpu'" in m for m in said), said
        assert any("torch.amp.GradScaler('tpu'" in m for m in said), said
        print("ok")
    """,
        TORCH_TPU_NUM_DEVICES="2",
    )
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_sync_debug_mode_reports_host_reads_and_not_explicit_waits(mode):
    said = "called a synchronizing tpu operation"
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        x = torch.arange(4.0, device="tpu") * 2
        torch.tpu.set_sync_debug_mode("warn")
        assert torch.tpu.get_sync_debug_mode() == 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert x.sum().item() == 12.0
            assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
            torch.tpu.synchronize()
            torch.tpu.current_stream().synchronize()
        assert sum(str(w.message).startswith(said) for w in caught) == 2  # item() and cpu(), not the waits asked for

        torch.tpu.set_sync_debug_mode(2)
        y = x + 1  # DeferAndFuse keeps it pending through the refused reads
        for read in (y.cpu, lambda: y.max().item(), lambda: torch.nonzero(y), lambda: print(y)):
            with pytest.raises(RuntimeError, match=said):
                read()
        torch.tpu.synchronize()  # asked for: never refused
        torch.tpu.set_sync_debug_mode("default")
        assert y.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]  # nothing was lost or half-done
        for bad in ("loud", 3, -1):
            with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
                torch.tpu.set_sync_debug_mode(bad)
        assert torch.tpu.get_sync_debug_mode() == 0
    finally:
        torch.tpu.set_sync_debug_mode("default")
        torch_tpu.set_eager_mode(previous)


def test_import_torch_alone_autoloads_the_backend():
    r = run_python("""
        import torch
        print(torch.ones(2, device="tpu").cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert "[1.0, 1.0]" in r.stdout


def test_tied_parameters_stay_tied_when_moved():
    m = torch.nn.Module()
    m.emb = torch.nn.Embedding(10, 4)
    m.head = torch.nn.Linear(4, 10, bias=False)
    m.head.weight = m.emb.weight
    m.to("tpu")
    assert m.head.weight is m.emb.weight and m.emb.weight.is_tpu
    m.cpu()
    assert m.head.weight is m.emb.weight
