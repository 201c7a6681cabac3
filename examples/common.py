"""What the examples in examples/*/ share: the device flags, a seeded
training loop with a progress bar and a throughput figure, and the text data
(train_gpt.py's character dataset, reused, not copied).

Every example initialises its weights on CPU from the seed and draws its
batches on CPU from a seeded generator, then moves them to the device, so a
tpu run and a cpu run with the same seed see the same numbers;
tests/training/test_examples.py compares them.
"""

import contextlib
import os
import sys
import time

import torch

EXAMPLES_DIR = os.path.dirname(os.path.abspath(__file__))
if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

from train_gpt import CharDataset, Progress, get_batch  # noqa: E402

__all__ = [
    "CharDataset",
    "Progress",
    "add_device_flags",
    "get_batch",
    "seeded",
    "setup_device",
    "synchronize",
    "train_loop",
]


def add_device_flags(parser, steps):
    """The flags every example takes: where to run, how long, which seed."""
    parser.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mode",
        default="strict",
        choices=["strict", "debug", "defer_and_fuse"],
        help="tpu eager mode (torch_tpu.set_eager_mode)",
    )
    parser.add_argument(
        "--precision",
        default="high",
        choices=["highest", "high", "medium"],
        help="float32 matmul precision (torch.set_float32_matmul_precision)",
    )
    parser.add_argument("--log-interval", type=int, default=10, help="refresh the progress bar every N steps")


def setup_device(args):
    """Loads torch_tpu for a tpu run (importing it registers the device) and
    applies --mode and --precision."""
    if args.device == "tpu":
        import torch_tpu

        torch_tpu.set_eager_mode(args.mode)
    torch.set_float32_matmul_precision(args.precision)


def run_and_report(args, run, title):
    """The examples' main: sets the device up, runs `run(args)` with a
    progress bar, prints `title`, the wall time and the first and final
    losses; returns run's result for the example's own figures."""
    setup_device(args)
    start = time.perf_counter()
    out = run(args, progress=True)
    elapsed = time.perf_counter() - start
    print(f"{title}: {out['params']:,} parameters; {args.steps} steps on {args.device}")
    print(f"total: {elapsed:.1f} s")
    accuracy = f"; eval accuracy {out['accuracy']:.1%}" if "accuracy" in out else ""
    print(f"loss: first {out['losses'][0]:.4f}, final {out['losses'][-1]:.4f}{accuracy}")
    return out


def synchronize(device):
    """Waits for the device's queued work, so a time taken next is real."""
    if torch.device(device).type != "cpu":
        getattr(torch, torch.device(device).type).synchronize()


def seeded(seed, build):
    """`build()` under torch.manual_seed(seed): weights come from CPU's
    generator whatever device they go to next."""
    torch.manual_seed(seed)
    return build()


def train_loop(step, steps, items_per_step, unit, device, progress=False, log_interval=10):
    """Runs `step(i)` for i in 1..steps; `step` returns the step's loss as a
    tensor on the device. The losses stay there until the progress bar is
    refreshed (every `log_interval` steps) and the end, so the host does not
    wait for every step. Returns (losses as floats, items per second over the
    whole run, compilation included)."""
    bar = Progress(steps, enabled=progress)
    losses = []
    start = t0 = time.perf_counter()
    last = 0
    for i in range(1, steps + 1):
        losses.append(step(i).detach())
        if progress and (i == steps or (log_interval and i % log_interval == 0)):
            value = losses[-1].float().item()  # waits for the step: the rate is real
            now = time.perf_counter()
            rate = items_per_step * (i - last) / max(now - t0, 1e-9)
            bar.update(i - last, loss=f"{value:.4f}", **{unit.replace("/", "_"): f"{rate:,.0f}"})
            t0, last = now, i
    values = [loss.float().item() for loss in losses]
    synchronize(device)
    elapsed = time.perf_counter() - start
    bar.close()
    return values, items_per_step * steps / max(elapsed, 1e-9)


# ----------------------------------------------------------------------------
# Causal language models (examples/llama, examples/qwen3)


def autocast(device, dtype):
    """torch.autocast on the device's type at `dtype`, or nothing when None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def train_causal_lm(model, dataset, device, args, amp_dtype=None, progress=False):
    """Next-character training of a transformers causal LM on the text in
    examples/data: AdamW, batches of --batch-size windows of --block-size
    characters drawn on CPU from the seed. Returns (losses, tokens/s)."""
    generator = torch.Generator().manual_seed(args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    model.train()

    def step(i):
        x, y = get_batch(dataset.data, args.batch_size, args.block_size, generator, device)
        with autocast(device, amp_dtype):
            logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return train_loop(
        step,
        args.steps,
        args.batch_size * args.block_size,
        "tok/s",
        device,
        progress=progress,
        log_interval=args.log_interval,
    )


@torch.no_grad()
def generate_static(model, dataset, device, prompt, new_tokens, amp_dtype=None):
    """Greedy decoding with a static KV cache. transformers compiles the
    decode step when the cache is static and the device is an accelerator (on
    "tpu" its torch.compile runs with backend "tpu"); on CPU it decodes
    eagerly. Returns (the generated text, each step's logits [new_tokens,
    vocab] on CPU, decoded tokens/s)."""
    model.eval()
    ids = torch.tensor([dataset.encode(prompt)], dtype=torch.long).to(device)
    start = time.perf_counter()
    with autocast(device, amp_dtype):
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            do_sample=False,
            cache_implementation="static",
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
    tokens = out.sequences[0, ids.shape[1] :].tolist()  # waits for the device
    elapsed = time.perf_counter() - start
    logits = torch.stack([step[0] for step in out.logits]).float().cpu()
    return dataset.decode(tokens), logits, len(tokens) / max(elapsed, 1e-9)


def add_lm_flags(parser):
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--prompt", default="We the People")
    parser.add_argument("--new-tokens", type=int, default=64)


def lm_config_kwargs(args, dataset):
    """The size fields LlamaConfig and Qwen3Config share. No BOS/EOS: the
    vocabulary is the text's characters, and generation runs its full length."""
    return dict(
        vocab_size=dataset.vocab_size,
        hidden_size=args.hidden_size,
        intermediate_size=args.hidden_size * 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(args.block_size, len(args.prompt) + args.new_tokens),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
