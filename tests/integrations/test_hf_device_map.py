"""accelerate's placement on tpu (torch_tpu/integrations/accelerate.py):
device_map="auto" and max_memory put layers on tpu, as they put them on
CUDA, and a split model computes what the CPU model computes."""

import contextlib
import gc
import os
import subprocess
import sys
import textwrap

import accelerate
import pytest
import torch
import transformers


def _tiny_gpt2(n_layer=4):
    cfg = transformers.GPT2Config(n_layer=n_layer, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2")
    _tiny_gpt2().save_pretrained(path)
    return path


@contextlib.contextmanager
def _device_with_free_memory(free_bytes):
    """tpu:0 as a device with `free_bytes` left for this process
    (torch.tpu.set_per_process_memory_fraction, as torch.cuda's): the XLA:CPU
    plugin's devices have all of host memory, more than any test model."""
    total = torch.tpu.mem_get_info(0)[1]
    # (free is also bounded by what the host has available, which varies)
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated(0) + free_bytes) / total, 0)
    try:
        yield
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0, 0)


def _bytes(module):
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.cpu()


def test_mem_get_info_counts_live_tensors():
    free, total = torch.tpu.mem_get_info(0)
    assert 0 < free <= total
    with _device_with_free_memory(2**30):  # what other processes hold on the host cannot move free
        free, total = torch.tpu.mem_get_info(0)
        x = torch.empty(64 * 2**20, dtype=torch.uint8, device="tpu")
        free_after, total_after = torch.tpu.mem_get_info("tpu:0")
    assert total_after == total and free - free_after >= x.numel() - 2**20  # other threads' tensors may come and go
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.tpu.mem_get_info(torch.tpu.device_count())


def test_device_map_auto_loads_on_tpu(checkpoint):
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    model = transformers.GPT2LMHeadModel.from_pretrained(checkpoint, device_map="auto").eval()
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    # (transformers sets hf_device_map only for a model split across devices)
    cpu = transformers.GPT2LMHeadModel.from_pretrained(checkpoint).eval()
    torch.testing.assert_close(_logits(model, ids.to("tpu")), _logits(cpu, ids), atol=1e-5, rtol=1e-5)


def test_max_memory_splits_layers_between_tpu_and_cpu(checkpoint):
    cpu = transformers.GPT2LMHeadModel.from_pretrained(checkpoint).eval()
    block = sum(p.numel() * p.element_size() for p in cpu.transformer.h[0].parameters())
    embeddings = sum(p.numel() * p.element_size() for p in cpu.transformer.wte.parameters())
    # Room on tpu for the embeddings and about two blocks: the rest goes to CPU.
    budget = embeddings * 2 + block * 2
    model = transformers.GPT2LMHeadModel.from_pretrained(
        checkpoint, device_map="auto", max_memory={"tpu": budget, "cpu": "1GiB"}
    ).eval()
    placed = set(model.hf_device_map.values())
    assert 0 in placed and "cpu" in placed, model.hf_device_map
    # As on CUDA, accelerate offloads the "cpu" layers: their weights wait on
    # CPU (parameters on meta) and run on the main device, tpu:0.
    assert {p.device.type for p in model.parameters()} == {"tpu", "meta"}
    ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
    torch.testing.assert_close(_logits(model, ids), _logits(cpu, ids), atol=1e-5, rtol=1e-5)


def test_infer_auto_device_map_names_tpu_devices():
    model = _tiny_gpt2(n_layer=2)
    for key in ("tpu", "tpu:0", torch.device("tpu", 0), 0):
        device_map = accelerate.infer_auto_device_map(model, max_memory={key: "1GiB", "cpu": "1GiB"})
        assert set(device_map.values()) == {0}, (key, device_map)
    with pytest.raises(ValueError, match="not available"):
        accelerate.infer_auto_device_map(model, max_memory={"tpu:7": "1GiB"})


def test_integration_also_applies_when_accelerate_was_imported_first(tmp_path):
    # Without torch's autoload, transformers and accelerate bind their names
    # before torch_tpu exists; importing torch_tpu then patches them in place.
    script = textwrap.dedent("""
        import transformers.integrations.accelerate as hf_accelerate
        import accelerate.utils
        import torch_tpu
        assert torch_tpu  # noqa
        memory = hf_accelerate.get_max_memory()
        assert 0 in memory and "cpu" in memory, memory
        assert accelerate.utils.get_max_memory()[0] > 0
        print("ok")
    """)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


def test_per_process_memory_fraction_bounds_allocations_as_on_cuda():
    assert torch.tpu.get_per_process_memory_fraction(0) == 1.0
    with _device_with_free_memory(2**20):
        free, _ = torch.tpu.mem_get_info(0)
        assert 2**20 - 4096 <= free <= 2**20 + 4096
        kept = torch.empty(2**19, dtype=torch.uint8, device="tpu")
        with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory. Tried to allocate 1.00 MiB.*may allocate"):
            torch.empty(2**20, dtype=torch.uint8, device="tpu")
        del kept
        torch.empty(2**20 - 8192, dtype=torch.uint8, device="tpu")  # room again once freed
    assert torch.tpu.get_per_process_memory_fraction(0) == 1.0
    with pytest.raises(TypeError, match="must be `float`"):
        torch.tpu.set_per_process_memory_fraction(1, 0)
    with pytest.raises(ValueError, match="Invalid fraction value: 1.5. Allowed range: 0~1"):
        torch.tpu.set_per_process_memory_fraction(1.5, 0)


def test_device_map_auto_places_within_the_memory_the_device_reports(checkpoint):
    # No max_memory: the tpu budget is what the device reports free, so a
    # model larger than that is split with CPU instead of failing to load.
    cpu = transformers.GPT2LMHeadModel.from_pretrained(checkpoint).eval()
    room = 2 * _bytes(cpu.transformer.wte) + 2 * _bytes(cpu.transformer.h[0])
    assert room < _bytes(cpu)
    with _device_with_free_memory(room):
        model = transformers.GPT2LMHeadModel.from_pretrained(checkpoint, device_map="auto").eval()
        on_tpu = sum(_bytes(model.get_submodule(name)) for name, d in model.hf_device_map.items() if d == 0)
        assert 0 < on_tpu <= room and "cpu" in model.hf_device_map.values(), model.hf_device_map
        ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
        torch.testing.assert_close(_logits(model, ids), _logits(cpu, ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "placement", [{"device_map": {"": 0}}, {"device_map": "auto", "max_memory": {"tpu": "1GiB", "cpu": "1GiB"}}]
)
def test_device_map_asking_for_more_than_the_device_has_raises_out_of_memory(checkpoint, placement):
    # As on CUDA, a placement the user asked for is taken at its word (an
    # explicit map, or a max_memory above what the device has), and loading
    # fails with torch.OutOfMemoryError, which accelerate recognizes as an
    # out-of-memory error (find_executable_batch_size retries on it).
    from accelerate.utils.memory import should_reduce_batch_size

    cpu = transformers.GPT2LMHeadModel.from_pretrained(checkpoint)
    gc.collect()  # earlier tests' garbage, which would be freed below
    with _device_with_free_memory(_bytes(cpu) // 2):
        free_before = torch.tpu.mem_get_info(0)[0]
        with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory") as raised:
            transformers.GPT2LMHeadModel.from_pretrained(checkpoint, **placement)
        assert should_reduce_batch_size(raised.value)
        del raised
        gc.collect()
        assert torch.tpu.mem_get_info(0)[0] >= free_before  # the partly loaded weights are freed
