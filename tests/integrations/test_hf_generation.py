"""Hugging Face generation on tpu: greedy tokens equal CPU's, and static-cache
decoding (transformers compiles it with backend "tpu" on device type "tpu")
replays one captured program per decode step once warm: no traces, no
compiles."""

import torch
import transformers

import torch_tpu.compile as tpu_compile


def _tiny_llama():
    cfg = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def test_static_cache_generate_matches_cpu_and_replays():
    torch._dynamo.reset()
    cpu = _tiny_llama()
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    expected = cpu.generate(ids, max_new_tokens=10, do_sample=False)
    tpu = _tiny_llama().to("tpu")
    warm = tpu.generate(ids.to("tpu"), max_new_tokens=10, do_sample=False, cache_implementation="static")
    assert torch.equal(warm.cpu(), expected)
    tpu_compile.reset_stats()
    again = tpu.generate(ids.to("tpu"), max_new_tokens=10, do_sample=False, cache_implementation="static")
    assert torch.equal(again.cpu(), expected)
    stats = tpu_compile.stats()
    assert stats["graph_calls"] >= 9, stats  # the decode steps ran compiled
    assert stats["graph_replays"] == stats["graph_calls"], stats
    assert stats["graph_traces"] == 0 and stats["graphs_compiled"] == 0, stats
    torch._dynamo.reset()
