"""TorchTitan on tpu, unpatched (docs/torchtitan.md, examples/torchtitan/).

- Its llama3 debug model, built by TorchTitan with the tpu FlexAttention
  override (torch_tpu/integrations/torchtitan.py), computes on tpu the
  logits, loss and every gradient that the same weights give on CPU, where
  the attention is CPU's scaled_dot_product_attention under the packed-
  document causal mask made dense: one training step's worth of the model,
  outside the Trainer (TorchTitan falls back to "cuda", not CPU, when it
  finds no accelerator, so there is no CPU Trainer run to compare with).
- TorchTitan's own Trainer (`torchtitan.train` under torchrun) trains it on
  tpu for 3 steps on one repeated batch: the losses are finite and fall, and
  its memory monitor logs the device's capacity and each step's peak.
- Under `torchrun --nproc_per_node 2` it shards the model with FSDP over
  tpu_dist (TorchTitan takes the backend from PyPI torch's
  `default_device_backend_map["tpu"]`): both ranks log the same losses,
  which fall.

TorchTitan 0.3.0's Trainer calls `torch.distributed.set_timeout` after its
first step; torch 2.14 added it, so on torch 2.13 the Trainer tests skip
(`bash scripts/torch_version.sh 2.14.1 tests/integrations/test_torchtitan.py` runs them).
The jobs run in their own process sessions under hard timeouts
(tests/distributed_launch.py).
"""

import copy
import glob
import math
import os
import re
import sys
import tempfile

import pytest
import torch

try:
    import torchtitan.trainer  # noqa: F401  (imports triton, as TorchTitan's MoE kernels do)
except ImportError as e:
    pytest.skip(
        f"TorchTitan is an optional extra (pip install torch_tpu[titan]): {e}",
        allow_module_level=True,
    )

from distributed_launch import run_session  # noqa: E402
from repo_paths import ROOT

EXAMPLE = os.path.join(ROOT, "examples", "torchtitan")

needs_set_timeout = pytest.mark.skipif(
    not hasattr(torch.distributed, "set_timeout"),
    reason=f"TorchTitan 0.3.0's Trainer calls torch.distributed.set_timeout after its first step "
    f"(torchtitan/distributed/utils.py set_pg_timeouts), which torch 2.14 added; torch {torch.__version__} "
    "lacks it. Run: bash scripts/torch_version.sh 2.14.1 tests/integrations/test_torchtitan.py",
)


def _debug_model():
    """TorchTitan's llama3 debug model (6 layers, dim 256, vocab 2048) with
    the tpu FlexAttention override, initialized on CPU by TorchTitan."""
    from torchtitan.models.common.attention import FlexAttention
    from torchtitan.models.llama3 import model_registry

    from torch_tpu.integrations.torchtitan import TpuFlexAttention, tpu_flex_attention

    config = model_registry("debugmodel").model
    for _, attention, parent, field in list(config.traverse(FlexAttention.Config)):
        setattr(parent, field, tpu_flex_attention(attention))
    torch.manual_seed(0)
    model = config.build()
    model.init_states()
    assert sum(isinstance(m, TpuFlexAttention) for m in model.modules()) == 6
    return model


class _DenseMaskedAttention(torch.nn.Module):
    """The CPU reference for TorchTitan's inner attention: SDPA under a dense
    causal mask within documents (documents start where positions are 0)."""

    def __init__(self, positions):
        super().__init__()
        document = torch.cumsum((positions == 0).int(), dim=1)
        causal = torch.ones(positions.shape[1], positions.shape[1], dtype=torch.bool).tril()
        self.mask = (causal & (document[:, :, None] == document[:, None, :]))[:, None]

    def forward(self, q, k, v, *, attention_masks, scale=None, enable_gqa=False, **kwargs):
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=self.mask,
            scale=scale,
            enable_gqa=enable_gqa,
        )
        return out.transpose(1, 2)


def _step(model, tokens, labels, positions, attention_masks):
    logits = model(tokens, positions=positions, attention_masks=attention_masks)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    loss.backward()
    return logits.detach().cpu(), loss.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters()}


def test_debug_model_forward_and_backward_equal_cpu():
    model = _debug_model()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 2048, (2, 64), generator=g)
    labels = torch.randint(0, 2048, (2, 64), generator=g)
    # Two packed documents per row, split differently in each row.
    positions = torch.stack(
        [torch.cat([torch.arange(40), torch.arange(24)]), torch.cat([torch.arange(10), torch.arange(54)])]
    )

    reference = copy.deepcopy(model)
    for layer in reference.layers.values():
        layer.attention.inner_attention = _DenseMaskedAttention(positions)
    expected = _step(reference, tokens, labels, positions, None)

    on_tpu = copy.deepcopy(model).to("tpu")
    positions_tpu = positions.to("tpu")
    masks = on_tpu.get_attention_masks(positions_tpu)  # TorchTitan's BlockMask, made on tpu
    assert masks.kv_num_blocks.device.type == "tpu"
    got = _step(on_tpu, tokens.to("tpu"), labels.to("tpu"), positions_tpu, masks)

    torch.testing.assert_close(got[0], expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1], expected[1], rtol=1e-5, atol=1e-6)
    assert got[2].keys() == expected[2].keys() and len(got[2]) > 40
    for name in expected[2]:
        torch.testing.assert_close(
            got[2][name], expected[2][name], rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}"
        )


def _train(nproc, timeout):
    """Runs examples/torchtitan's command; returns each rank's logged losses."""
    out = tempfile.mkdtemp(prefix="torchtitan_")
    env = dict(os.environ)
    env.pop("TORCH_TPU_NUM_DEVICES", None)  # torchrun's LOCAL_WORLD_SIZE gives each rank its device
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([EXAMPLE, env.get("PYTHONPATH", "")]),
            "TORCHTITAN_DUMP_FOLDER": os.path.join(out, "dump"),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        f"--log-dir={out}/logs",
        "--redirects=3",
        "-m",
        "torchtitan.train",
        "--module",
        "llama3_tpu",
        "--config",
        "llama3_debugmodel_tpu",
    ]
    returncode, output = run_session(cmd, env, timeout, f"torchtitan.train on {nproc} processes")
    losses, logs = [], {}
    for rank in range(nproc):
        text = ""
        for path in sorted(glob.glob(f"{out}/logs/**/attempt_0/{rank}/*.log", recursive=True)):
            with open(path) as f:
                text += f.read()
        logs[rank] = text
        losses.append([float(x) for x in re.findall(r"step:\s+\d+\s+(?:\x1b\[\d+m)?loss:\s+([-\d.naif]+)", text)])
    assert returncode == 0, f"exit {returncode}:\n{output[-3000:]}\n" + "\n".join(t[-6000:] for t in logs.values())
    return losses, logs


@needs_set_timeout
def test_trainer_trains_three_steps_on_tpu():
    (losses,), logs = _train(1, timeout=600)
    assert "TpuFlexAttention.Config" in logs[0]  # the override was applied
    assert len(losses) == 3, logs[0][-3000:]
    # TorchTitan's memory monitor reads torch.tpu's memory API: a capacity,
    # and the peak active bytes of each step (-1 where memory_stats lacks them).
    assert re.search(r"TPU capacity: .* with [1-9][\d.]*GiB memory", logs[0]), logs[0][-3000:]
    peaks = [float(x) for x in re.findall(r"memory:\s+(-?[\d.]+)GiB", logs[0])]
    assert len(peaks) == 3 and all(p > 0 for p in peaks), peaks
    assert all(math.isfinite(x) for x in losses) and losses[0] > losses[1] > losses[2], losses


@needs_set_timeout
def test_trainer_fsdp_on_two_processes_over_tpu_dist():
    assert torch.distributed.Backend.default_device_backend_map.get("tpu") == "tpu_dist"
    losses, logs = _train(2, timeout=900)
    assert "dp_shard=2" in logs[0] and "Applied FSDP to the model" in logs[0], logs[0][-3000:]
    assert len(losses[0]) == 3 and losses[0] == losses[1], losses
    assert all(math.isfinite(x) for x in losses[0]) and losses[0][0] > losses[0][1] > losses[0][2], losses
