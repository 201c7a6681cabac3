"""torch.distributed.checkpoint of an FSDP2 model on tpu: `save DIR` on one
world size, `load DIR` on another (tests/distributed/test_distributed_sharding.py saves
with 4 processes and loads with 2)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run_checks  # noqa: E402
from models import Stack  # noqa: E402

RANK = int(os.environ["RANK"])
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("tpu_dist")
MODE, DIRECTORY = sys.argv[1], sys.argv[2]


def expected_state():
    torch.manual_seed(0)
    return {k: v + 1.0 for k, v in Stack().state_dict().items()}


def sharded_model():
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model = Stack()
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    model.to_empty(device="tpu")
    return model


if MODE == "save":

    @check
    def save_sharded_state_dict():
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        model = sharded_model()
        set_model_state_dict(model, expected_state(), options=StateDictOptions(full_state_dict=True))
        dcp.save({"model": model.state_dict()}, checkpoint_id=DIRECTORY)
else:

    @check
    def load_on_another_world_size():
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        model = sharded_model()
        state = {"model": model.state_dict()}
        dcp.load(state, checkpoint_id=DIRECTORY)
        model.load_state_dict(state["model"])
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if RANK == 0:
            for name, value in expected_state().items():
                torch.testing.assert_close(full[name], value, rtol=0, atol=0, msg=name)


run_checks(RANK)
dist.destroy_process_group()
