"""tpu across processes, as CUDA behaves.

fork: the plugin's threads do not survive fork, so a child forked after its
parent used tpu raises CUDA's RuntimeError at its first tpu call (it used
to wait forever in PJRT_Event_Await); tensors it inherited are left alone
when it exits. A child forked before the parent used tpu has its own
runtime. A DataLoader worker that only makes CPU tensors keeps working.

torch.multiprocessing: a tpu tensor put on a Queue arrives as a tpu tensor
on the same device index with the sender's values, copied through host
memory (not shared, unlike CUDA IPC).

Every scenario runs in its own Python process under a hard timeout, so a
hang fails the test instead of stopping the suite.
"""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 240
BAD_FORK_ERROR = (
    "Cannot re-initialize tpu in forked subprocess. "
    "To use tpu with multiprocessing, you must use the 'spawn' start method"
)


def _run(tmp_path, code, env=None):
    """Runs `code` as a script file (spawned children re-import it) and returns its stdout."""
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(code))
    full_env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", **(env or {}))
    # Its own session: a hung forked grandchild is killed with it.
    p = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        stdout, stderr = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        raise AssertionError(f"the scenario hung (no exit within {TIMEOUT_S} s):\n{stdout}\n{stderr[-3000:]}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    return stdout


# Forks one child per first call: each reports what its call raised, and
# exits the way the test asks: os._exit (as multiprocessing's children do)
# or a normal interpreter exit, which frees the tensors it inherited.
FORK_SCENARIO = """
    import os, sys
    import torch, torch_tpu

    torch_tpu.set_eager_mode({mode!r})
    x = torch.arange(6.0, device="tpu")
    y = (x * 2).sum()
    assert y.item() == 30.0
    pending = x + 1  # launched, maybe not yet read
    torch_tpu.device_module._device_count_cache = None  # as if nothing had asked for the count yet

    for name, source in {calls!r}.items():
        first_call = eval("lambda: " + source)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            out = os.fdopen(write_end, "w")
            print(name, "bad fork", torch.tpu._is_in_bad_fork(), "initialized", torch.tpu.is_initialized(), file=out)
            print(name, "devices", torch.tpu.device_count(), torch.tpu.is_available(), file=out)
            for attempt in ("first", "again"):  # still the same error the second time, never a hang
                try:
                    first_call()
                    print(name, attempt, "no error", file=out)
                except RuntimeError as e:
                    print(name, attempt, type(e).__name__, str(e).splitlines()[0], file=out)
            out.close()
            if {normal_exit!r}:
                sys.exit(0)
            os._exit(0)
        os.close(write_end)
        print(os.fdopen(read_end).read(), end="")
        _, status = os.waitpid(pid, 0)
        print(name, "exit", os.waitstatus_to_exitcode(status))
    # The parent is untouched by its children.
    print("parent", torch.tpu._is_in_bad_fork(), (pending * x).sum().item())
"""

FIRST_CALLS = {
    "an op on an inherited tensor": "(x + 1).sum()",
    "an in-place op": "x.add_(1)",
    "a read to host": "x.cpu()",
    "a new tensor": 'torch.ones(3, device="tpu")',
    "a copy to tpu": 'torch.ones(3).to("tpu")',
    "synchronize": "torch.tpu.synchronize()",
    "a device's random state": "(torch.tpu.manual_seed(1), torch.randn(2, device='tpu'))",
}


def _expected_fork_report(calls):
    lines = []
    for name in calls:
        lines += [
            f"{name} bad fork True initialized False",
            f"{name} devices 1 True",  # as torch.cuda's, without asking the plugin
            f"{name} first RuntimeError {BAD_FORK_ERROR}",
            f"{name} again RuntimeError {BAD_FORK_ERROR}",
            f"{name} exit 0",
        ]
    return lines + ["parent False 70.0"]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_child_forked_after_tpu_use_raises_cudas_error_at_its_first_call(tmp_path, mode):
    out = _run(tmp_path, FORK_SCENARIO.format(mode=mode, calls=FIRST_CALLS, normal_exit=False))
    assert out.splitlines() == _expected_fork_report(FIRST_CALLS), out


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_forked_child_that_exits_normally_leaves_its_inherited_tensors_alone(tmp_path, mode):
    # The interpreter's exit frees x, y and pending, whose device buffers
    # belong to the parent's plugin.
    calls = {"a read to host": FIRST_CALLS["a read to host"]}
    out = _run(tmp_path, FORK_SCENARIO.format(mode=mode, calls=calls, normal_exit=True))
    assert out.splitlines() == _expected_fork_report(calls), out


def test_a_child_forked_before_tpu_use_uses_tpu(tmp_path):
    out = _run(
        tmp_path,
        """
        import os
        import torch, torch_tpu

        assert not torch.tpu.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = not torch.tpu._is_in_bad_fork() and torch.equal(
                (torch.arange(5.0, device="tpu") * 2).cpu(), torch.arange(5.0) * 2
            )
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent", torch.tpu._is_in_bad_fork(), (torch.arange(5.0, device="tpu") + 1).sum().item())
        """,
    )
    assert out.splitlines() == ["child exit 0", "parent False 15.0"], out


DATALOADER_SCENARIO = """
    import torch, torch_tpu
    from torch.utils.data import DataLoader, Dataset

    class Squares(Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, i):
            return torch.full((3,), float(i * i), device={device!r})

    assert torch.ones(2, device="tpu").sum().item() == 2.0  # the parent has used tpu
    loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context="fork", pin_memory=False)
    try:
        total = sum((batch.to("tpu") * 1).sum().item() for batch in loader)
        print("total", total)
    except RuntimeError as e:
        print("raised", {error!r} in str(e))
    print("parent", (torch.arange(3.0, device="tpu") + 1).sum().item())
"""


def test_a_dataloader_with_forked_workers_that_make_cpu_tensors_works_after_tpu_use(tmp_path):
    out = _run(tmp_path, DATALOADER_SCENARIO.format(device="cpu", error=BAD_FORK_ERROR))
    assert out.splitlines() == [f"total {3.0 * sum(i * i for i in range(12))}", "parent 6.0"], out


def test_a_dataloader_worker_forked_after_tpu_use_that_makes_tpu_tensors_raises(tmp_path):
    out = _run(tmp_path, DATALOADER_SCENARIO.format(device="tpu", error=BAD_FORK_ERROR))
    assert out.splitlines() == ["raised True", "parent 6.0"], out


# ---- torch.multiprocessing --------------------------------------------------------

QUEUE_SCENARIO = """
    import torch, torch_tpu
    import torch.multiprocessing as mp

    def receiver(inbox, outbox):
        import torch, torch_tpu

        items = inbox.get(timeout=120)
        report = []
        for name, t in items:
            if isinstance(t, torch.UntypedStorage):
                report.append((name, t.device.type, type(t).__name__, t.nbytes(), bytes(t.cpu())))
                continue
            report.append(
                (name, str(t.device), type(t).__name__, t.dtype, t.shape, t.requires_grad, t.detach().cpu())
            )
        # Writes on this side are not seen by the sender: its copy is its own.
        items[0][1].add_(100)
        outbox.put(report)
        # A tpu tensor sent back arrives as well.
        outbox.put(torch.arange(4, device="tpu") * 3)
        # Shared memory travels as file descriptors this process hands out.
        assert inbox.get(timeout=180) == "done"

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=receiver, args=(inbox, outbox), daemon=True)
        p.start()
        x = torch.arange(12.0, device="tpu").reshape(3, 4)
        items = [
            ("float", x),
            ("view", x.t()[1:]),
            ("bfloat16", torch.linspace(-1, 1, 5, device="tpu").to(torch.bfloat16)),
            ("int64", torch.tensor([2**40, -7], device="tpu")),
            ("bool", torch.tensor([True, False], device="tpu")),
            ("requires_grad", torch.ones(2, device="tpu", requires_grad=True)),
            ("parameter", torch.nn.Parameter(torch.full((2,), 0.5, device="tpu"))),
            ("frozen parameter", torch.nn.Parameter(torch.zeros(1, device="tpu"), requires_grad=False)),
            ("empty", torch.empty(0, 3, device="tpu")),
            ("cpu", torch.arange(3)),
            ("storage", torch.tensor([1, 2, 3], dtype=torch.uint8, device="tpu").untyped_storage()),
        ]
        inbox.put(items)
        report = outbox.get(timeout=180)
        back = outbox.get(timeout=60)
        inbox.put("done")
        p.join(timeout=60)
        sent = dict(items)
        for entry in report:
            name = entry[0]
            if name == "storage":
                print(name, entry[1:])
                continue
            device, cls, dtype, shape, requires_grad, values = entry[1:]
            t = sent[name]
            same = torch.equal(values, t.detach().cpu()) and dtype == t.dtype and shape == t.shape
            print(name, device, cls, requires_grad == t.requires_grad, same)
        print("sender unchanged", torch.equal(x.cpu(), torch.arange(12.0).reshape(3, 4)))
        print("back", back.device, back.cpu().tolist())
        print("receiver exit", p.exitcode)
"""


def test_a_tpu_tensor_sent_through_a_queue_arrives_with_its_values(tmp_path):
    out = _run(tmp_path, QUEUE_SCENARIO)
    assert out.splitlines() == [
        "float tpu:0 Tensor True True",
        "view tpu:0 Tensor True True",
        "bfloat16 tpu:0 Tensor True True",
        "int64 tpu:0 Tensor True True",
        "bool tpu:0 Tensor True True",
        "requires_grad tpu:0 Tensor True True",
        "parameter tpu:0 Parameter True True",
        "frozen parameter tpu:0 Parameter True True",
        "empty tpu:0 Tensor True True",
        "cpu cpu Tensor True True",
        "storage ('tpu', 'UntypedStorage', 3, b'\\x01\\x02\\x03')",
        "sender unchanged True",
        "back tpu:0 [0, 3, 6, 9]",
        "receiver exit 0",
    ], out


def test_a_tensor_on_the_second_device_arrives_on_the_second_device_as_queue_item_and_process_argument(tmp_path):
    out = _run(
        tmp_path,
        """
        import torch, torch_tpu
        import torch.multiprocessing as mp

        def receiver(inbox, outbox, argument):
            outbox.put((str(argument.device), argument.cpu().tolist()))
            t = inbox.get(timeout=120)
            outbox.put((str(t.device), t.cpu().tolist()))

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            inbox, outbox = ctx.Queue(), ctx.Queue()
            # A spawned Process's arguments are pickled the same way.
            argument = torch.tensor([5, 6], device="tpu:1")
            p = ctx.Process(target=receiver, args=(inbox, outbox, argument), daemon=True)
            p.start()
            inbox.put(torch.arange(3, device="tpu:1") - 1)
            print(*outbox.get(timeout=180))
            print(*outbox.get(timeout=60))
            p.join(timeout=60)
        """,
        env={"TORCH_TPU_NUM_DEVICES": "2"},
    )
    assert out.splitlines() == ["tpu:1 [5, 6]", "tpu:1 [-1, 0, 1]"], out
