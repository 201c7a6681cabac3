"""Launches a multi-process job with torchrun, under a hard timeout.

Every distributed test goes through `run_job`: the job runs in its own
process group (session) and the whole session is killed when the timeout
passes, so a hung collective can never hang the suite.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_jobs")


class JobResult:
    def __init__(self, returncode, output, results):
        self.returncode = returncode
        self.output = output
        self.results = results  # per rank: {check name: "ok" | traceback}

    def check(self, name):
        """Asserts that check `name` passed on every rank."""
        assert self.results, f"the job wrote no results (exit {self.returncode}):\n{self.output[-6000:]}"
        for rank, results in enumerate(self.results):
            outcome = results.get(name, f"check {name} did not run on rank {rank}")
            assert outcome == "ok", f"rank {rank}: {outcome}"


def _descendants(pid):
    """Every process below `pid`, from /proc's parent links. torchrun starts
    its ranks in sessions of their own, so killing its session leaves them
    running (and holding the output pipe open)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def run_session(cmd, env, timeout, what):
    """Runs `cmd` in a session of its own and returns (returncode, output);
    past `timeout` seconds the whole session and every process below it
    (torchrun and every rank) is killed and the test fails, naming `what`."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        below = _descendants(proc.pid)  # before the kill: orphans lose their parent link
        os.killpg(proc.pid, signal.SIGKILL)
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            output = "(no output: a process outside the job's tree still holds its pipe)"
        raise AssertionError(f"{what} ran past {timeout}s:\n{output[-6000:]}") from None
    return proc.returncode, output


def run_job(script, nproc, timeout, args=(), env=None, launcher_args=(), out_dir=None, ranks=None):
    """Runs tests/distributed_jobs/`script` on `nproc` processes; returns a
    JobResult with the results of `ranks` (default: all `nproc`; a job whose
    results files are shared with another launch, as the nodes of a
    multi-node run, names the ranks it expects in `out_dir`)."""
    out_dir = out_dir or tempfile.mkdtemp(prefix="tpu_dist_")
    full_env = dict(os.environ)
    full_env.update(
        {
            "DIST_RESULTS_DIR": out_dir,
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "TORCH_TPU_DIST_TEST_TIMEOUT": str(timeout),
        }
    )
    full_env.pop("TORCH_TPU_NUM_DEVICES", None)  # torchrun's LOCAL_WORLD_SIZE gives each rank its device
    full_env.update(env or {})
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *(launcher_args or ("--standalone",)),
        f"--nproc_per_node={nproc}",
        os.path.join(JOBS, script),
        *args,
    ]
    returncode, output = run_session(cmd, full_env, timeout, f"{script} on {nproc} processes")
    ranks = range(nproc) if ranks is None else ranks
    results = []
    for rank in ranks:
        path = os.path.join(out_dir, f"rank{rank}.json")
        if os.path.exists(path):
            with open(path) as f:
                results.append(json.load(f))
    return JobResult(returncode, output, results if len(results) == len(ranks) else [])
