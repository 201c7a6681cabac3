"""examples/train_gpt.py stops and resumes: a run saved at step K and resumed
to step N has, at steps K+1..N, the losses (bit for bit) of one run of N
steps, in Strict, DeferAndFuse and compiled; checkpoints are written
atomically."""

import os
import subprocess
import sys

import pytest
import torch
from repo_paths import EXAMPLES

import torch_tpu

sys.path.insert(0, EXAMPLES)

import train_gpt  # noqa: E402

STEPS, STOP = 8, 4


@pytest.fixture(scope="module")
def dataset():
    return train_gpt.CharDataset()


@pytest.fixture(scope="module")
def config(dataset):
    # dropout on: the resumed run must also continue the device's RNG.
    return train_gpt.GPTConfig(
        vocab_size=dataset.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16, dropout=0.1
    )


@pytest.mark.parametrize("how", ["strict", "defer_and_fuse", "compiled"])
def test_resumed_losses_equal_an_uninterrupted_run(tmp_path, dataset, config, how):
    mode = "strict" if how == "compiled" else how
    kw = dict(batch_size=4, dataset=dataset, compile=how == "compiled")
    ckpt = str(tmp_path / "ckpt.pt")
    with torch_tpu.eager_mode(mode):
        full = train_gpt.train(config, "tpu", STEPS, seed=5, **kw)
        first = train_gpt.train(config, "tpu", STOP, seed=5, save=ckpt, **kw)
        rest = train_gpt.train(config, "tpu", STEPS, seed=5, resume=ckpt, **kw)
    assert first == full[:STOP]
    assert len(rest) == STEPS - STOP
    assert rest == full[STOP:]  # exactly: the same programs on the same bytes
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind


def test_load_checkpoint_puts_state_where_an_uninterrupted_run_has_it(tmp_path, dataset, config):
    # AdamW keeps its step counts on CPU unless capturable; a step count
    # moved onto tpu would take another code path (and round differently).
    ckpt = str(tmp_path / "ckpt.pt")
    train_gpt.train(config, "tpu", 2, seed=5, batch_size=4, dataset=dataset, save=ckpt)
    model, opt = train_gpt.make_model_and_optimizer(config, "tpu", 5)
    step = train_gpt.load_checkpoint(ckpt, model, opt, torch.Generator(), "tpu")
    assert step == 2
    for state in opt.state.values():
        assert state["step"].device.type == "cpu" and state["step"].item() == 2
        assert state["exp_avg"].device.type == "tpu" and state["exp_avg_sq"].device.type == "tpu"


def test_resume_on_cpu_matches_too(tmp_path, dataset, config):
    ckpt = str(tmp_path / "ckpt.pt")
    full = train_gpt.train(config, "cpu", STEPS, seed=5, batch_size=4, dataset=dataset)
    train_gpt.train(config, "cpu", STOP, seed=5, batch_size=4, dataset=dataset, save=ckpt)
    rest = train_gpt.train(config, "cpu", STEPS, seed=5, batch_size=4, dataset=dataset, resume=ckpt)
    assert rest == full[STOP:]


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, dataset, config, monkeypatch):
    ckpt = str(tmp_path / "ckpt.pt")
    train_gpt.train(config, "tpu", 2, seed=5, batch_size=4, dataset=dataset, save=ckpt)
    before = open(ckpt, "rb").read()

    def killed(obj, f, *a, **k):  # dies half way through writing, as a kill would
        f.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        train_gpt.train(config, "tpu", 3, seed=5, batch_size=4, dataset=dataset, save=ckpt)
    assert open(ckpt, "rb").read() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_command_line_save_and_resume(tmp_path):
    ckpt = str(tmp_path / "c.pt")
    common = [
        sys.executable,
        os.path.join(EXAMPLES, "train_gpt.py"),
        "--n-layer",
        "1",
        "--n-embd",
        "16",
        "--block-size",
        "16",
        "--batch-size",
        "2",
        "--sample-tokens",
        "0",
        "--eval-interval",
        "0",
    ]
    out = subprocess.run(common + ["--steps", "2", "--save", ckpt], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert os.path.exists(ckpt) and "checkpoint:" in out.stdout
    out = subprocess.run(common + ["--steps", "4", "--resume", ckpt], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "2 steps" in out.stdout
