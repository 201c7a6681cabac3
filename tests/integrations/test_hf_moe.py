"""Mixture-of-experts models on tpu: transformers' expert routing counts tokens
per expert with an integer torch.histc, which runs on the device. Forward,
greedy generate and a training step's gradients match CPU."""

import pytest
import torch
import transformers

import torch_tpu

MODELS = {
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
    "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_moe_forward_generate_and_gradients_match_cpu(name):
    config_class, model_class = MODELS[name]
    cfg = config_class(
        hidden_size=64,
        intermediate_size=64,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        num_local_experts=4,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    cpu = model_class(cfg)
    tpu = model_class(cfg)
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    torch_tpu.reset_metrics()  # the count is per process: another test's fallbacks may precede this one
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch_tpu.matmul_precision("highest"):
        cpu.eval(), tpu.eval()
        with torch.no_grad():
            torch.testing.assert_close(tpu(ids.to("tpu")).logits.cpu(), cpu(ids).logits, atol=1e-4, rtol=1e-4)
        expected = cpu.generate(ids[:1], max_new_tokens=6, do_sample=False)
        assert torch.equal(tpu.generate(ids[:1].to("tpu"), max_new_tokens=6, do_sample=False).cpu(), expected)
        cpu.train(), tpu.train()
        loss_cpu = cpu(ids, labels=ids).loss
        loss_tpu = tpu(ids.to("tpu"), labels=ids.to("tpu")).loss
        loss_cpu.backward()
        loss_tpu.backward()
    torch.testing.assert_close(loss_tpu.cpu(), loss_cpu, atol=1e-5, rtol=1e-5)
    for (n, p), q in zip(cpu.named_parameters(), tpu.parameters()):
        if p.grad is not None:
            torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-3, msg=n)
    assert torch_tpu.metrics()["cpu_fallbacks"] == {}
