"""A DLRM-style click model (embedding bags, bottom and top MLPs, dot
interaction) trained on synthetic click logs, in plain PyTorch
(nn.EmbeddingBag is what TorchRec's tables compute; train_torchrec.py is the
same model built from TorchRec).

    python examples/dlrm/train.py                 # on tpu, tiny default size
    python examples/dlrm/train.py --device cpu    # the same run on native CPU
    python examples/dlrm/train.py --tables 26 --rows 100000 --dim 64 --batch-size 2048

The data: each sample has --dense-features Gaussian features and, per table,
a bag of item ids (multi-hot, a variable number per sample: the batch's ids
are cut into bags at random offsets, their total fixed so every step has the
same shapes). The click is drawn from a hidden logistic model over the dense
features and a hidden score per id, so there is something to learn. All of
it is drawn on CPU from the seed, so a tpu run and a cpu run see the same
numbers.
"""

import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402

# ----------------------------------------------------------------------------
# Model


def mlp(sizes, last_activation):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """Bottom MLP on the dense features -> a vector of size dim; one
    EmbeddingBag (sum) per sparse feature -> one vector each; the dot
    product of every pair of those vectors (the interaction), concatenated
    with the dense vector, -> top MLP -> one click logit."""

    def __init__(self, dense_features, tables, rows, dim, bottom=(64,), top=(64, 32)):
        super().__init__()
        self.bottom = mlp((dense_features, *bottom, dim), last_activation=True)
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        for bag in self.embeddings:
            # The DLRM reference's init: nn.EmbeddingBag's N(0, 1) makes the
            # pairwise dots large enough to saturate the top MLP.
            nn.init.uniform_(bag.weight, -(rows**-0.5), rows**-0.5)
        n = tables + 1
        self.register_buffer("pairs", torch.tril_indices(n, n, offset=-1), persistent=False)
        self.top = mlp((dim + n * (n - 1) // 2, *top, 1), last_activation=False)

    def forward(self, dense, ids, offsets):
        """dense [B, F]; ids[t] a flat tensor of table t's ids, offsets[t] [B]
        the start of each sample's bag in it."""
        x = self.bottom(dense)
        vectors = torch.stack([x] + [bag(i, o) for bag, i, o in zip(self.embeddings, ids, offsets)], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))  # [B, n, n]
        interaction = dots[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, interaction], dim=1)).squeeze(1)


# ----------------------------------------------------------------------------
# Data


class SyntheticClicks:
    def __init__(self, dense_features, tables, rows, seed):
        g = torch.Generator().manual_seed(seed)
        self.dense_weight = torch.randn(dense_features, generator=g) / dense_features**0.5
        self.id_score = torch.randn(tables, rows, generator=g)
        self.dense_features, self.tables, self.rows = dense_features, tables, rows

    def batch(self, n, pooling, generator):
        """(dense [n, F], ids per table, offsets per table, clicks [n]):
        n * pooling ids per table, cut into n bags at random offsets."""
        dense = torch.randn(n, self.dense_features, generator=generator)
        logit = dense @ self.dense_weight
        ids, offsets = [], []
        total = n * pooling
        for t in range(self.tables):
            table_ids = torch.randint(self.rows, (total,), generator=generator)
            cuts = torch.randint(total + 1, (n - 1,), generator=generator).sort().values
            starts = torch.cat([torch.zeros(1, dtype=torch.long), cuts])
            bag = torch.searchsorted(starts, torch.arange(total), right=True) - 1  # each id's sample
            sums = torch.zeros(n).index_add_(0, bag, self.id_score[t, table_ids])
            counts = torch.bincount(bag, minlength=n).clamp(min=1)
            logit = logit + sums / counts / self.tables**0.5
            ids.append(table_ids)
            offsets.append(starts)
        clicks = torch.bernoulli(torch.sigmoid(2 * logit), generator=generator)
        return dense, ids, offsets, clicks


def to_device(batch, device):
    dense, ids, offsets, clicks = batch
    return dense.to(device), [i.to(device) for i in ids], [o.to(device) for o in offsets], clicks.to(device)


# ----------------------------------------------------------------------------
# Training


def run(args, progress=False):
    """Trains, then evaluates on a held-out batch. Returns a dict: losses
    (one float per step), logits (the eval batch's, on CPU), accuracy,
    samples_per_s, params."""
    data = SyntheticClicks(args.dense_features, args.tables, args.rows, args.seed)
    model = common.seeded(args.seed, lambda: DLRM(args.dense_features, args.tables, args.rows, args.dim)).to(
        args.device
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed + 1)
    model.train()

    def step(i):
        dense, ids, offsets, clicks = to_device(data.batch(args.batch_size, args.pooling, generator), args.device)
        loss = F.binary_cross_entropy_with_logits(model(dense, ids, offsets), clicks)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    losses, samples_per_s = common.train_loop(
        step, args.steps, args.batch_size, "samples/s", args.device, progress=progress, log_interval=args.log_interval
    )
    model.eval()
    dense, ids, offsets, clicks = to_device(
        data.batch(args.eval_size, args.pooling, torch.Generator().manual_seed(args.seed + 2)), args.device
    )
    with torch.no_grad():
        logits = model(dense, ids, offsets).cpu()
    accuracy = ((logits > 0).float() == clicks.cpu()).float().mean().item()
    params = sum(p.numel() for p in model.parameters())
    return dict(losses=losses, logits=logits, accuracy=accuracy, samples_per_s=samples_per_s, params=params)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_device_flags(p, steps=300)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dense-features", type=int, default=13)
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=1000, help="ids per table")
    p.add_argument("--dim", type=int, default=16, help="embedding size")
    p.add_argument("--pooling", type=int, default=3, help="mean ids per bag")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--eval-size", type=int, default=1024)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, "dlrm")
    print(f"training: {out['samples_per_s']:,.0f} samples/s (compilation included)")


if __name__ == "__main__":
    main()
