"""accelerate's placement on tpu (torch_tpu/integrations/accelerate.py):
device_map="auto" and max_memory put layers on tpu, as they put them on
CUDA, and a split model computes what the CPU model computes."""

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


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.cpu()


def test_mem_get_info_counts_live_tensors():
    free, total = torch.tpu.mem_get_info(0)
    assert 0 < free <= total
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
