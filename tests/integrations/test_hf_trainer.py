"""transformers' Trainer on tpu, given nothing but TrainingArguments: it
picks tpu:0 itself (accelerate's state learns tpu through
torch_tpu/integrations/accelerate_state.py), and a tiny llama trained with
gradient accumulation, evaluation, checkpoints, bf16 and fp16 gives the losses
and weights of the same run on CPU (`use_cpu=True`); a run resumed from its
checkpoint continues exactly as the uninterrupted one.

The model, the data and the arguments are shared with the torchrun job
(tests/distributed_jobs/hf_trainer.py, tests/integrations/test_hf_trainer_distributed.py)."""

import os

import pytest
import torch
import transformers
from accelerate import Accelerator
from distributed_jobs import hf_trainer

import torch_tpu


def _logged(trainer, key, after_step=0):
    return [(h["step"], h[key]) for h in trainer.state.log_history if key in h and h["step"] > after_step]


def _weights(trainer):
    return {name: p.detach().cpu() for name, p in trainer.model.named_parameters()}


def _assert_same_run(actual, expected, rtol, atol):
    for key in ("loss", "eval_loss"):
        got, want = _logged(actual, key), _logged(expected, key)
        assert [s for s, _ in got] == [s for s, _ in want] and got, (got, want)
        torch.testing.assert_close([v for _, v in got], [v for _, v in want], rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """6 optimizer steps of 2 micro-batches, evaluated every 3."""
    out = tmp_path_factory.mktemp("trainer")
    # (a module fixture runs before conftest's per-test "highest")
    with torch_tpu.matmul_precision("highest"):
        tpu = hf_trainer.train(str(out / "tpu"), max_steps=6, eval_steps=3)
        cpu = hf_trainer.train(str(out / "cpu"), max_steps=6, eval_steps=3, use_cpu=True)
    return tpu, cpu


def test_plain_training_arguments_choose_tpu(tmp_path):
    args = transformers.TrainingArguments(output_dir=str(tmp_path))
    assert args.device == torch.device("tpu", 0)
    assert Accelerator().device == torch.device("tpu", 0)  # where the Trainer's batches go


def test_training_with_accumulation_and_evaluation_matches_cpu(runs):
    tpu, cpu = runs
    assert {p.device.type for p in tpu.model.parameters()} == {"tpu"}
    assert len(_logged(tpu, "loss")) == 6 and len(_logged(tpu, "eval_loss")) == 2
    _assert_same_run(tpu, cpu, rtol=1e-5, atol=1e-5)
    cpu_weights = _weights(cpu)
    for name, weight in _weights(tpu).items():
        torch.testing.assert_close(weight, cpu_weights[name], rtol=1e-4, atol=1e-5, msg=name)


def test_resume_from_checkpoint_continues_the_uninterrupted_run(tmp_path):
    # With dropout: the resumed run must also draw the masks the
    # uninterrupted one drew, from the tpu generator state in the checkpoint.
    def run(name, **kwargs):
        model = hf_trainer.tiny_llama(attention_dropout=0.5)
        return hf_trainer.train(str(tmp_path / name), model=model, max_steps=4, eval_steps=2, save_steps=2, **kwargs)

    uninterrupted = run("uninterrupted")
    checkpoint = tmp_path / "uninterrupted" / "checkpoint-2"
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(os.listdir(checkpoint))
    resumed = run("resumed", resume_from_checkpoint=str(checkpoint))
    # Steps 3-4 ran in the resumed trainer, from the checkpoint's weights,
    # optimizer moments, schedule, data position and generator states.
    for key in ("loss", "eval_loss"):
        assert _logged(resumed, key, after_step=2) == _logged(uninterrupted, key, after_step=2), key
    expected = _weights(uninterrupted)
    for name, weight in _weights(resumed).items():
        torch.testing.assert_close(weight, expected[name], rtol=0, atol=0, msg=name)


def test_bf16_trains_under_bf16_autocast_like_cpu(tmp_path):
    def run(name, **kwargs):
        dtypes = set()
        model = hf_trainer.tiny_llama()
        model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))
        trainer = hf_trainer.train(str(tmp_path / name), model=model, max_steps=2, eval_steps=2, bf16=True, **kwargs)
        return trainer, dtypes

    tpu, tpu_dtypes = run("tpu")
    cpu, _ = run("cpu", use_cpu=True)
    assert tpu_dtypes == {torch.bfloat16}
    # Both sides compute in bfloat16, each with its own accumulation order.
    _assert_same_run(tpu, cpu, rtol=2e-3, atol=2e-3)


def _float16_amp_like_cuda(device, **scaler_kwargs):
    """What accelerate gives CUDA for fp16, by hand: accelerate declines
    float16 autocast on CPU (it trains the CPU run in float32), so the CPU
    reference gets it here; with scaler_kwargs, the tpu run's scaler is
    replaced too, so both start from the same scale."""

    def enable(trainer):
        if device == "cpu" or scaler_kwargs:
            trainer.accelerator.native_amp = True
            trainer.accelerator.scaler = torch.amp.GradScaler(device, **scaler_kwargs)

    return enable


@pytest.mark.parametrize("init_scale", [None, 2.0**21], ids=["default_scale", "first_steps_overflow"])
def test_fp16_trains_under_float16_autocast_and_grad_scaler_like_cpu(tmp_path, init_scale):
    # TrainingArguments(fp16=True): accelerate refuses fp16 on tpu by
    # itself; torch_tpu/integrations/accelerate_fp16.py gives tpu what CUDA
    # gets, float16 autocast and a tpu GradScaler. The reference is the same
    # Trainer on CPU under CPU's float16 autocast and GradScaler (for a
    # llama the two autocast policies cast the same ops: matmuls, linears
    # and attention in float16, norms, softmax and the loss in float32).
    # With init_scale 2**21 the first two steps' scaled gradients overflow
    # float16: both runs skip them and halve the scale.
    scaler_kwargs = {} if init_scale is None else {"init_scale": init_scale}

    def run(name, device, **kwargs):
        dtypes = set()
        model = hf_trainer.tiny_llama()
        model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))
        trainer = hf_trainer.train(
            str(tmp_path / name),
            model=model,
            max_steps=6,
            eval_steps=3,
            save_steps=6,
            fp16=True,
            before_train=_float16_amp_like_cuda(device, **scaler_kwargs),
            **kwargs,
        )
        return trainer, dtypes

    with torch_tpu.matmul_precision("highest"):
        tpu, tpu_dtypes = run("tpu", "tpu")
    cpu, cpu_dtypes = run("cpu", "cpu", use_cpu=True)
    assert tpu_dtypes == cpu_dtypes == {torch.float16}
    scaler = tpu.accelerator.scaler
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "tpu"
    expected_scale = 2.0**16 if init_scale is None else init_scale / 4  # halved at each skipped step
    assert scaler.get_scale() == cpu.accelerator.scaler.get_scale() == expected_scale
    grad_norms = [h["grad_norm"] for h in tpu.state.log_history if "grad_norm" in h]
    skipped = [not torch.isfinite(torch.tensor(g)) for g in grad_norms]
    assert skipped == [bool(init_scale)] * 2 + [False] * 4, grad_norms
    # Both sides round the same products to float16 (2**-11 relative) and
    # differ only in accumulation order: the bound (5.9e-4 at a loss of 4.9)
    # is 5x the largest difference measured over the six steps (1.2e-4).
    _assert_same_run(tpu, cpu, rtol=1e-4, atol=1e-4)
    saved = torch.load(tmp_path / "tpu" / "checkpoint-6" / "scaler.pt", weights_only=True)
    assert saved["scale"] == scaler.get_scale()


@pytest.mark.parametrize("backend", ["inductor", "tpu"])
def test_torch_compile_trains_like_cpu_and_replays(runs, tmp_path, backend):
    # torch_compile=True: accelerate compiles the model (inductor, the
    # default, routes tpu graphs to the tpu backend; "tpu" by name needs
    # accelerate_dynamo's enum member). The Trainer scales the compiled
    # graph's 0-d loss in place, which a view output would refuse.
    import torch_tpu.compile as tpu_compile

    torch._dynamo.reset()
    tpu_compile.reset_stats()
    try:
        with torch_tpu.matmul_precision("highest"):
            tpu = hf_trainer.train(
                str(tmp_path), max_steps=6, eval_steps=3, torch_compile=True, torch_compile_backend=backend
            )
        stats = tpu_compile.stats()
    finally:
        torch._dynamo.reset()
    _, cpu = runs
    _assert_same_run(tpu, cpu, rtol=1e-4, atol=1e-5)
    # Training graphs (forward, backward) and the evaluation graph, each
    # traced once per shape and then replayed.
    assert stats["graph_replays"] > stats["graph_traces"] > 0, stats
    assert not any(reason.startswith("not replayable") for reason in stats["trace_reasons"]), stats


def test_torchrun_rank_without_its_device_raises_before_the_process_group(monkeypatch):
    from accelerate.state import PartialState

    # LOCAL_RANK 1 of 2 in a process with one tpu device (TORCH_TPU_NUM_DEVICES=1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.tpu, "device_count", lambda: 1)
    PartialState._reset_state()
    try:
        with pytest.raises(RuntimeError, match="TORCH_TPU_NUM_DEVICES"):
            PartialState()
        assert not torch.distributed.is_initialized()
    finally:
        PartialState._reset_state()
