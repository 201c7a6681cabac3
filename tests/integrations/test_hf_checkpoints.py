"""Hugging Face checkpoints of a tpu model: save_pretrained writes what the
CPU model writes, from_pretrained(device_map="tpu") loads onto tpu (tied
weights kept) and computes what the CPU model computes. Needs transformers
and accelerate (requirements.txt installs both)."""

import accelerate  # noqa: F401 - from_pretrained(device_map=...) needs it
import torch
import transformers
from safetensors.torch import load_file


def _tiny_gpt2():
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=32)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_save_pretrained_of_a_tpu_model_writes_the_cpu_weights(tmp_path):
    cpu = _tiny_gpt2()
    cpu.save_pretrained(tmp_path / "cpu")
    tpu = _tiny_gpt2().to("tpu")
    tpu.save_pretrained(tmp_path / "tpu")
    a, b = load_file(tmp_path / "cpu" / "model.safetensors"), load_file(tmp_path / "tpu" / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=0, rtol=0, msg=k)


def test_from_pretrained_with_device_map_tpu(tmp_path):
    cpu = _tiny_gpt2()
    cpu.save_pretrained(tmp_path)
    tpu = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, device_map="tpu").eval()
    assert all(p.device.type == "tpu" for p in tpu.parameters())
    assert tpu.lm_head.weight is tpu.transformer.wte.weight
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(tpu(ids.to("tpu")).logits.cpu(), cpu(ids).logits, atol=1e-5, rtol=1e-5)
