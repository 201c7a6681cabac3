"""DistributedDataParallel on tpu: the GPT example (examples/train_gpt_ddp.py)
on 2 and 4 processes under torchrun matches one process on the global batch.

One configuration covers DDP's paths: small buckets (many bucket
all_reduces, gradients as bucket views), `no_sync` accumulation over two
micro-batches, and an unused layer (find_unused_parameters=True). SGD keeps
the comparison linear in the gradients, so the only difference is the order
in which float32 gradients are summed."""

import os
import sys
import tempfile

import pytest
import torch
from distributed_launch import run_session
from repo_paths import EXAMPLES

EXAMPLE = os.path.join(EXAMPLES, "train_gpt_ddp.py")
ARGS = [
    "--steps",
    "4",
    "--batch-size",
    "16",
    "--accum",
    "2",
    "--unused",
    "--bucket-mb",
    "0.05",
    "--optimizer",
    "sgd",
    "--n-layer",
    "1",
    "--block-size",
    "32",
]


def _run(nproc, out, timeout=400):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("TORCH_TPU_NUM_DEVICES", None)
    if nproc == 1:
        cmd = [sys.executable, EXAMPLE, *ARGS, "--out", out]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            EXAMPLE,
            *ARGS,
            "--out",
            out,
        ]
    returncode, output = run_session(cmd, env, timeout, f"{nproc} processes")
    assert returncode == 0, output[-6000:]
    return torch.load(out)


@pytest.fixture(scope="module")
def single():
    with tempfile.TemporaryDirectory() as d:
        yield _run(1, os.path.join(d, "single.pt"))


@pytest.mark.parametrize("nproc", [2, 4])
def test_ddp_matches_one_process_on_the_global_batch(single, nproc):
    with tempfile.TemporaryDirectory() as d:
        ddp = _run(nproc, os.path.join(d, "ddp.pt"))
    torch.testing.assert_close(torch.tensor(ddp["losses"]), torch.tensor(single["losses"]), rtol=1e-4, atol=0)
    assert ddp["state"].keys() == single["state"].keys()
    # measured: losses 1e-5 apart (relative) on 4 processes; weights at most
    # 8e-6 apart on 2 (magnitudes 0.05-1). A step moves a weight by about
    # 1e-3, so a wrong average (a missing or doubled 1/world) is far outside.
    for name, value in single["state"].items():
        torch.testing.assert_close(ddp["state"][name], value, rtol=1e-4, atol=1e-4, msg=name)
    # the unused layer never got a gradient, in either run
    torch.testing.assert_close(ddp["state"]["unused.weight"], single["state"]["unused.weight"], rtol=0, atol=0)
