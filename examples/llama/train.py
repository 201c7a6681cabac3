"""A small Llama (transformers' LlamaForCausalLM) trained on the text in
examples/data, then greedy generation with a static KV cache, compiled on tpu.

    python examples/llama/train.py                 # on tpu, tiny default size
    python examples/llama/train.py --device cpu    # the same run on native CPU
    python examples/llama/train.py --steps 500 --hidden-size 128 --layers 4
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402


def build_model(args, dataset):
    """Weights initialised on CPU from the seed, then moved to the device."""
    import transformers

    config = transformers.LlamaConfig(**common.lm_config_kwargs(args, dataset))
    return common.seeded(args.seed, lambda: transformers.LlamaForCausalLM(config)).to(args.device)


def run(args, progress=False):
    """Trains, then generates. Returns a dict: losses (one float per step),
    text (the greedy continuation of --prompt), logits (each generated
    token's, [new_tokens, vocab] on CPU), tokens_per_s (training),
    decode_tokens_per_s (generation, compilation included on tpu), params."""
    dataset = common.CharDataset()
    model = build_model(args, dataset)
    losses, tokens_per_s = common.train_causal_lm(model, dataset, args.device, args, progress=progress)
    text, logits, decode_rate = common.generate_static(model, dataset, args.device, args.prompt, args.new_tokens)
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
    common.add_device_flags(p, steps=300)
    common.add_lm_flags(p)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, "llama")
    print(f"training: {out['tokens_per_s']:,.0f} tokens/s (compilation included)")
    print(f"generation (static cache): {out['decode_tokens_per_s']:,.1f} tokens/s (compilation included)")
    print(f"{args.prompt}{out['text']}")


if __name__ == "__main__":
    main()
