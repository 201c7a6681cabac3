"""The GPT of train_gpt.py trained data-parallel with DistributedDataParallel.

    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --steps 20
    python examples/train_gpt_ddp.py --steps 20        # one process, the same global batch

Every step draws one global batch from the seeded generator (the same on
every rank); rank r trains on its slice of it. The gradients DDP averages
are then those of the global batch, so the losses and the weights match a
single-process run on the global batch within float32 reduction-order
rounding. `--accum K` splits each step into K micro-batches, all but the
last under `no_sync()`; `--unused` adds a layer the loss never uses (DDP
needs `find_unused_parameters=True` for it); `--bucket-mb` sets DDP's
bucket size (small values make many buckets). `--out FILE` writes the
losses and the final weights (torch.save) for tests/distributed/test_distributed_ddp.py.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt  # noqa: E402


class WithUnusedLayer(nn.Module):
    """The GPT plus a layer whose parameters never receive a gradient."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt
        self.unused = nn.Linear(4, 4)

    def forward(self, idx, targets=None):
        return self.gpt(idx, targets)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16, help="global batch size (all ranks together)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per step (no_sync on all but the last)")
    p.add_argument("--unused", action="store_true", help="add a parameter the loss never uses")
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument(
        "--optimizer",
        default="adamw",
        choices=["adamw", "sgd"],
        help="sgd: weights follow gradients linearly (Adam's first steps amplify rounding)",
    )
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--out", default=None)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    distributed = "WORLD_SIZE" in os.environ
    if args.device == "tpu":
        import torch_tpu  # noqa: F401
    if distributed:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if args.device == "tpu":
            torch.tpu.set_device(local_rank)
            device = torch.device("tpu", local_rank)
        else:
            device = torch.device("cpu")
        dist.init_process_group("tpu_dist" if args.device == "tpu" else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        device, rank, world = torch.device(args.device), 0, 1
    micro = args.batch_size // args.accum
    if micro * args.accum != args.batch_size or micro % world:
        raise SystemExit(
            f"--batch-size {args.batch_size} must split into {args.accum} micro-batches divisible by {world} ranks"
        )

    dataset = train_gpt.CharDataset()
    config = train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=args.block_size, n_layer=args.n_layer, n_embd=args.n_embd
    )
    gpt, _ = train_gpt.make_model_and_optimizer(config, "cpu", args.seed)
    model = (WithUnusedLayer(gpt) if args.unused else gpt).to(device)
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    step_model = model
    if distributed:
        step_model = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "tpu" else None,
            bucket_cap_mb=args.bucket_mb,
            find_unused_parameters=args.unused,
        )

    generator = torch.Generator().manual_seed(args.seed)
    losses, times = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        step_loss = torch.zeros((), device=device)
        for k in range(args.accum):
            x, y = train_gpt.get_batch(dataset.data, micro, config.block_size, generator)
            shard = slice(rank * micro // world, (rank + 1) * micro // world)
            x, y = x[shard].to(device), y[shard].to(device)
            last = k == args.accum - 1
            with step_model.no_sync() if distributed and not last else _nothing():
                _, loss = step_model(x, y)
                (loss / args.accum).backward()
            step_loss += loss.detach() / args.accum
        optimizer.step()
        if distributed:
            dist.all_reduce(step_loss, op=dist.ReduceOp.AVG)
        losses.append(step_loss.item())
        times.append(time.perf_counter() - t0)
    if rank == 0:
        steady = times[len(times) // 2 :]
        print(
            f"world {world}: final loss {losses[-1]:.4f}, {1000 * sum(steady) / len(steady):.1f} ms/step "
            f"(steady half), {args.batch_size * config.block_size * len(steady) / sum(steady):,.0f} tok/s"
        )
        if args.out:
            torch.save(
                {
                    "losses": losses,
                    "state": {k: v.cpu() for k, v in model.state_dict().items()},
                    "ms_per_step": [1000 * t for t in times],
                },
                args.out,
            )
    if distributed:
        dist.destroy_process_group()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
