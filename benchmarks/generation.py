"""Greedy decoding of a ~20M-parameter Llama (transformers' generate) on tpu
in each way it can run, side by side with native CPU: eager Strict and eager
DeferAndFuse with the default dynamic KV cache, eager Strict with a static
cache, and the static cache compiled (transformers compiles the decode step
on device type "tpu" with backend "tpu"). One run, ratios printed; then
whether the compiled decode steps replay (no traces, no compiles once warm).

    python benchmarks/generation.py [--new-tokens 64] [--prompt-len 32] [--batch 1] [--repeats 3]
"""

import argparse
import time

import torch
import transformers

import torch_tpu
import torch_tpu.compile as tpu_compile


def build(args):
    config = transformers.LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.prompt_len + args.new_tokens,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def generate(model, ids, args, cache):
    kwargs = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    elif cache == "static-eager":
        kwargs.update(cache_implementation="static", disable_compile=True)
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)


def tokens_per_second(model, ids, args, cache):
    """(best tokens/s over --repeats timed runs after one warm-up run, the
    generated ids on CPU). The warm-up compiles every program the run needs;
    torch_tpu.compile's stats are reset after it."""
    out = generate(model, ids, args, cache).cpu()
    tpu_compile.reset_stats()
    best = 0.0
    for _ in range(args.repeats):
        start = time.perf_counter()
        out = generate(model, ids, args, cache).cpu()  # .cpu() waits for the device
        best = max(best, args.batch * args.new_tokens / (time.perf_counter() - start))
    return best, out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per row; the best is printed")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--intermediate", type=int, default=1408)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--precision", default="highest", choices=["highest", "high", "medium"])
    args = p.parse_args()
    torch.set_float32_matmul_precision(args.precision)
    cpu_model = build(args)
    tpu_model = build(args).to("tpu")
    params = sum(q.numel() for q in cpu_model.parameters())
    ids = torch.randint(args.vocab, (args.batch, args.prompt_len), generator=torch.Generator().manual_seed(1))
    print(
        f"Llama: {params / 1e6:.1f}M parameters ({args.layers} layers, hidden {args.hidden}, vocab {args.vocab}); "
        f"batch {args.batch}, prompt {args.prompt_len}, {args.new_tokens} new tokens greedy; "
        f"best of {args.repeats} after one warm-up run"
    )
    rows = (  # name, device, eager mode, cache
        ("cpu eager", "cpu", None, "dynamic"),
        ("tpu Strict", "tpu", "strict", "dynamic"),
        ("tpu DeferAndFuse", "tpu", "defer_and_fuse", "dynamic"),
        ("tpu Strict, static cache", "tpu", "strict", "static-eager"),
        ("tpu compiled, static cache", "tpu", "strict", "static"),
    )
    results, cpu_out = {}, None
    for name, device, mode, cache in rows:
        model = cpu_model if device == "cpu" else tpu_model
        with torch_tpu.eager_mode(mode or "strict"):
            if cache == "static":
                torch._dynamo.reset()
            rate, out = tokens_per_second(model, ids.to(device), args, cache)
        stats = tpu_compile.stats() if cache == "static" else None
        results[name] = rate
        same = (
            "" if device == "cpu" else ("  tokens = cpu's" if torch.equal(out, cpu_out) else "  TOKENS DIFFER FROM CPU")
        )
        if device == "cpu":
            cpu_out = out
        print(f"{name:>28}: {rate:8.1f} tokens/s  ({1e3 / rate * args.batch:6.2f} ms/token){same}")
    strict, cpu = results["tpu Strict"], results["cpu eager"]
    print(
        "ratios:  "
        + ";  ".join(
            f"{name} / Strict {rate / strict:.2f}x, / CPU {rate / cpu:.2f}x"
            for name, rate in results.items()
            if name.startswith("tpu") and name != "tpu Strict"
        )
    )
    print(f"Strict / CPU eager: {strict / cpu:.2f}x")
    replays = (
        stats["graph_traces"] == 0 and stats["graphs_compiled"] == 0 and stats["graph_replays"] == stats["graph_calls"]
    )
    print(
        f"compiled static cache, the {args.repeats} timed runs: {stats['graph_calls']} graph calls, "
        f"{stats['graph_replays']} replays, {stats['graph_traces']} traces, {stats['graphs_compiled']} compiles"
        f" -> decode steps {'replay' if replays else 'DO NOT all replay'}"
    )


if __name__ == "__main__":
    main()
