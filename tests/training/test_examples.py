"""Each example in examples/*/ runs its tiny size on tpu exactly as on CPU:
the same seed gives the same weights and batches on both (everything is
drawn on CPU), so the per-step losses agree to float32 rounding (conftest.py
sets matmul precision "highest"), and so do the generated text, the sampled
images and the eval logits. Few steps: these check the jobs, not learning."""

import contextlib
import importlib.util
import os

import numpy as np
import torch
from repo_paths import EXAMPLES


def _example(name):
    """examples/<name>/train.py as a module (every example's script is
    train.py, so each gets its own module name)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, name, "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _one_cpu_thread():
    """The CPU reference in one intra-op thread: on a machine whose cores
    other processes keep busy, PyTorch's OpenMP threads wait on each other
    and a tiny convolution takes 50 ms instead of 1 (measured here with the
    UNet). The tpu side runs on the plugin's own threads either way."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _run_both(name, argv):
    module = _example(name)
    with _one_cpu_thread():
        cpu = module.run(module.parse_args(["--device", "cpu", *argv]))
    tpu = module.run(module.parse_args(["--device", "tpu", *argv]))
    return cpu, tpu


def _assert_losses_close(cpu, tpu, rtol):
    assert len(tpu) == len(cpu) > 0
    for step, (t, c) in enumerate(zip(tpu, cpu), start=1):
        assert abs(t - c) <= rtol * abs(c), f"step {step}: tpu loss {t!r} vs cpu {c!r}"


def test_llama_trains_and_generates_as_on_cpu():
    torch._dynamo.reset()
    cpu, tpu = _run_both("llama", ["--steps", "8", "--block-size", "32", "--batch-size", "4", "--new-tokens", "12"])
    _assert_losses_close(cpu["losses"], tpu["losses"], 1e-4)
    assert len(tpu["text"]) == 12
    assert tpu["text"] == cpu["text"]
    # Eight steps teach little (the text may be all spaces); every decode
    # step's logits, from the compiled static-cache step on tpu and eager on
    # CPU, are the stronger check.
    assert tpu["logits"].shape == cpu["logits"].shape == (12, cpu["logits"].shape[1])
    torch.testing.assert_close(tpu["logits"], cpu["logits"], rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()


def test_qwen3_trains_and_generates_under_bf16_autocast_as_on_cpu():
    # Both sides run the same autocast policy (matmuls in bfloat16 with
    # float32 accumulation); the kernels' summation orders differ, and a
    # bfloat16 rounding flipped by a float32 difference of one ulp moves the
    # loss by far more than one, hence the looser tolerance.
    torch._dynamo.reset()
    cpu, tpu = _run_both("qwen3", ["--steps", "8", "--block-size", "32", "--batch-size", "4", "--new-tokens", "12"])
    _assert_losses_close(cpu["losses"], tpu["losses"], 1e-2)
    assert len(tpu["text"]) == 12
    assert tpu["text"] == cpu["text"]
    # The logits are bfloat16 (the head ran under autocast): a spacing of
    # 2**-7 below 2, and both devices' values lie within two of them.
    torch.testing.assert_close(tpu["logits"], cpu["logits"], rtol=0, atol=2 * 2**-7)
    torch._dynamo.reset()


def test_resnet18_trains_in_channels_last_as_on_cpu():
    cpu, tpu = _run_both(
        "resnet", ["--steps", "4", "--width", "8", "--image-size", "16", "--batch-size", "8", "--eval-size", "8"]
    )
    _assert_losses_close(cpu["losses"], tpu["losses"], 1e-4)
    torch.testing.assert_close(tpu["logits"], cpu["logits"], rtol=1e-4, atol=1e-4)


def test_unet_ddpm_trains_and_samples_as_on_cpu():
    cpu, tpu = _run_both(
        "unet",
        [
            "--steps",
            "4",
            "--image-size",
            "8",
            "--channels",
            "8",
            "--batch-size",
            "4",
            "--samples",
            "2",
            "--sample-steps",
            "5",
        ],
    )
    _assert_losses_close(cpu["losses"], tpu["losses"], 1e-4)
    assert tpu["samples"].shape == (2, 8, 8, 3)
    np.testing.assert_allclose(tpu["samples"], cpu["samples"], rtol=1e-4, atol=1e-4)


def test_dlrm_trains_as_on_cpu():
    cpu, tpu = _run_both("dlrm", ["--steps", "6", "--batch-size", "32", "--rows", "100", "--eval-size", "64"])
    _assert_losses_close(cpu["losses"], tpu["losses"], 1e-4)
    torch.testing.assert_close(tpu["logits"], cpu["logits"], rtol=1e-4, atol=1e-5)
