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


# Runs the child's first tpu call, reports what it raised, and exits the
# way the test asks: os._exit (as multiprocessing's children do) or a normal
# interpreter exit that frees the tensors inherited from the parent.
FORK_SCENARIO = """
    import os, sys
    import torch, torch_tpu

    torch_tpu.set_eager_mode({mode!r})
    x = torch.arange(6.0, device="tpu")
    y = (x * 2).sum()
    assert y.item() == 30.0
    pending = x + 1  # launched, maybe not yet read

    def first_call():
        {first_call}

    child_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(child_out[0])
        w = os.fdopen(child_out[1], "w")
        print("bad fork", torch.tpu._is_in_bad_fork(), "initialized", torch.tpu.is_initialized(), file=w)
        try:
            first_call()
            print("no error", file=w)
        except RuntimeError as e:
            print("raised", type(e).__name__, str(e).splitlines()[0], file=w)
        try:
            first_call()  # and again: still the same error, never a hang
        except RuntimeError as e:
            print("again", str(e).splitlines()[0], file=w)
        w.close()
        if {normal_exit!r}:
            sys.exit(0)
        os._exit(0)
    os.close(child_out[1])
    print(os.fdopen(child_out[0]).read(), end="")
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status))
    # The parent is untouched by its child.
    print("parent", torch.tpu._is_in_bad_fork(), (pending * x).sum().item())
"""

FIRST_CALLS = {
    "an op on an inherited tensor": "(x + 1).sum()",
    "an in-place op": "x.add_(1)",
    "a read to host": "x.cpu()",
    "a new tensor": 'torch.ones(3, device="tpu")',
    "a copy to tpu": 'torch.ones(3).to("tpu")',
    "synchronize": "torch.tpu.synchronize()",
    "a device's random state": "torch.tpu.manual_seed(1); torch.randn(2, device='tpu')",
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("first_call", sorted(FIRST_CALLS))
def test_a_child_forked_after_tpu_use_raises_cudas_error_at_its_first_call(tmp_path, mode, first_call):
    out = _run(tmp_path, FORK_SCENARIO.format(mode=mode, first_call=FIRST_CALLS[first_call], normal_exit=False))
    lines = out.splitlines()
    assert lines[0] == "bad fork True initialized False", out
    assert lines[1] == f"raised RuntimeError {BAD_FORK_ERROR}", out
    assert lines[2] == f"again {BAD_FORK_ERROR}", out
    assert lines[3] == "child exit 0", out
    assert lines[4] == "parent False 70.0", out


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_forked_child_that_exits_normally_leaves_its_inherited_tensors_alone(tmp_path, mode):
    # The interpreter's exit frees x, y and pending: their device buffers
    # belong to the parent's plugin, which the child cannot call into.
    out = _run(tmp_path, FORK_SCENARIO.format(mode=mode, first_call=FIRST_CALLS["a read to host"], normal_exit=True))
    assert out.splitlines()[3:] == ["child exit 0", "parent False 70.0"], out


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


def test_a_tensor_on_the_second_device_arrives_on_the_second_device(tmp_path):
    out = _run(
        tmp_path,
        """
        import torch, torch_tpu
        import torch.multiprocessing as mp

        def receiver(inbox, outbox):
            t = inbox.get(timeout=120)
            outbox.put((str(t.device), t.cpu().tolist()))

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            inbox, outbox = ctx.Queue(), ctx.Queue()
            p = ctx.Process(target=receiver, args=(inbox, outbox), daemon=True)
            p.start()
            inbox.put(torch.arange(3, device="tpu:1") - 1)
            device, values = outbox.get(timeout=180)
            p.join(timeout=60)
            print(device, values)
        """,
        env={"TORCH_TPU_NUM_DEVICES": "2"},
    )
    assert out.splitlines() == ["tpu:1 [-1, 0, 1]"], out
