"""The c10d backend tpu_dist: every collective against gloo on CPU, on 2 and
4 processes launched by torchrun (tests/distributed_jobs/collectives.py runs
all checks in one job per world size; each test here reads one check's
outcome); a dead rank; a 2-"node" run; registration.

Every job runs under a hard timeout (tests/distributed_launch.py)."""

import json
import os
import re
import socket
import sys
import tempfile
import threading

import pytest
import torch.distributed as dist
from distributed_launch import JOBS, JobResult, run_job, run_session

import torch_tpu  # noqa: F401

with open(os.path.join(JOBS, "collectives.py")) as _f:
    COLLECTIVE_CHECKS = re.findall(r"^@check\ndef (\w+)\(", _f.read(), re.M)

_jobs = {}


def collectives_job(world):
    if world not in _jobs:
        _jobs[world] = run_job("collectives.py", world, timeout=420)
    return _jobs[world]


@pytest.mark.parametrize("name", COLLECTIVE_CHECKS)
def test_collective_on_2_processes(name):
    collectives_job(2).check(name)


@pytest.mark.parametrize("name", COLLECTIVE_CHECKS)
def test_collective_on_4_processes(name):
    collectives_job(4).check(name)


def test_backends_are_registered_for_tpu():
    assert "tpu_dist" in dist.Backend.backend_list and "tpu" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"


def test_a_dead_rank_makes_the_others_raise():
    # rank 1 leaves without a word; rank 0's next collective must raise
    # (gloo sees the closed connection, or the group's 15 s timeout passes)
    run_job("failures.py", 2, timeout=180, ranks=[0]).check("collective_with_a_dead_peer_raises")


def test_mp_spawn():
    out_dir = tempfile.mkdtemp(prefix="tpu_dist_spawn_")
    env = dict(os.environ, DIST_RESULTS_DIR=out_dir, OMP_NUM_THREADS="1")
    returncode, output = run_session([sys.executable, os.path.join(JOBS, "spawned.py")], env, 240, "mp.spawn job")
    assert returncode == 0, output[-6000:]
    results = JobResult(0, "", [])
    for rank in range(2):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            results.results.append(json.load(f))
    results.check("all_reduce_under_mp_spawn")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_one_machine():
    """torchrun --nnodes=2 --node-rank=i against one local c10d rendezvous,
    two processes per "node"."""
    port = _free_port()
    out_dir = tempfile.mkdtemp(prefix="tpu_dist_nodes_")
    launcher = ("--nnodes=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=twonodes")
    jobs = [None, None]

    def node(i):
        jobs[i] = run_job(
            "smoke.py",
            2,
            timeout=240,
            env={"TEST_NODES": "2"},
            # node 0 hosts the rendezvous store and node 1 joins it as a
            # client: left to infer it, both try to host at 127.0.0.1 and the
            # loser's fallback connection timed out under load
            launcher_args=(*launcher, f"--node-rank={i}", f"--rdzv-conf=is_host={int(i == 0)},read_timeout=180"),
            out_dir=out_dir,
            ranks=[],
        )

    threads = [threading.Thread(target=node, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(job is not None and job.returncode == 0 for job in jobs), [j and j.output[-3000:] for j in jobs]
    results = JobResult(0, "", [])
    for rank in range(4):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            results.results.append(json.load(f))
    results.check("all_reduce_and_all_gather_across_nodes")
