"""tpu_dist fails loudly: a collective whose peer was SIGKILLed mid-transfer,
stalled past the group's timeout, or disagreed on shape or dtype raises on
every rank that survives, at that call or at wait() of its Work, leaves the
tpu tensor as it was (never as if reduced), and poisons the group: the next
collective raises too, naming the first failure. Synchronous and
async_op=True, TORCH_TPU_DIST_CHECK_CALLS=0 and 1, and the in-program
transport (ranks as threads of one process).

Each scenario starts its own rank processes (tests/distributed_jobs/faults.py)
under a hard timeout (tests/distributed_launch.py). Each test prints how
long after the fault every rank raised (pytest -s shows it)."""

import json
import os
import signal
import sys

import pytest
from distributed_launch import JOBS, run_session

RAISES = ("RuntimeError", "DistBackendError")  # DistBackendError subclasses RuntimeError
POISONED = "cannot run collectives any more"


def run_faults(scenario, *args, timeout=300, check_calls=1):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, os.path.join(JOBS, "faults.py"), scenario, "--check-calls", str(check_calls), *args]
    returncode, output = run_session(cmd, env, timeout, f"faults.py {scenario} {' '.join(args)}")
    lines = [line for line in output.splitlines() if line.startswith("RESULTS ")]
    assert returncode == 0 and lines, f"faults.py failed (exit {returncode}):\n{output[-6000:]}"
    runs = json.loads(lines[-1][len("RESULTS ") :])
    assert not any(run.get("hung") for run in runs), runs
    label = f"{scenario} {' '.join(args)}"
    for i, run in enumerate(runs):
        summary = {}
        for rank in ("0", "1"):
            if rank in run:
                outcome = run[rank]["collective"]
                summary[rank] = (outcome["raised"], outcome.get("seconds_from_kill", outcome["seconds"]))
        calls = run.get("check_calls", check_calls)
        print(f"{label} check_calls={calls} run {i}: rank: (raised, seconds from the fault or call) {summary}")
    return runs


def error_type(outcome):
    return outcome["error"].split(":", 1)[0]


def assert_raised_and_left_alone(outcome):
    """Raised, with the tensor holding its own values, not a reduction."""
    assert outcome["raised"] and error_type(outcome) in RAISES, outcome
    assert outcome["contents"] == "unchanged", outcome


def assert_poisoned(record):
    """The collective after a failed one raises at once, naming the failure,
    and so do a barrier, a broadcast and an all_gather after it."""
    for outcome in (record["next"], *record["later"].values()):
        assert outcome["raised"] and error_type(outcome) == "DistBackendError" and POISONED in outcome["error"], record


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_peer_killed_mid_all_reduce_makes_the_survivor_raise(path):
    """The first run kills the peer while the survivor waits inside the
    32 MiB all_reduce; the others at points spread through the transfer.
    Where the survivor had received everything before the kill, its
    all_reduce completes, reduced; otherwise it raises, its tensor left as it
    was. Either way its next collective raises."""
    runs = run_faults("kill", "--runs", "6" if path == "sync" else "4", "--path", path)
    survivors = []
    for run in runs:
        victim = run["returncodes"].index(-signal.SIGKILL)
        assert run["returncodes"][1 - victim] == 0, run
        survivors.append(run[str(1 - victim)])
    # never its own values returned as if they were the sum
    assert all(s["collective"]["raised"] or s["collective"]["contents"] == "reduced" for s in survivors), runs
    assert survivors[0]["collective"]["raised"], runs[0]  # the kill came while it waited for the peer
    for survivor in survivors:
        if survivor["collective"]["raised"]:
            assert_raised_and_left_alone(survivor["collective"])
            assert_poisoned(survivor)
        else:  # complete before the kill: the next call finds the peer gone
            assert survivor["next"]["raised"] and error_type(survivor["next"]) in RAISES, survivor
            assert all(later["raised"] and POISONED in later["error"] for later in survivor["later"].values()), survivor


@pytest.mark.parametrize("check_calls", [0, 1])
@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_stalled_peer_makes_both_ranks_raise(path, check_calls):
    """Rank 1 comes to the all_reduce after the group's 5 s timeout: rank 0
    raises at the timeout, rank 1 when it comes; both groups are poisoned.
    Then both destroy the group and create a new one, which reduces."""
    (run,) = run_faults("stall", "--path", path, check_calls=check_calls)
    assert run["returncodes"] == [0, 0], run
    for rank in ("0", "1"):
        assert_raised_and_left_alone(run[rank]["collective"])
        assert_poisoned(run[rank])
        recreated = run[rank]["recreated"]
        assert not recreated["raised"] and recreated["contents"] == "reduced", run


@pytest.mark.parametrize("check_calls", [0, 1])
@pytest.mark.parametrize("kind", ["shape", "dtype", "dtype_same_size"])
def test_a_mismatch_raises_on_every_rank_before_any_data_moves(kind, check_calls):
    """The ranks compare the call before any data moves, every rank raises
    with what each ran, nothing is left half done, so the group goes on: the
    next collective is right. TORCH_TPU_DIST_CHECK_CALLS=0, which once
    skipped the comparison (then gloo aborted the rank receiving more bytes,
    and float32 against int32 returned wrong values on both), is ignored
    with a warning."""
    (run,) = run_faults("mismatch", "--kind", kind, check_calls=check_calls)
    assert run["returncodes"] == [0, 0], run
    assert run["warned_check_calls_ignored"] == [check_calls == 0] * 2, run
    for rank in ("0", "1"):
        outcome = run[rank]["collective"]
        assert_raised_and_left_alone(outcome)
        assert "Detected mismatch between collectives" in outcome["error"], outcome
        nxt = run[rank]["next"]
        assert not nxt["raised"] and nxt["contents"] == "reduced", run
        assert not any(later["raised"] for later in run[rank]["later"].values()), run


@pytest.mark.parametrize("check_calls", [0, 1])
def test_in_program_transport_a_stalled_rank_poisons_the_group(check_calls):
    """Ranks as threads of one process on 2 devices: rank 1 comes after the
    group's timeout; both raise, and both groups refuse the next call."""
    (run,) = run_faults("in_program_stall", check_calls=check_calls)
    for rank in ("0", "1"):
        assert_raised_and_left_alone(run[rank]["collective"])
        assert_poisoned(run[rank])
