"""Faults in the middle of tpu_dist collectives, with real processes: a peer
SIGKILLed while a 32 MiB all_reduce is in flight, a peer that stalls past the
group's timeout, and peers that disagree on shape or dtype. Each run starts
its own 2 rank processes (not under torchrun: its agent would kill the
survivor as soon as a rank dies), lets the fault happen, and records what
every surviving rank saw: whether the collective raised or returned, how
long after the fault, what the tensor then held, and what the next
collective did.

    python tests/distributed_jobs/faults.py kill --runs 5 --path sync
    python tests/distributed_jobs/faults.py stall --check-calls 0
    python tests/distributed_jobs/faults.py mismatch --kind dtype --check-calls 0
    python tests/distributed_jobs/faults.py in_program_stall

`--device cpu` runs the same with gloo on CPU tensors, the reference.
Prints one line `RESULTS <json>`: a list of runs, each {rank: record}.
tests/distributed/test_distributed_faults.py runs it under a hard timeout.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

ELEMENTS = 8 * 1024 * 1024  # 32 MiB of float32
TIMEOUT_S = 5  # the group timeout of the stall and mismatch runs
KILL_RUN_TIMEOUT_S = 20  # a kill run's group timeout: well past its detection
STALL_S = TIMEOUT_S + 4
RUN_TIMEOUT_S = 120  # one run's processes; past it they are killed and the run is marked hung
WAITING_KILL_S = 1.0  # the survivor has long staged its input and waits for the peer


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- one rank


def _attempt(call):
    """Runs call(); returns {"raised": bool, "seconds": from the start,
    "error": "Type: first line"} (the end time in "at")."""
    start = time.time()
    try:
        call()
        raised, error = False, None
    except Exception as e:  # noqa: BLE001  (recorded; the test judges it)
        raised, error = True, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
    end = time.time()
    return {"raised": raised, "seconds": round(end - start, 3), "at": end, "error": error}


def _contents(t, reduced, old):
    """What a tensor holds: the reduced value, its old value, or neither."""
    host = t.cpu()
    if bool((host == reduced).all()):
        return "reduced"
    if bool((host == old).all()):
        return "unchanged"
    return "other"


class Rank:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.args = torch, dist, args
        self.rank = int(os.environ["RANK"])
        if args.device == "tpu":
            import torch_tpu  # noqa: F401

            torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
            self.device = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
            backend = "tpu_dist"
        else:
            self.device, backend = torch.device("cpu"), "gloo"
        timeout = KILL_RUN_TIMEOUT_S if args.scenario == "kill" else TIMEOUT_S
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
        self.backend = backend
        self.record = {"rank": self.rank}

    def all_reduce(self, t):
        if self.args.path == "async":
            self.dist.all_reduce(t, async_op=True).wait()
        else:
            self.dist.all_reduce(t)

    def next_collective(self):
        """A small well-formed all_reduce after the fault: the group must
        refuse it (raise) instead of running it."""
        t = self.torch.ones(4, device=self.device)
        outcome = _attempt(lambda: self.all_reduce(t))
        if not outcome["raised"]:
            outcome["contents"] = _contents(t, 2.0, 1.0)
        return outcome

    def later_collectives(self):
        """Other kinds of call after that: barrier, broadcast, all_gather."""
        torch, dist, device = self.torch, self.dist, self.device
        calls = {
            "barrier": lambda: dist.barrier(),
            "broadcast": lambda: dist.broadcast(torch.ones(4, device=device), src=0),
            "all_gather": lambda: dist.all_gather_into_tensor(
                torch.empty(8, device=device), torch.ones(4, device=device)
            ),
        }
        return {name: _attempt(call) for name, call in calls.items()}

    def recreated_group(self):
        """The way on after a failure: destroy the group, create a new one
        (waiting for the late rank), all_reduce on it."""
        dist, torch = self.dist, self.torch
        dist.destroy_process_group()
        dist.init_process_group(self.backend, timeout=timedelta(seconds=60))
        t = torch.ones(4, device=self.device)
        outcome = _attempt(lambda: dist.all_reduce(t))
        outcome["contents"] = _contents(t, 2.0, 1.0)
        return outcome

    def write(self):
        with open(os.path.join(self.args.out, f"rank{self.rank}.json"), "w") as f:
            json.dump(self.record, f)


def kill_rank(args):
    """The victim (rank args.victim) starts the big all_reduce and is
    SIGKILLed `fraction` of a warm-up all_reduce's time into it, or, with a
    negative fraction, never enters it and is killed while the survivor
    waits inside. The survivor records its all_reduce (raised, or completed
    before the kill reached it) and its next collective."""
    r = Rank(args)
    torch, dist = r.torch, r.dist
    for _ in range(2):  # the second one, compiled programs cached, times the transfer
        x = torch.ones(ELEMENTS, device=r.device)
        start = time.time()
        dist.all_reduce(x)
        assert bool((x.cpu() == 2).all()), "the warm-up all_reduce is wrong"
        r.record["warm_up_s"] = round(time.time() - start, 3)
    dist.barrier()
    r.record["kill_fraction"] = args.fraction
    x = torch.ones(ELEMENTS, device=r.device)
    if r.rank == args.victim:
        delay = args.fraction * r.record["warm_up_s"] if args.fraction >= 0 else WAITING_KILL_S

        def kill():
            time.sleep(delay)
            with open(os.path.join(args.out, "killed_at"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
        try:
            if args.fraction >= 0:
                r.all_reduce(x)
        finally:
            time.sleep(60)  # the kill comes first
    outcome = _attempt(lambda: r.all_reduce(x))
    outcome["contents"] = _contents(x, 2.0, 1.0)
    r.record["collective"] = outcome
    r.record["next"] = r.next_collective()
    r.record["later"] = r.later_collectives()
    r.write()


def stall_rank(args):
    """Rank 1 comes STALL_S late (past the group's timeout) to an all_reduce;
    both ranks record that call and the next one."""
    r = Rank(args)
    torch, dist = r.torch, r.dist
    x = torch.ones(1024, device=r.device)
    dist.all_reduce(x)
    dist.barrier()
    x = torch.ones(1024, device=r.device)
    if r.rank == 1:
        time.sleep(STALL_S)
    outcome = _attempt(lambda: r.all_reduce(x))
    outcome["contents"] = _contents(x, 2.0, 1.0)
    r.record["collective"] = outcome
    r.record["next"] = r.next_collective()
    r.record["later"] = r.later_collectives()
    r.record["recreated"] = r.recreated_group()
    r.write()


def mismatch_rank(args):
    """The ranks all_reduce tensors of different shapes, or dtypes (float32
    against float64, or against int32 of the same size)."""
    r = Rank(args)
    torch, dist = r.torch, r.dist
    dist.all_reduce(torch.ones(4, device=r.device))
    if args.kind == "shape":
        x = torch.ones(1024 if r.rank == 0 else 1000, device=r.device)
    elif args.kind == "dtype":
        x = torch.ones(1024, device=r.device, dtype=torch.float32 if r.rank == 0 else torch.float64)
    else:  # the same element size: only a comparison of the calls can tell
        x = torch.ones(1024, device=r.device, dtype=torch.float32 if r.rank == 0 else torch.int32)
    outcome = _attempt(lambda: r.all_reduce(x))
    outcome["contents"] = _contents(x, 2, 1)
    r.record["collective"] = outcome
    r.record["next"] = r.next_collective()
    r.record["later"] = r.later_collectives()
    r.write()


def in_program_stall(args):
    """The in-program transport (2 ranks as threads of this process on 2
    devices): rank 1 comes past the group's timeout; each rank records the
    call and the next one."""
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import AllgatherOptions

    import torch_tpu  # noqa: F401
    from torch_tpu.distributed.threaded import run_ranks

    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM

    def body(rank, backend):
        assert backend.program_devices == [0, 1], backend.program_devices
        x = torch.ones(1024, device="tpu")
        backend.allreduce([x], opts).wait()
        assert bool((x.cpu() == 2).all())
        x = torch.ones(1024, device="tpu")
        if rank == 1:
            time.sleep(STALL_S)
        record = {"rank": rank}
        record["collective"] = _attempt(lambda: backend.allreduce([x], opts).wait())
        record["collective"]["contents"] = _contents(x, 2.0, 1.0)
        y = torch.ones(4, device="tpu")
        record["next"] = _attempt(lambda: backend.allreduce([y], opts).wait())
        if not record["next"]["raised"]:
            record["next"]["contents"] = _contents(y, 2.0, 1.0)
        record["later"] = {
            "barrier": _attempt(lambda: backend.barrier(dist.BarrierOptions()).wait()),
            "broadcast": _attempt(lambda: backend.broadcast([y], dist.BroadcastOptions()).wait()),
            "all_gather": _attempt(
                lambda: backend._allgather_base(torch.empty(8, device="tpu"), y, AllgatherOptions()).wait()
            ),
        }
        return record

    return run_ranks(2, body, timeout=timedelta(seconds=TIMEOUT_S))


# ---------------------------------------------------------------- launcher


def launch(args, run_args, check_calls):
    """One run: 2 rank processes of this script; returns {rank: record} for
    the ranks that wrote one, and the fault's time (a kill's) if any."""
    out = tempfile.mkdtemp(prefix="tpu_dist_faults_")
    env = dict(os.environ)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        TORCH_TPU_DIST_CHECK_CALLS=str(check_calls),
    )
    env.pop("TORCH_TPU_NUM_DEVICES", None)
    procs = []
    for rank in range(2):
        env_r = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        cmd = [sys.executable, os.path.abspath(__file__), "--rank-of", args.scenario, "--out", out, *run_args]
        procs.append(subprocess.Popen(cmd, env=env_r, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.time() + RUN_TIMEOUT_S
    outputs, hung = [], False
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=max(1.0, deadline - time.time()))[0])
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                q.kill()
            outputs.append(p.communicate()[0])
    run = {"returncodes": [p.returncode for p in procs], "hung": hung}
    # TORCH_TPU_DIST_CHECK_CALLS=0 is refused with a warning at group creation.
    run["warned_check_calls_ignored"] = ["TORCH_TPU_DIST_CHECK_CALLS=0 is ignored" in o for o in outputs]
    for rank in range(2):
        path = os.path.join(out, f"rank{rank}.json")
        if os.path.exists(path):
            with open(path) as f:
                run[str(rank)] = json.load(f)
        elif procs[rank].returncode != -signal.SIGKILL:
            run[f"output{rank}"] = outputs[rank][-3000:]
    killed_at = os.path.join(out, "killed_at")
    if os.path.exists(killed_at):
        with open(killed_at) as f:
            fault = float(f.read())
        run["killed_at"] = fault
        for rank in range(2):
            if str(rank) in run:
                outcome = run[str(rank)]["collective"]
                outcome["seconds_from_kill"] = round(outcome["at"] - fault, 3)
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["kill", "stall", "mismatch", "in_program_stall"])
    parser.add_argument("--rank-of", action="store_true", help="run one rank (the launcher passes it)")
    parser.add_argument("--out")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--path", choices=["sync", "async"], default="sync")
    parser.add_argument("--device", choices=["tpu", "cpu"], default="tpu")
    parser.add_argument("--check-calls", type=int, choices=[0, 1], default=1)
    parser.add_argument("--kind", choices=["shape", "dtype", "dtype_same_size"], default="shape")
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--fraction", type=float, default=0.5, help="kill runs: set by the launcher")
    args = parser.parse_args()

    if args.rank_of:
        {"kill": kill_rank, "stall": stall_rank, "mismatch": mismatch_rank}[args.scenario](args)
        os._exit(0)  # a group with a dead or failed peer cannot be shut down cleanly
    if args.scenario == "in_program_stall":
        os.environ["TORCH_TPU_NUM_DEVICES"] = "2"
        os.environ["TORCH_TPU_DIST_CHECK_CALLS"] = str(args.check_calls)
        print("RESULTS " + json.dumps([{str(rec["rank"]): rec for rec in in_program_stall(args)}]), flush=True)
        os._exit(0)
    common = ["--path", args.path, "--device", args.device, "--kind", args.kind]
    runs = []
    for i in range(args.runs):
        run_args, check_calls = list(common), args.check_calls
        if args.scenario == "kill":
            # The victim alternates. The first run kills it while the survivor
            # waits inside the transfer (no call comparison before it, where
            # it would wait instead); the others move the kill through the
            # transfer (a kill near its end may come after the survivor got
            # everything it needs, and then its all_reduce rightly completes).
            victim = (args.victim + i) % 2
            fraction = -1.0 if i == 0 else 0.05 + 0.6 * (i - 1) / max(1, args.runs - 2)
            run_args += ["--victim", str(victim), "--fraction", f"{fraction:.3f}"]
            check_calls = 0 if i == 0 else check_calls
        run = launch(args, run_args, check_calls)
        run["check_calls"] = check_calls
        runs.append(run)
    print("RESULTS " + json.dumps(runs), flush=True)


if __name__ == "__main__":
    main()
