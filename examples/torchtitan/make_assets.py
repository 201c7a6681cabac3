"""Writes the example's offline assets (committed; run again to remake them):

- assets/tokenizer/: a byte-level tokenizer (256 byte tokens, begin- and
  end-of-text), in the Hugging Face format TorchTitan loads
  (tokenizer.json, tokenizer_config.json). One token per byte, so a
  document's token count is its length in bytes plus two.
- assets/synthetic_text/train.jsonl: one seeded, made-up document, repeated.
  At 63 bytes a document is exactly one 64-token training sequence, so
  every batch TorchTitan's dataloader makes is the same batch.

    python examples/torchtitan/make_assets.py
"""

import json
import os
import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
SEQ_LEN = 64
DOCUMENTS = 64


def tokenizer():
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    vocab[BOS], vocab[EOS] = len(vocab), len(vocab) + 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([BOS, EOS])
    return tok


def document():
    rng = random.Random(0)
    words = ["tpu", "xla", "torch", "titan", "llama", "train", "loss", "step", "shard", "grad"]
    text = ""
    while len(text) < SEQ_LEN - 1:
        text += rng.choice(words) + " "
    return text[: SEQ_LEN - 1]


def main():
    out = os.path.join(HERE, "assets", "tokenizer")
    os.makedirs(out, exist_ok=True)
    tok = tokenizer()
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": False, "add_eos_token": False}, f, indent=2)
        f.write("\n")
    text = document()
    assert len(tok.encode(text).ids) == len(text.encode()) == SEQ_LEN - 1
    data = os.path.join(HERE, "assets", "synthetic_text")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "train.jsonl"), "w") as f:
        for _ in range(DOCUMENTS):
            f.write(json.dumps({"text": text}) + "\n")


if __name__ == "__main__":
    main()
