"""The example GPT's training step compiled on tpu against the same step
jitted by JAX on its own XLA:CPU, at the example's default size and at a
matmul-bound size, with each step's achieved FLOP/s as a fraction of this
machine's float32 matmul peak measured in the same run.

    python benchmarks/jax_peer.py [--sizes default,matmul] [--steps 10] [--rounds 3] [--precision highest]

Both sides start from the same weights (the torch model's, copied into a JAX
pytree) and take the same step: forward, cross-entropy, backward and AdamW
(torch.optim.AdamW's update, betas 0.9/0.95, weight decay 0.1 on matrices).
Before timing, three steps on each side are checked equal (losses and
weights); a mismatch stops the run, since a faster wrong step means nothing.

Rows per size: "tpu compiled" (torch.compile of the model and of the
optimizer step with capturable=True, so a step is compiled programs only),
"tpu defer_and_fuse" (eager, the step recorded and fused), "tpu strict",
"jax jit" (one jitted function, parameters and optimizer state donated).
Rows run in --rounds interleaved rounds of --steps steps; each reports its
median round. Also per row: the first step's seconds with empty caches (the
compile a user waits for) and the number of programs it compiled, and the
first step in a new process that finds the disk caches filled (ours, and
JAX's persistent compilation cache, turned on here for every program).

The matmul peak is the best of a few 2048x2048 float32 products, by
torch.mm on CPU (MKL/oneDNN) and by jnp.dot (XLA:CPU's Eigen), each timed in
this run. A step's FLOPs are counted as 6 * matmul parameters * tokens
(forward 2, backward 4) plus the attention products (12 * layers * batch *
block^2 * n_embd): the usual transformer estimate, the same for every row.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Caches of our own, empty at start: the first step of each row compiles;
# the child that measures the warm first steps inherits them.
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="jax_peer_cache_"))
JAX_CACHE_DIR = os.path.join(os.environ["TORCH_TPU_CACHE_DIR"], "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402

# JAX's persistent cache on, for every program, so both sides' warm first
# steps read a disk cache.
jax.config.update("jax_compilation_cache_dir", JAX_CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import train_gpt  # noqa: E402

SIZES = {
    # the example's defaults
    "default": dict(n_layer=4, n_head=4, n_embd=64, block_size=64, batch_size=16),
    # 12.8M parameters: the step's time is its matmuls
    "matmul": dict(n_layer=4, n_head=8, n_embd=512, block_size=256, batch_size=8),
}
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 1e-8, 0.1


# ---------------------------------------------------------------- the JAX step


def jax_params(model):
    """The torch model's weights as a JAX pytree (the tied head is tok_emb)."""
    return {name: jnp.asarray(p.detach().cpu().numpy()) for name, p in model.named_parameters()}


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * weight + bias


def linear(p, prefix, x):
    return x @ p[prefix + ".weight"].T + p[prefix + ".bias"]


def gpt_loss(p, config, idx, targets, precision):
    with jax.default_matmul_precision(precision):
        B, T = idx.shape
        C, H = config.n_embd, config.n_head
        x = p["tok_emb.weight"][idx] + p["pos_emb.weight"][:T]
        mask = jnp.tril(jnp.ones((T, T), dtype=bool))
        for i in range(config.n_layer):
            b = f"blocks.{i}."
            h = layer_norm(x, p[b + "ln_1.weight"], p[b + "ln_1.bias"])
            q, k, v = jnp.split(linear(p, b + "attn.qkv", h), 3, axis=-1)
            q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in (q, k, v))
            scores = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.float32(C // H))
            scores = jnp.where(mask, scores, -jnp.inf)
            y = jax.nn.softmax(scores, axis=-1) @ v
            y = y.transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + linear(p, b + "attn.proj", y)
            h = layer_norm(x, p[b + "ln_2.weight"], p[b + "ln_2.bias"])
            x = x + linear(p, b + "mlp.proj", jax.nn.gelu(linear(p, b + "mlp.fc", h), approximate=False))
        x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        logits = x @ p["tok_emb.weight"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def make_jax_step(config, precision):
    """One jitted training step: parameters, AdamW's moments and the step
    count in, the same out (donated), and the loss."""

    def step(p, m, v, count, idx, targets):
        loss, g = jax.value_and_grad(gpt_loss)(p, config, idx, targets, precision)
        count = count + 1
        bc1 = 1 - BETAS[0] ** count
        bc2 = 1 - BETAS[1] ** count
        new_p, new_m, new_v = {}, {}, {}
        for name in p:
            decay = WEIGHT_DECAY if p[name].ndim >= 2 else 0.0
            w = p[name] * (1 - LR * decay)
            new_m[name] = BETAS[0] * m[name] + (1 - BETAS[0]) * g[name]
            new_v[name] = BETAS[1] * v[name] + (1 - BETAS[1]) * g[name] * g[name]
            denom = jnp.sqrt(new_v[name]) / jnp.sqrt(bc2) + EPS
            new_p[name] = w - (LR / bc1) * new_m[name] / denom
        return new_p, new_m, new_v, count, loss

    return jax.jit(step, donate_argnums=(0, 1, 2, 3))


class JaxRow:
    def __init__(self, config, model, batches, precision):
        self.step = make_jax_step(config, precision)
        self.p = jax_params(model)
        self.m = jax.tree.map(jnp.zeros_like, self.p)
        self.v = jax.tree.map(jnp.zeros_like, self.p)
        self.count = jnp.float32(0)
        self.batches = [(jnp.asarray(x.numpy()), jnp.asarray(y.numpy())) for x, y in batches]

    def run(self, batches):
        for x, y in batches:
            self.p, self.m, self.v, self.count, loss = self.step(self.p, self.m, self.v, self.count, x, y)
        return float(loss)

    def first_step(self):
        start = time.perf_counter()
        self.run(self.batches[:1])
        return time.perf_counter() - start, None

    def time(self, steps):
        start = time.perf_counter()
        self.run(self.batches[:steps])
        return time.perf_counter() - start


# --------------------------------------------------------------- the torch rows


class TorchRow:
    def __init__(self, config, batches, mode, compiled):
        self.mode, self.compiled = mode, compiled
        self.model, self.optimizer = train_gpt.make_model_and_optimizer(config, "tpu", 0)
        self.step_model = torch.compile(self.model) if compiled else self.model
        if compiled:
            for group in self.optimizer.param_groups:
                group["capturable"] = True
            self.optimizer.step = torch.compile(self.optimizer.step)
        self.batches = [(x.to("tpu"), y.to("tpu")) for x, y in batches]

    def run(self, batches):
        with torch_tpu.eager_mode(self.mode):
            for x, y in batches:
                loss = train_gpt.train_step(self.step_model, self.optimizer, x, y)
            value = loss.item()
            torch_tpu.sync()
        return value

    def first_step(self):
        before = torch_tpu.cache_stats()["memory"]["misses"]
        start = time.perf_counter()
        self.run(self.batches[:1])
        return time.perf_counter() - start, torch_tpu.cache_stats()["memory"]["misses"] - before

    def time(self, steps):
        start = time.perf_counter()
        self.run(self.batches[:steps])
        return time.perf_counter() - start


# ------------------------------------------------------------------ the checks


def check_equal(config, batches, precision):
    """Three steps on CPU PyTorch and in JAX from the same weights: the same
    losses (each after the previous steps' updates) and the same weights, or
    the comparison is void. AdamW's first update is about lr * sign(grad) for
    every weight, so a gradient within rounding of zero may step either way:
    weights are compared as the fraction that differ by more than lr / 10."""
    model, optimizer = train_gpt.make_model_and_optimizer(config, "cpu", 0)
    jax_row = JaxRow(config, model, batches[:3], precision)
    # not through the disk cache: the timed rows' first step must compile
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        for x, y in batches[:3]:
            torch_loss = train_gpt.train_step(model, optimizer, x, y).item()
            jax_loss = jax_row.run([(jnp.asarray(x.numpy()), jnp.asarray(y.numpy()))])
            if not np.isclose(torch_loss, jax_loss, rtol=1e-4, atol=0):
                raise SystemExit(f"the JAX step is not the torch step: loss {jax_loss} vs {torch_loss}")
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
    apart = total = 0
    for name, p in model.named_parameters():
        difference = np.abs(p.detach().numpy() - np.asarray(jax_row.p[name]))
        apart += int((difference > LR / 10).sum())
        total += difference.size
    if apart > total * 1e-3:
        raise SystemExit(f"the JAX step is not the torch step: {apart} of {total} weights differ by more than lr/10")
    return apart, total


def matmul_peak(n=2048, repeats=5):
    """Float32 FLOP/s of an n x n product: torch.mm on CPU and jnp.dot."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    ja, jb = jnp.asarray(a.numpy()), jnp.asarray(b.numpy())
    dot = jax.jit(lambda x, y: jnp.dot(x, y, precision="highest"))
    dot(ja, jb).block_until_ready()
    torch.mm(a, b)
    best_torch = best_jax = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best_torch = min(best_torch, time.perf_counter() - start)
        start = time.perf_counter()
        dot(ja, jb).block_until_ready()
        best_jax = min(best_jax, time.perf_counter() - start)
    flops = 2 * n**3
    return flops / best_torch, flops / best_jax


def step_flops(config, model, batch_size):
    tokens = batch_size * config.block_size
    # every matrix of the model is multiplied once per token forward (the
    # embedding's lookup is not a matmul, but the tied head is)
    matmul_params = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "pos_emb" not in n)
    attention = 12 * config.n_layer * batch_size * config.block_size**2 * config.n_embd
    return 6 * matmul_params * tokens + attention


def size_config(size, dataset, steps):
    shape = SIZES[size]
    config = train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size,
        block_size=shape["block_size"],
        n_layer=shape["n_layer"],
        n_head=shape["n_head"],
        n_embd=shape["n_embd"],
        dropout=0.0,
    )
    generator = torch.Generator().manual_seed(0)
    batches = [
        train_gpt.get_batch(dataset.data, shape["batch_size"], config.block_size, generator)
        for _ in range(max(steps, 3))
    ]
    return config, batches


def make_rows(config, batches, precision):
    cpu_model, _ = train_gpt.make_model_and_optimizer(config, "cpu", 0)
    return {
        "tpu compiled": TorchRow(config, batches, "strict", compiled=True),
        "tpu defer_and_fuse": TorchRow(config, batches, "defer_and_fuse", compiled=False),
        "tpu strict": TorchRow(config, batches, "strict", compiled=False),
        "jax jit": JaxRow(config, cpu_model, batches, precision),
    }


def warm_first_steps(size, precision):
    """In a child process with the parent's disk caches: each row's first
    step, as a user's second run of the same script sees it."""
    config, batches = size_config(size, train_gpt.CharDataset(), 3)
    rows = make_rows(config, batches, precision)
    print(json.dumps({name: row.first_step() for name, row in rows.items()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="default,matmul")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per row in each round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="highest", choices=["highest", "high"])
    ap.add_argument("--warm-first-steps", metavar="SIZE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_float32_matmul_precision(args.precision)
    if args.warm_first_steps:
        warm_first_steps(args.warm_first_steps, args.precision)
        return
    dataset = train_gpt.CharDataset()
    torch_peak, jax_peak = matmul_peak()
    print(
        f"float32 matmul peak (2048^3, best of 5): torch.mm {torch_peak / 1e9:.1f} GFLOP/s, "
        f"jnp.dot {jax_peak / 1e9:.1f} GFLOP/s; precision {args.precision!r}; jax {jax.__version__}"
    )
    for size in args.sizes.split(","):
        config, batches = size_config(size, dataset, args.steps)
        apart, total = check_equal(config, batches, args.precision)
        cpu_model, _ = train_gpt.make_model_and_optimizer(config, "cpu", 0)
        flops = step_flops(config, cpu_model, SIZES[size]["batch_size"])
        print(
            f"\n{size}: {config.n_layer} layers, n_embd {config.n_embd}, {config.n_head} heads, block "
            f"{config.block_size}, batch {SIZES[size]['batch_size']}, {cpu_model.num_params() / 1e6:.1f}M "
            f"parameters, {flops / 1e9:.2f} GFLOP per step; three steps equal to CPU PyTorch "
            f"({apart} of {total} weights apart by lr/10)"
        )
        rows = make_rows(config, batches, args.precision)
        first = {name: row.first_step() for name, row in rows.items()}
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--warm-first-steps", size, "--precision", args.precision],
            capture_output=True,
            text=True,
            check=True,
        )
        warm = json.loads(child.stdout.strip().splitlines()[-1])
        for row in rows.values():  # a second untimed step: anything left to compile
            row.run(row.batches[1:2])
        seconds = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, row in rows.items():
                seconds[name].append(row.time(args.steps) / args.steps)
        median = {name: statistics.median(s) for name, s in seconds.items()}
        for name, s in seconds.items():
            print(
                f"{name:>20}: {median[name] * 1e3:8.2f} ms/step (rounds {min(s) * 1e3:.2f}-{max(s) * 1e3:.2f}), "
                f"{flops / median[name] / 1e9:6.2f} GFLOP/s = {flops / median[name] / torch_peak:5.1%} of torch.mm's "
                f"peak, {flops / median[name] / jax_peak:5.1%} of jnp.dot's"
            )
        print("first step, seconds: cold (empty caches) / warm (a new process, the disk caches filled)")
        for name in rows:
            (cold, programs), (warm_s, _) = first[name], warm[name]
            compiled = f"; {programs} programs compiled" if programs is not None else ""
            print(f"{name:>20}: {cold:6.2f} / {warm_s:6.2f}{compiled}")
        jax_s = median["jax jit"]
        print(
            f"tpu compiled / jax: {jax_s / median['tpu compiled']:.2f}x;  tpu defer_and_fuse / jax: "
            f"{jax_s / median['tpu defer_and_fuse']:.2f}x;  defer_and_fuse / compiled: "
            f"{median['tpu compiled'] / median['tpu defer_and_fuse']:.2f}x;  defer_and_fuse / strict: "
            f"{median['tpu strict'] / median['tpu defer_and_fuse']:.2f}x  (above 1: faster)"
        )


if __name__ == "__main__":
    main()
