"""TorchTitan's llama3 debug model on tpu: a config_registry module of ours
(TorchTitan's `--module` takes any importable module), TorchTitan's own
`llama3_debugmodel` with offline assets and a size that trains in seconds
on the XLA:CPU plugin. Nothing of TorchTitan is patched.

    PYTHONPATH=examples/torchtitan python -m torchtitan.train --module llama3_tpu --config llama3_debugmodel_tpu
    PYTHONPATH=examples/torchtitan torchrun --nproc_per_node 2 -m torchtitan.train \\
        --module llama3_tpu --config llama3_debugmodel_tpu

Any TorchTitan option can follow on the command line (`--training.steps 20`).
"""

import os

from torchtitan.models.llama3.config_registry import llama3_debugmodel

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")


def llama3_debugmodel_tpu():
    config = llama3_debugmodel()
    # FlexAttention, the model's attention, through torch_tpu
    # (torch_tpu/integrations/torchtitan.py): torch's own refuses tpu tensors.
    config.override.imports = ["torch_tpu.integrations.torchtitan.tpu_flex_attention"]
    # Offline: a byte-level tokenizer and one repeated 64-token document
    # (make_assets.py) in place of the Hub's tokenizer and c4_test.
    config.hf_assets_path = os.path.join(ASSETS, "tokenizer")
    config.dataloader.dataset = "c4_test"
    config.dataloader.dataset_path = os.path.join(ASSETS, "synthetic_text")
    config.training.seq_len = 64
    config.training.local_batch_size = 2
    config.training.steps = 3
    config.lr_scheduler.warmup_steps = 1
    config.dump_folder = os.environ.get("TORCHTITAN_DUMP_FOLDER", "./outputs")
    # A run this short has no use for checkpoints, validation or activation
    # checkpointing; each works the same on tpu when enabled.
    config.checkpoint.enable = False
    config.validator.enable = False
    config.activation_checkpoint = None
    config.debug.seed = 0
    return config
