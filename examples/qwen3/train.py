"""A small Qwen3 (transformers' Qwen3ForCausalLM) trained on the text in
examples/data under bfloat16 autocast, then greedy generation with a static KV
cache (compiled on tpu), also under autocast.

    python examples/qwen3/train.py                 # on tpu, tiny default size
    python examples/qwen3/train.py --device cpu    # the same run on native CPU
    python examples/qwen3/train.py --steps 500 --hidden-size 128 --layers 4
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402


def build_model(args, dataset):
    """Weights initialised on CPU from the seed, then moved to the device."""
    import transformers

    # Qwen3Config's head_dim defaults to 128 whatever the hidden size.
    config = transformers.Qwen3Config(head_dim=args.hidden_size // args.heads, **common.lm_config_kwargs(args, dataset))
    return common.seeded(args.seed, lambda: transformers.Qwen3ForCausalLM(config)).to(args.device)


def run(args, progress=False):
    """Trains, then generates. Returns a dict: losses (one float per step),
    text (the greedy continuation of --prompt), logits (each generated
    token's, [new_tokens, vocab] on CPU), tokens_per_s (training),
    decode_tokens_per_s (generation, compilation included on tpu), params."""
    dataset = common.CharDataset()
    model = build_model(args, dataset)
    # The weights and the optimizer stay float32; matmuls and attention run
    # in bfloat16 (autocast's policy, the same on tpu as on CUDA).
    amp = torch.bfloat16 if args.amp == "bf16" else None
    losses, tokens_per_s = common.train_causal_lm(model, dataset, args.device, args, amp_dtype=amp, progress=progress)
    text, logits, decode_rate = common.generate_static(
        model, dataset, args.device, args.prompt, args.new_tokens, amp_dtype=amp
    )
    params = sum(p.numel() for p in model.parameters())
    return dict(
        losses=losses,
        text=text,
        logits=logits,
        tokens_per_s=tokens_per_s,
        decode_tokens_per_s=decode_rate,
        params=params,
    )


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_device_flags(p, steps=200)
    common.add_lm_flags(p)
    p.add_argument("--amp", default="bf16", choices=["bf16", "off"], help="autocast dtype")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, f"qwen3 (autocast {args.amp})")
    print(f"training: {out['tokens_per_s']:,.0f} tokens/s (compilation included)")
    print(f"generation (static cache): {out['decode_tokens_per_s']:,.1f} tokens/s (compilation included)")
    print(f"{args.prompt}{out['text']}")


if __name__ == "__main__":
    main()
