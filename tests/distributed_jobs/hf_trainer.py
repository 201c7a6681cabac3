"""transformers' Trainer on a tiny llama: the model, data and arguments of
tests/integrations/test_hf_trainer.py, and, run as a script, the same training under
torchrun (tests/integrations/test_hf_trainer_distributed.py).

    torchrun --nproc_per_node=2 hf_trainer.py OUT.pt [--steps N] [--save-steps K]
        [--resume-from CHECKPOINT] [--attention-dropout P] [--fp16]

Each rank trains with its micro-batch of 2 and evaluates its share of the
evaluation set; the Trainer (through accelerate) starts the process group,
`tpu_dist`, and wraps the model in DDP on tpu:LOCAL_RANK by itself. Every
K steps (default: the last step) is evaluated and saved (checkpoints in
OUT.pt's folder, under trainer/); rank 0 writes the logged losses and the
final weights to OUT.pt.
"""

import argparse
import os

import torch
import transformers

VOCAB = 128


def tiny_llama(attention_dropout=0.0):
    """hidden 64, 2 layers; the same weights on every call."""
    config = transformers.LlamaConfig(
        attention_dropout=attention_dropout,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


class TokenData(torch.utils.data.Dataset):
    """Seeded random token rows, each its own labels."""

    def __init__(self, rows, seed, length=16):
        self.ids = torch.randint(0, VOCAB, (rows, length), generator=torch.Generator().manual_seed(seed))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def train(
    output_dir,
    model=None,
    max_steps=6,
    eval_steps=3,
    save_steps=None,
    resume_from_checkpoint=None,
    before_train=None,
    **kwargs,
):
    """Trains with micro-batches of 2 (kwargs go to TrainingArguments; no
    device argument: the Trainer picks its device itself) and returns the
    Trainer; `before_train(trainer)`, if given, runs before it trains."""
    options = dict(
        per_device_train_batch_size=2,
        per_device_eval_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        eval_strategy="steps" if eval_steps else "no",
        eval_steps=eval_steps,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps,
        report_to=[],
        disable_tqdm=True,
    )
    options.update(kwargs)
    args = transformers.TrainingArguments(output_dir=output_dir, max_steps=max_steps, **options)
    trainer = transformers.Trainer(
        model=model if model is not None else tiny_llama(),
        args=args,
        train_dataset=TokenData(64, seed=1),
        eval_dataset=TokenData(8, seed=2) if eval_steps else None,
    )
    if before_train is not None:
        before_train(trainer)
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    return trainer


def results(trainer):
    """The losses the Trainer logged (over all ranks) and the final weights."""
    history = trainer.state.log_history
    logged = {key: [(h["step"], h[key]) for h in history if key in h] for key in ("loss", "eval_loss")}
    model = trainer.accelerator.unwrap_model(trainer.model)
    return {**logged, "weights": {k: v.detach().cpu() for k, v in model.state_dict().items()}}


def main():
    import torch_tpu  # noqa: F401  (torchrun starts this file bare)

    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--save-steps", type=int, help="default: save the last step only")
    parser.add_argument("--resume-from", help="a checkpoint folder to resume from")
    parser.add_argument("--attention-dropout", type=float, default=0.0)
    parser.add_argument("--fp16", action="store_true", help="TrainingArguments(fp16=True)")
    options = parser.parse_args()
    torch.set_float32_matmul_precision("highest")  # as the test's single-process run (tests/conftest.py)
    trainer = train(
        os.path.join(os.path.dirname(options.out), "trainer"),
        model=tiny_llama(attention_dropout=options.attention_dropout),
        max_steps=options.steps,
        eval_steps=options.save_steps or options.steps,
        save_steps=options.save_steps or options.steps,
        resume_from_checkpoint=options.resume_from,
        gradient_accumulation_steps=1,
        ddp_find_unused_parameters=False,
        fp16=options.fp16,
    )
    if options.fp16:  # float16 autocast and a tpu GradScaler on every rank (integrations/accelerate_fp16.py)
        assert trainer.accelerator.native_amp and trainer.accelerator.scaler._device == "tpu"
    assert trainer.args.parallel_mode == transformers.training_args.ParallelMode.DISTRIBUTED
    assert isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel), type(trainer.model_wrapped)
    assert trainer.args.device == torch.device("tpu", int(os.environ["LOCAL_RANK"]))
    assert torch.distributed.get_backend() == "tpu_dist"
    if torch.distributed.get_rank() == 0:
        torch.save(results(trainer), options.out)


if __name__ == "__main__":
    main()
