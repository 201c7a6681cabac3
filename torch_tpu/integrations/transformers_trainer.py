"""transformers' Trainer checkpoints on tpu: the tpu generators' state.

A Trainer checkpoint (5.24) keeps each generator's state in rng_state.pth
(rng_state_<rank>.pth under torchrun) so that a resumed run draws the
dropout masks the uninterrupted one would have drawn; its list of device
modules (cuda, npu, hpu, mlu, musa, xla) leaves tpu out, and a run resumed
on tpu went on with other masks. Here the Trainer also writes "tpu" into
that file, as it writes "cuda": every tpu device's state
(`torch.tpu.get_rng_state_all()`, the process's LOCAL_WORLD_SIZE devices
under torchrun), and restores it on resume.

Only for a Trainer whose device is tpu; otherwise its own code runs alone.
"""

import functools
import logging
import os

import torch

logger = logging.getLogger(__name__)


def _rng_file(trainer, directory):
    """Where the Trainer keeps this process's generator states."""
    if trainer.args.world_size <= 1:
        return os.path.join(directory, "rng_state.pth")
    return os.path.join(directory, f"rng_state_{trainer.args.process_index}.pth")


def _load(path):
    from transformers.trainer_pt_utils import safe_globals

    with safe_globals():  # the file also holds numpy's state
        return torch.load(path, weights_only=True)


def _patch_trainer(trainer_module):
    trainer_class = trainer_module.Trainer
    if getattr(trainer_class, "_torch_tpu", False):
        return
    save_rng_state = trainer_class._save_rng_state
    load_rng_state = trainer_class._load_rng_state

    @functools.wraps(save_rng_state)
    def _save_rng_state(self, output_dir):
        save_rng_state(self, output_dir)
        path = _rng_file(self, output_dir)
        if self.args.device.type != "tpu" or not os.path.isfile(path):
            return
        states = _load(path)
        states["tpu"] = torch.tpu.get_rng_state_all()
        torch.save(states, path + ".tmp")
        os.replace(path + ".tmp", path)

    @functools.wraps(load_rng_state)
    def _load_rng_state(self, checkpoint):
        load_rng_state(self, checkpoint)
        if checkpoint is None or self.args.device.type != "tpu":
            return
        path = _rng_file(self, checkpoint)
        states = _load(path).get("tpu") if os.path.isfile(path) else None
        if states is None:
            # as the Trainer says for a missing file: the run still resumes
            logger.warning("%s holds no tpu generator state: dropout will not repeat the uninterrupted run", path)
            return
        for index, state in enumerate(states[: torch.tpu.device_count()]):
            torch.tpu.set_rng_state(state, index)

    trainer_class._save_rng_state = _save_rng_state
    trainer_class._load_rng_state = _load_rng_state
    trainer_class._torch_tpu = True


def install(when_imported):
    when_imported("transformers.trainer", _patch_trainer)
