"""FSDP2 (meta init, to_empty on tpu, bf16 mixed precision, state dicts),
DTensor, tensor parallelism and distributed checkpoints on tpu through
tpu_dist, against CPU. Each job runs its checks in one torchrun launch under
a hard timeout (tests/distributed_launch.py)."""

import os
import re
import tempfile

import pytest
from distributed_launch import JOBS, run_job

with open(os.path.join(JOBS, "sharding.py")) as _f:
    SHARDING_CHECKS = re.findall(r"^@check\ndef (\w+)\(", _f.read(), re.M)

_job = []


def sharding_job():
    if not _job:
        _job.append(run_job("sharding.py", 2, timeout=420))
    return _job[0]


@pytest.mark.parametrize("name", SHARDING_CHECKS)
def test_sharding_on_2_processes(name):
    sharding_job().check(name)


def test_checkpoint_saved_by_4_processes_loads_on_2():
    with tempfile.TemporaryDirectory() as d:
        run_job("checkpoint.py", 4, timeout=300, args=("save", d)).check("save_sharded_state_dict")
        run_job("checkpoint.py", 2, timeout=300, args=("load", d)).check("load_on_another_world_size")
