"""Tiny Hugging Face checkpoints that vLLM can load, made here: random weights,
a byte-level BPE tokenizer trained by the `tokenizers` library on a few
sentences, and a chat template, written with `save_pretrained`. No hub.

    python tests/integrations/vllm_models.py llama /tmp/tiny-llama
"""

import os
import sys

import tokenizers
import torch
import transformers

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A tiny model answers every question with random words.",
    "Serving language models on tpu with paged attention and continuous batching.",
    "Hello, how are you today? I am fine, thank you.",
    "Tensors live in device buffers; programs are compiled once and replayed.",
] * 4

_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

# head_dim 32: the smallest head size vLLM's CPU attention backend (the
# reference) accepts.
_SIZES = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=512,
)


def _tokenizer():
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    special = ["<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=special,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS, trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|eos|>"
    )
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def make_tiny_model(family, path, seed=0):
    """Writes a tiny `family` ("llama" or "qwen3") checkpoint to `path` and returns `path`."""
    tokenizer = _tokenizer()
    common = dict(
        _SIZES,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    if family == "llama":
        config = transformers.LlamaConfig(**common)
        model_cls = transformers.LlamaForCausalLM
    elif family == "qwen3":
        config = transformers.Qwen3Config(**common)
        model_cls = transformers.Qwen3ForCausalLM
    else:
        raise ValueError(f"unknown family {family!r}: llama or qwen3")
    torch.manual_seed(seed)
    model = model_cls(config)
    # Large random weights: the logits' top two are far apart, so greedy
    # tokens do not flip on an ulp between two correct attention programs.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.5)
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


if __name__ == "__main__":
    print(make_tiny_model(sys.argv[1], sys.argv[2]))
