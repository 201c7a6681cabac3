"""PEFT LoRA on tpu: a tiny llama with LoRA adapters trains as on CPU (loss
of each AdamW step, adapter weights after them, a frozen base), and its
adapter saves from tpu and loads back onto a tpu base model, where it (and
the merged model) computes what the trained one does."""

import peft
import pytest
import torch
from distributed_jobs.hf_trainer import VOCAB, tiny_llama

import torch_tpu

STEPS = 3


def _lora_llama():
    model = tiny_llama()
    torch.manual_seed(1)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.0)
    model = peft.get_peft_model(model, config)
    # LoRA starts B at zero (the adapted model is the base model), so A's
    # first gradient is zero; a random B trains both from the first step.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    return model


def _batch(device):
    ids = torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(3))
    return ids.to(device)


def _adapter(model):
    return {name: p.detach().cpu() for name, p in model.named_parameters() if "lora_" in name}


def _train(device):
    model = _lora_llama().to(device)
    frozen = {name: p.detach().cpu() for name, p in model.named_parameters() if not p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = _batch(device)
    losses = []
    for _ in range(STEPS):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return model, losses, frozen


@pytest.fixture(scope="module")
def trained():
    # (a module fixture runs before conftest's per-test "highest")
    with torch_tpu.matmul_precision("highest"):
        return _train("cpu"), _train("tpu")


def test_lora_training_matches_cpu(trained):
    (cpu, cpu_losses, _), (tpu, tpu_losses, tpu_frozen) = trained
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-5, atol=1e-5)
    expected = _adapter(cpu)
    assert len(expected) == 2 * 3 * 2  # A and B of three modules in each of two layers
    for name, weight in _adapter(tpu).items():
        torch.testing.assert_close(weight, expected[name], rtol=1e-4, atol=1e-5, msg=name)
    for name, p in tpu.named_parameters():
        if not p.requires_grad:
            assert p.device.type == "tpu"
            torch.testing.assert_close(p.detach().cpu(), tpu_frozen[name], rtol=0, atol=0, msg=name)


def test_adapter_saved_from_tpu_loads_onto_a_tpu_model(trained, tmp_path):
    _, (tpu, _, _) = trained
    tpu.save_pretrained(tmp_path)
    loaded = peft.PeftModel.from_pretrained(tiny_llama().to("tpu"), tmp_path)
    assert {p.device.type for p in loaded.parameters()} == {"tpu"}
    adapter = _adapter(tpu)
    loaded_adapter = _adapter(loaded)
    assert loaded_adapter.keys() == adapter.keys()
    for name, weight in loaded_adapter.items():
        torch.testing.assert_close(weight, adapter[name], rtol=0, atol=0, msg=name)
    ids = _batch("tpu")
    with torch.no_grad():
        expected = tpu(input_ids=ids).logits.cpu()
        torch.testing.assert_close(loaded(input_ids=ids).logits.cpu(), expected, rtol=1e-5, atol=1e-5)
        merged = loaded.merge_and_unload()
        torch.testing.assert_close(merged(input_ids=ids).logits.cpu(), expected, rtol=1e-4, atol=1e-4)
