"""A character-level GPT trained on the public-domain texts in examples/data/.

    python examples/train_gpt.py                  # on tpu, default size
    python examples/train_gpt.py --device cpu     # the same run on native CPU
    python examples/train_gpt.py --steps 50 --save ckpt.pt
    python examples/train_gpt.py --steps 100 --resume ckpt.pt   # steps 51-100, as one run of 100 would

The model is the usual decoder-only transformer (token + position embedding,
pre-LayerNorm blocks of causal self-attention and a GELU MLP, a final
LayerNorm, a linear head), written with plain torch.nn so the same code runs
on any device. Batches are drawn on CPU from a seeded generator and then
moved to the device, and the weights are initialised on CPU, so a tpu run and
a cpu run with the same seed see the same numbers: tests/training/test_gpt.py relies on
that.
"""

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


# ----------------------------------------------------------------------------
# Data


class CharDataset:
    """Every text file in a folder, concatenated; one token per character."""

    def __init__(self, data_dir=DATA_DIR):
        parts = []
        for name in sorted(os.listdir(data_dir)):
            if name.endswith(".txt"):
                with open(os.path.join(data_dir, name), encoding="utf-8") as f:
                    parts.append(f.read())
        if not parts:
            raise FileNotFoundError(f"no .txt files in {data_dir}")
        self.text = "\n\n".join(parts)
        self.chars = sorted(set(self.text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = torch.tensor([self.stoi[c] for c in self.text], dtype=torch.long)

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, s):
        return [self.stoi[c] for c in s if c in self.stoi]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


def get_batch(data, batch_size, block_size, generator, device="cpu"):
    """Random windows of `data` (a 1-d CPU tensor of token ids): inputs and
    next-token targets, drawn with `generator` on CPU so the batch sequence
    depends only on the seed, then moved to `device`."""
    starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[s : s + block_size] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + 1 + block_size] for s in starts.tolist()])
    return x.to(device), y.to(device)


# ----------------------------------------------------------------------------
# Model


@dataclass
class GPTConfig:
    vocab_size: int = 96
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head_size)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(self._init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(2 * n_layer) so the
        # residual stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(self, ids, new_tokens, temperature=1.0, generator=None):
        """Samples `new_tokens` characters after the list `ids`.

        Every step feeds a window of exactly block_size tokens, the context
        left-aligned and zero-padded on the right: attention is causal, so the
        logits at the context's last position do not see the padding, and one
        input shape means each op compiles once rather than once per length.
        The logits are sampled on CPU, so the text depends only on `generator`.
        """
        device = next(self.parameters()).device
        T = self.config.block_size
        ids = list(ids)
        for _ in range(new_tokens):
            context = ids[-T:]
            window = torch.zeros(1, T, dtype=torch.long)
            window[0, : len(context)] = torch.tensor(context, dtype=torch.long)
            logits, _ = self(window.to(device))
            last = logits[0, len(context) - 1].float().cpu() / temperature
            probs = torch.softmax(last, dim=-1)
            ids.append(int(torch.multinomial(probs, 1, generator=generator)))
        return ids


# ----------------------------------------------------------------------------
# Training


class Progress:
    """tqdm when it is installed, else one line rewritten with \\r."""

    def __init__(self, total, enabled=True):
        self.total, self.enabled, self.n = total, enabled, 0
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, dynamic_ncols=True)
            except ImportError:
                pass

    def update(self, n, **postfix):
        self.n += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(n)
            return
        text = " ".join(f"{k}={v}" for k, v in postfix.items())
        width = 30
        filled = width * self.n // max(self.total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.n}/{self.total} {text}   ")
        sys.stderr.flush()

    def close(self):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")


def make_model_and_optimizer(config, device, seed, lr=1e-3, weight_decay=0.1, foreach=None):
    """Initialises the weights on CPU from `seed` (so every device starts from
    the same numbers), then moves the model to `device`."""
    torch.manual_seed(seed)
    model = GPT(config).to(device)
    # nanoGPT's rule: weight decay on matrices (>= 2 dims), not on biases
    # and LayerNorm weights.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=foreach)
    return model, optimizer


def train_step(model, optimizer, x, y):
    """One optimizer step; returns the loss, detached, still on the device."""
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()


def save_checkpoint(path, model, optimizer, generator, step, device):
    """Everything a run needs to continue as if it never stopped: weights,
    optimizer state, the step, the batch generator and the RNG states
    (dropout draws from the device's). Written to a temporary file in the
    same folder, then renamed over `path`: a kill during the save leaves the
    previous checkpoint, never a truncated one."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "batch_rng": generator.get_state(),
        "cpu_rng": torch.get_rng_state(),
    }
    if device != "cpu":
        state["device_rng"] = getattr(torch, torch.device(device).type).get_rng_state()
    path = os.path.abspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_checkpoint(path, model, optimizer, generator, device):
    """Restores what save_checkpoint saved; returns the step it was saved at."""
    # weights_only (the default): tensors, numbers and dicts only. Tensors
    # load where they were saved (the optimizer's step counts stay on CPU,
    # as AdamW keeps them), or onto CPU for a CPU run.
    state = torch.load(path, map_location="cpu" if device == "cpu" else None)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["batch_rng"].cpu())
    torch.set_rng_state(state["cpu_rng"].cpu())
    if device != "cpu":
        module = getattr(torch, torch.device(device).type)
        if "device_rng" in state:
            module.set_rng_state(state["device_rng"].cpu())
        # The copies into the model run now, as their own program: under
        # DeferAndFuse the next step's program is then the one an
        # uninterrupted run builds, and rounds the same.
        module.synchronize()
    return state["step"]


def train(
    config,
    device,
    steps,
    seed,
    batch_size=16,
    lr=1e-3,
    dataset=None,
    eval_interval=0,
    progress=False,
    foreach=None,
    return_model=False,
    save=None,
    resume=None,
    compile=False,
):
    """Trains a GPT up to step `steps`; returns the per-step training losses
    as Python floats (and the model when `return_model`). A fresh model starts
    at step 1; with `resume` (a checkpoint path) the run continues after the
    step it was saved at, and its losses are those of the steps it ran.
    With `save`, a checkpoint is written at the end. `compile`: the model
    runs under torch.compile.

    The losses stay on the device until the end (a `.item()` per step would
    make the host wait for every step); they are read back when the progress
    line is refreshed (every `eval_interval` steps) and at the end.
    """
    dataset = dataset or CharDataset()
    generator = torch.Generator().manual_seed(seed)
    model, optimizer = make_model_and_optimizer(config, device, seed, lr=lr, foreach=foreach)
    first = 1
    if resume:
        first = load_checkpoint(resume, model, optimizer, generator, device) + 1
    model.train()
    step_model = torch.compile(model) if compile else model
    bar = Progress(steps - first + 1, enabled=progress)
    losses = []
    tokens_per_step = batch_size * config.block_size
    t0, last_step = time.perf_counter(), first - 1
    for step in range(first, steps + 1):
        x, y = get_batch(dataset.data, batch_size, config.block_size, generator, device)
        losses.append(train_step(step_model, optimizer, x, y))
        if progress and (step == steps or (eval_interval and step % eval_interval == 0)):
            value = losses[-1].item()  # waits for the step: the rate below is real
            now = time.perf_counter()
            rate = tokens_per_step * (step - last_step) / max(now - t0, 1e-9)
            bar.update(step - last_step, loss=f"{value:.4f}", tok_s=f"{rate:,.0f}")
            t0, last_step = now, step
    bar.close()
    if save:
        save_checkpoint(save, model, optimizer, generator, steps, device)
    values = [l.item() for l in losses]
    return (values, model) if return_model else values


def sample(model, dataset, prompt="The ", new_tokens=200, seed=0):
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    return dataset.decode(model.generate(dataset.encode(prompt), new_tokens, generator=generator))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-interval", type=int, default=10, help="refresh the progress line every N steps")
    p.add_argument(
        "--precision",
        default="high",
        choices=["highest", "high", "medium"],
        help="float32 matmul precision (torch.set_float32_matmul_precision)",
    )
    p.add_argument(
        "--mode",
        default="strict",
        choices=["strict", "debug", "defer_and_fuse"],
        help="tpu eager mode (torch_tpu.set_eager_mode)",
    )
    p.add_argument("--sample-tokens", type=int, default=200)
    p.add_argument("--compile", action="store_true", help="run the model under torch.compile")
    p.add_argument("--save", metavar="PATH", help="write a checkpoint at the end (atomically: temp file + rename)")
    p.add_argument("--resume", metavar="PATH", help="continue a run from a checkpoint --save wrote")
    return p.parse_args(argv)


def config_from_args(args, dataset):
    return GPTConfig(
        vocab_size=dataset.vocab_size,
        block_size=args.block_size,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        dropout=args.dropout,
    )


def main(argv=None):
    args = parse_args(argv)
    if args.device == "tpu":
        import torch_tpu  # registers the device

        torch_tpu.set_eager_mode(args.mode)
    torch.set_float32_matmul_precision(args.precision)
    dataset = CharDataset()
    config = config_from_args(args, dataset)
    print(
        f"data: {len(dataset.data):,} characters, vocab {dataset.vocab_size}; "
        f"model: {config.n_layer} layers, {config.n_head} heads, n_embd {config.n_embd}, "
        f"block {config.block_size}; device {args.device}" + (f" ({args.mode})" if args.device == "tpu" else "")
    )
    start = time.perf_counter()
    losses, model = train(
        config,
        args.device,
        args.steps,
        args.seed,
        batch_size=args.batch_size,
        lr=args.lr,
        dataset=dataset,
        eval_interval=args.eval_interval,
        progress=True,
        return_model=True,
        save=args.save,
        resume=args.resume,
        compile=args.compile,
    )
    elapsed = time.perf_counter() - start
    ran = len(losses)
    tokens = ran * args.batch_size * args.block_size
    print(
        f"{model.num_params():,} parameters; {ran} steps in {elapsed:.1f} s "
        f"({tokens / elapsed:,.0f} tokens/s, compilation included)"
    )
    if losses:
        print(f"loss: first {losses[0]:.4f}, final {losses[-1]:.4f}")
    if args.save:
        print(f"checkpoint: {args.save} (step {args.steps})")
    if args.sample_tokens > 0:
        print("sample:")
        print(sample(model, dataset, new_tokens=args.sample_tokens, seed=args.seed))


if __name__ == "__main__":
    main()
