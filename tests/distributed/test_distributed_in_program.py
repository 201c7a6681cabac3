"""The in-program transport of tpu_dist: collectives as StableHLO
collectives inside programs replicated over a group's devices, the way a TPU
slice runs them. Four ranks are threads of one process on 4 devices of the
XLA:CPU plugin (tests/distributed_jobs/in_program.py); each check compares
with CPU PyTorch on the same inputs. The job runs under a hard timeout in a
session of its own, so a stuck collective cannot hang the suite."""

import json
import os
import sys
import tempfile

import pytest
from distributed_launch import JOBS, run_session

CHECKS = [
    "check_all_reduce",
    "check_broadcast_moves_the_roots_bits",
    "check_all_gather_and_reduce_scatter",
    "check_all_to_all_single_with_equal_splits",
    "check_deferred_ops_around_a_collective",
    "check_subgroups_on_permuted_devices",
    "check_mismatched_shapes_raise_on_every_rank_and_the_group_goes_on",
    "check_bitwise_ops_and_host_transport_agree",
    "check_backends_dropped_as_the_host_transport_finishes_do_not_hang",
    "check_programs_hold_stablehlo_collectives",
    "check_compiled_step_with_collectives_replays_as_one_program",
    "check_ranks_launching_different_programs_raise_and_the_group_goes_on",
]


@pytest.fixture(scope="module")
def outcomes():
    dump = tempfile.mkdtemp(prefix="tpu_in_program_hlo_")
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4", TORCH_TPU_DUMP_HLO=dump, PYTHONUNBUFFERED="1")
    env.pop("TORCH_TPU_DIST_TRANSPORT", None)
    cmd = [sys.executable, os.path.join(JOBS, "in_program.py")]
    returncode, output = run_session(cmd, env, timeout=300, what="the in-program collectives job")
    lines = [line for line in output.splitlines() if line.startswith("RESULTS ")]
    assert returncode == 0 and lines, f"job failed (exit {returncode}):\n{output[-6000:]}"
    return json.loads(lines[-1][len("RESULTS ") :])


def test_every_check_ran(outcomes):
    assert sorted(outcomes) == sorted(CHECKS)


@pytest.mark.parametrize("name", CHECKS)
def test_in_program_collective(outcomes, name):
    assert outcomes[name] == "ok", outcomes[name]
