"""The DLRM click model of train.py built from TorchRec: its
EmbeddingBagCollection fed a KeyedJaggedTensor, and torchrec.models.dlrm's
DLRM (dense arch, pairwise dot interaction, over arch). Needs the [rec]
extra (`pip install torch_tpu[rec]`: torchrec and fbgemm-gpu-cpu).

    python examples/dlrm/train_torchrec.py                 # on tpu, tiny default size
    python examples/dlrm/train_torchrec.py --device cpu    # the same run on native CPU
    python examples/dlrm/train_torchrec.py --tables 26 --rows 100000 --dim 64 --batch-size 2048

The data are train.py's synthetic click logs (same seed, same numbers), each
table's bags given to TorchRec as lengths in one KeyedJaggedTensor. On tpu,
fbgemm's jagged operators that TorchRec calls run as device ops
(csrc/lower/jagged.cpp); nothing falls back to CPU.
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import common  # noqa: E402
from train import SyntheticClicks, parse_args  # noqa: E402  (train.py's flags: the same model sizes)

# ----------------------------------------------------------------------------
# Model


def build_model(args):
    """torchrec's DLRM over one embedding bag (sum) per table. Built on CPU:
    the caller moves it, so tpu and cpu runs start from the same weights."""
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.models.dlrm import DLRM

    tables = [
        EmbeddingBagConfig(name=f"t{t}", embedding_dim=args.dim, num_embeddings=args.rows, feature_names=[f"f{t}"])
        for t in range(args.tables)
    ]
    return DLRM(
        embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("cpu")),
        dense_in_features=args.dense_features,
        dense_arch_layer_sizes=[64, args.dim],
        over_arch_layer_sizes=[64, 32, 1],
    )


# ----------------------------------------------------------------------------
# Data


def to_sparse_features(ids, offsets):
    """train.py's per-table flat ids and bag starts as one KeyedJaggedTensor:
    feature f{t}'s values are table t's ids, its lengths the bag sizes."""
    from torchrec import KeyedJaggedTensor

    lengths = []
    for table_ids, starts in zip(ids, offsets):
        ends = torch.cat([starts[1:], torch.tensor([table_ids.numel()])])
        lengths.append(ends - starts)
    return KeyedJaggedTensor(
        keys=[f"f{t}" for t in range(len(ids))], values=torch.cat(ids), lengths=torch.cat(lengths).to(torch.int32)
    )


def to_device(batch, device):
    dense, ids, offsets, clicks = batch
    return dense.to(device), to_sparse_features(ids, offsets).to(device), clicks.to(device)


# ----------------------------------------------------------------------------
# Training


def run(args, progress=False):
    """Trains, then evaluates on a held-out batch. Returns a dict: losses
    (one float per step), logits (the eval batch's, on CPU), accuracy,
    samples_per_s, params."""
    data = SyntheticClicks(args.dense_features, args.tables, args.rows, args.seed)
    model = common.seeded(args.seed, lambda: build_model(args)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed + 1)
    model.train()

    def step(i):
        dense, sparse, clicks = to_device(data.batch(args.batch_size, args.pooling, generator), args.device)
        logits = model(dense_features=dense, sparse_features=sparse).squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logits, clicks)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    losses, samples_per_s = common.train_loop(
        step, args.steps, args.batch_size, "samples/s", args.device, progress=progress, log_interval=args.log_interval
    )
    model.eval()
    dense, sparse, clicks = to_device(
        data.batch(args.eval_size, args.pooling, torch.Generator().manual_seed(args.seed + 2)), args.device
    )
    with torch.no_grad():
        logits = model(dense_features=dense, sparse_features=sparse).squeeze(1).cpu()
    accuracy = ((logits > 0).float() == clicks.cpu()).float().mean().item()
    params = sum(p.numel() for p in model.parameters())
    return dict(losses=losses, logits=logits, accuracy=accuracy, samples_per_s=samples_per_s, params=params)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, "dlrm (torchrec)")
    print(f"training: {out['samples_per_s']:,.0f} samples/s (compilation included)")


if __name__ == "__main__":
    main()
