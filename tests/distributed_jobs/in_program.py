"""Collectives of the in-program transport: 4 ranks as threads of this
process, each on its own device (TORCH_TPU_NUM_DEVICES=4), each holding a
`tpu_dist` backend built as c10d builds it (torch_tpu.distributed's
creator). Every collective runs as one program replicated over the group's
devices. Prints one JSON line: {check: "ok" | traceback}.

    TORCH_TPU_NUM_DEVICES=4 python tests/distributed_jobs/in_program.py

ONLY_CHECK=<name> runs that check alone.
"""

import json
import math
import os
import threading
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._C._distributed_c10d import AllgatherOptions

import torch_tpu
from torch_tpu.distributed.threaded import run_ranks

RANKS = 4
TIMEOUT = timedelta(seconds=120)
DROPPED_GROUPS = 40


def make_group(prefix, size, ranks_body, store=None, group_name=None):
    """Runs ranks_body(rank, backend) on `size` threads, rank r on device r
    (or on devices[r] when ranks_body has a `devices` attribute); returns
    each rank's result or raises its first exception."""
    devices = getattr(ranks_body, "devices", None)
    return run_ranks(
        size, ranks_body, devices=devices, group_name=group_name, store=store, prefix=prefix, timeout=TIMEOUT
    )


def reduce_options(op):
    opts = dist.AllreduceOptions()
    opts.reduceOp = op
    return opts


def rank_values(r, dtype):
    """Rank r's input: distinct per rank, exact in every dtype used."""
    base = torch.tensor([1, -2, 3, 0, 5, -1], dtype=torch.float64) + r
    if dtype == torch.bool:
        return (base + r) % 3 == 0
    return base.to(dtype)


def cpu_reduce(op_name, values):
    stacked = torch.stack(values)
    if op_name in ("SUM", "AVG", "PREMUL_SUM"):
        total = stacked.any(0) if stacked.dtype == torch.bool else stacked.sum(0, dtype=stacked.dtype)
        if op_name == "AVG":
            # Integer AVG truncates, as NCCL's does (and tpu_dist's gloo path).
            rounding = None if stacked.dtype.is_floating_point else "trunc"
            total = torch.div(total, len(values), rounding_mode=rounding)
        return total
    if op_name == "PRODUCT":
        return stacked.all(0) if stacked.dtype == torch.bool else stacked.prod(0, dtype=stacked.dtype)
    return stacked.amin(0) if op_name == "MIN" else stacked.amax(0)


def check_all_reduce():
    cases = [(op, torch.float32) for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM")]
    cases += [(op, dt) for op in ("SUM", "AVG", "MIN", "MAX") for dt in (torch.int64, torch.int32)]
    cases += [(op, torch.bool) for op in ("SUM", "PRODUCT", "MIN", "MAX")]
    cases += [("SUM", torch.bfloat16)]
    for op_name, dtype in cases:

        def body(r, backend):
            x = rank_values(r, dtype).to("tpu")
            op = dist._make_nccl_premul_sum(0.5) if op_name == "PREMUL_SUM" else getattr(dist.ReduceOp, op_name)
            backend.allreduce([x], reduce_options(op)).wait()
            return x, backend.program_devices

        before = torch_tpu.metrics()["bytes_to_host"]
        results = make_group(f"ar/{op_name}/{dtype}", RANKS, body)
        torch_tpu.sync()
        # Nothing was staged through host memory (the gloo exchange that
        # compares the calls uses CPU tensors of its own).
        moved = torch_tpu.metrics()["bytes_to_host"] - before
        assert moved == 0, f"{op_name} {dtype}: {moved} bytes went to the host"
        inputs = [rank_values(r, dtype) for r in range(RANKS)]
        if op_name == "PREMUL_SUM":
            inputs = [v * 0.5 for v in inputs]
        expected = cpu_reduce(op_name, inputs)
        for got, devices in results:
            assert devices == list(range(RANKS)), devices
            torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, msg=f"{op_name} {dtype}")


def check_broadcast_moves_the_roots_bits():
    for root in range(RANKS):

        def body(r, backend):
            x = torch.tensor([r, -0.0, math.nan, float(r) + 0.25]).to("tpu")
            if r == root:
                x[0] = -0.0
            opts = dist.BroadcastOptions()
            opts.rootRank = root
            backend.broadcast([x], opts).wait()
            return x.cpu()

        expected = torch.tensor([-0.0, -0.0, math.nan, root + 0.25])
        for got in make_group(f"bc/{root}", RANKS, body):
            assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), (got, expected)


def check_all_gather_and_reduce_scatter():
    def body(r, backend):
        x = torch.arange(6.0).reshape(2, 3).add(10 * r).to("tpu")
        flat = torch.empty(RANKS * 2, 3, device="tpu")
        backend._allgather_base(flat, x, AllgatherOptions()).wait()
        stacked = torch.empty(RANKS, 2, 3, device="tpu")
        backend._allgather_base(stacked, x, AllgatherOptions()).wait()
        rs_in = torch.arange(RANKS * 3.0).reshape(RANKS, 3).mul(r + 1).to("tpu")
        rs_out = torch.empty(3, device="tpu")
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = dist.ReduceOp.AVG
        backend._reduce_scatter_base(rs_out, rs_in, opts).wait()
        return flat.cpu(), stacked.cpu(), rs_out.cpu()

    results = make_group("ag", RANKS, body)
    gathered = torch.cat([torch.arange(6.0).reshape(2, 3).add(10 * r) for r in range(RANKS)])
    summed = sum(torch.arange(RANKS * 3.0).reshape(RANKS, 3).mul(r + 1) for r in range(RANKS)) / RANKS
    for r, (flat, stacked, rs_out) in enumerate(results):
        torch.testing.assert_close(flat, gathered, rtol=0, atol=0)
        torch.testing.assert_close(stacked, gathered.reshape(RANKS, 2, 3), rtol=0, atol=0)
        torch.testing.assert_close(rs_out, summed[r])


def check_all_to_all_single_with_equal_splits():
    def body(r, backend):
        x = (torch.arange(RANKS * 2.0).reshape(RANKS, 2) + 100 * r).to("tpu")
        out = torch.empty(RANKS, 2, device="tpu")
        backend.alltoall_base(out, x, [], [], dist.AllToAllOptions()).wait()
        # Equal splits spelled out (as functional collectives pass them).
        spelled = torch.empty(RANKS, 2, device="tpu")
        backend.alltoall_base(spelled, x, [1] * RANKS, [1] * RANKS, dist.AllToAllOptions()).wait()
        # Dim 0 must split evenly, whatever the element count.
        uneven = torch.zeros(2, RANKS, device="tpu")
        try:
            backend.alltoall_base(torch.empty_like(uneven), uneven, [], [], dist.AllToAllOptions()).wait()
            raised = None
        except RuntimeError as e:
            raised = str(e)
        return out.cpu(), spelled.cpu(), raised

    for r, (got, spelled, raised) in enumerate(make_group("a2a", RANKS, body)):
        expected = torch.stack([torch.arange(RANKS * 2.0).reshape(RANKS, 2)[r] + 100 * s for s in range(RANKS)])
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        torch.testing.assert_close(spelled, expected, rtol=0, atol=0)
        assert raised and "dim 0 does not divide equally" in raised, raised


def check_deferred_ops_around_a_collective():
    """DeferAndFuse: pending ops that write the input run before the
    collective; ops after it read its result."""

    def body(r, backend):
        with torch_tpu.eager_mode("defer_and_fuse"):
            x = torch.ones(4, device="tpu")
            x.mul_(r + 1).add_(1)  # pending
            backend.allreduce([x], reduce_options(dist.ReduceOp.SUM)).wait()
            y = x * 2 + 1  # reads the collective's result
            return y.cpu()

    expected = (sum(r + 2 for r in range(RANKS)) * torch.ones(4)) * 2 + 1
    for got in make_group("dnf", RANKS, body):
        torch.testing.assert_close(got, expected)


def check_subgroups_on_permuted_devices():
    """Two groups of 2 ranks, on devices (3, 1) and (0, 2): each reduces only
    its own ranks' values; rank order follows the group, not the device."""

    def run(devices, base):
        def body(r, backend):
            x = torch.tensor([base + r * 1.0, 10.0 * r]).to("tpu")
            backend.allreduce([x], reduce_options(dist.ReduceOp.SUM)).wait()
            g = torch.empty(2, 2, device="tpu")
            backend._allgather_base(g, x[:1].reshape(1, 1).expand(1, 2).contiguous(), AllgatherOptions()).wait()
            return x.cpu(), g.cpu(), backend.program_devices

        body.devices = devices
        return make_group(f"sub/{devices}", 2, body)

    outcomes, errors = {}, []

    def group(devices, base):
        try:
            outcomes[base] = run(devices, base)
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=group, args=g) for g in (([3, 1], 0), ([0, 2], 100))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for base, devices in ((0, [3, 1]), (100, [0, 2])):
        for x, g, program_devices in outcomes[base]:
            assert program_devices == devices, program_devices
            torch.testing.assert_close(x, torch.tensor([2 * base + 1.0, 10.0]))
            torch.testing.assert_close(g, torch.full((2, 2), 2 * base + 1.0))


def check_mismatched_shapes_raise_on_every_rank_and_the_group_goes_on():
    def body(r, backend):
        x = torch.ones(3 if r == 2 else 4, device="tpu")
        try:
            backend.allreduce([x], reduce_options(dist.ReduceOp.SUM)).wait()
            raised = None
        except RuntimeError as e:
            raised = str(e)
        y = torch.ones(4, device="tpu")
        backend.allreduce([y], reduce_options(dist.ReduceOp.SUM)).wait()
        return raised, y.cpu()

    for raised, y in make_group("mismatch", RANKS, body):
        assert raised and "Detected mismatch between collectives on ranks" in raised, raised
        assert "allreduce[in program](dtype=Float, shape=[3]" in raised, raised
        torch.testing.assert_close(y, torch.full((4,), float(RANKS)))


def check_bitwise_ops_and_host_transport_agree():
    """BAND has no in-program form (XLA:CPU's all_reduce has no bitwise
    combiner): it runs on gloo; with TORCH_TPU_DIST_TRANSPORT=host every
    collective does, with the same results."""

    def body(r, backend):
        x = torch.tensor([0b1111, 0b1010 | r], dtype=torch.int64).to("tpu")
        backend.allreduce([x], reduce_options(dist.ReduceOp.BAND)).wait()
        y = rank_values(r, torch.float32).to("tpu")
        backend.allreduce([y], reduce_options(dist.ReduceOp.SUM)).wait()
        return x.cpu(), y.cpu(), backend.program_devices

    in_program = make_group("band", RANKS, body)
    os.environ["TORCH_TPU_DIST_TRANSPORT"] = "host"
    try:
        host = make_group("host", RANKS, body)
    finally:
        del os.environ["TORCH_TPU_DIST_TRANSPORT"]
    for (x1, y1, d1), (x2, y2, d2) in zip(in_program, host):
        assert d1 == list(range(RANKS)) and d2 == [], (d1, d2)
        torch.testing.assert_close(x1, torch.tensor([0b1111, 0b1010]))
        torch.testing.assert_close(x1, x2)
        torch.testing.assert_close(y1, y2)


def check_backends_dropped_as_the_host_transport_finishes_do_not_hang():
    """A rank drops its backend as soon as its last collective's wait
    returns, while gloo's worker thread may still be releasing that
    collective's tensors, which takes the GIL. Destroying the backend joins
    that worker: dropped under the GIL, the two waited on each other forever
    (the job hung). Many short groups make that window likely to be hit."""

    def body(r, backend):
        x = torch.full((3,), float(r)).to("tpu")
        backend.allreduce([x], reduce_options(dist.ReduceOp.SUM)).wait()
        return x

    os.environ["TORCH_TPU_DIST_TRANSPORT"] = "host"
    try:
        for i in range(DROPPED_GROUPS):
            for x in make_group(f"drop{i}", RANKS, body):
                torch.testing.assert_close(x.cpu(), torch.full((3,), float(sum(range(RANKS)))))
    finally:
        del os.environ["TORCH_TPU_DIST_TRANSPORT"]


def check_programs_hold_stablehlo_collectives():
    """The programs a TPU would run: replicated, replica groups over the
    group's ranks, one channel (TORCH_TPU_DUMP_HLO holds every program)."""
    dump = os.environ["TORCH_TPU_DUMP_HLO"]
    texts = [open(os.path.join(dump, f)).read() for f in os.listdir(dump)]
    reduce = [t for t in texts if '"stablehlo.all_reduce"' in t]
    assert reduce, "no program holds stablehlo.all_reduce"
    assert any("replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>" in t for t in reduce)
    assert any("channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>" in t for t in reduce)
    for op in ("all_gather", "reduce_scatter", "all_to_all", "replica_id"):
        assert any(f'"stablehlo.{op}"' in t for t in texts), op


COMPILED_GROUP = "compiled"


def tensor_parallel_step(x, w):
    """Collectives between compute, as a tensor-parallel block has them."""
    h = torch.tanh(x @ w)
    total = funcol.all_reduce(h, "sum", COMPILED_GROUP)
    gathered = funcol.all_gather_tensor(total * 0.5, 0, COMPILED_GROUP)
    part = funcol.reduce_scatter_tensor(gathered + 1, "avg", 0, COMPILED_GROUP)
    exchanged = funcol.all_to_all_single(h, None, None, COMPILED_GROUP)
    return part.sum(0) + exchanged.mean(), gathered


def step_inputs(r, call):
    g = torch.Generator().manual_seed(100 * call + r)
    x = torch.randn(2 * RANKS, 16, generator=g)
    w = torch.randn(16, 2 * RANKS, generator=torch.Generator().manual_seed(call))
    return x, w


def expected_step(r, call):
    hs = [torch.tanh(torch.mm(*step_inputs(s, call))) for s in range(RANKS)]
    total = sum(hs)
    gathered = torch.cat([total * 0.5] * RANKS)
    part = (gathered + 1).chunk(RANKS)[r]
    exchanged = torch.cat([h.chunk(RANKS)[r] for h in hs])
    return part.sum(0) + exchanged.mean(), gathered


def compiled_group(prefix, body):
    """make_group with the ranks' ProcessGroup registered as COMPILED_GROUP
    (what functional collectives resolve), float32 matmuls at full
    precision (the references are CPU's)."""
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        return make_group(prefix, RANKS, body, group_name=COMPILED_GROUP)
    finally:
        torch.set_float32_matmul_precision(precision)


def check_compiled_step_with_collectives_replays_as_one_program():
    """torch.compile: a graph holding all_reduce, all_gather, reduce_scatter
    and all_to_all between its ops is ONE program replicated over the
    group's devices; later calls replay it, one launch per rank per call."""
    calls = 4
    barrier = threading.Barrier(RANKS)
    counts = {}

    def body(r, backend):
        compiled = torch.compile(tensor_parallel_step, backend="tpu")
        outputs = []
        for call in range(calls):
            if call == 1:  # after the first call's trace and capture
                barrier.wait()
                if r == 0:
                    counts["before"] = (torch_tpu.metrics()["programs_executed"], torch_tpu.compile.stats())
                barrier.wait()
            x, w = (t.to("tpu") for t in step_inputs(r, call))
            outputs.append(compiled(x, w))
        barrier.wait()
        if r == 0:
            counts["after"] = (torch_tpu.metrics()["programs_executed"], torch_tpu.compile.stats())
        return [(a.cpu(), b.cpu()) for a, b in outputs]

    results = compiled_group("compiled/step", body)
    for r, per_call in enumerate(results):
        for call, (got, gathered) in enumerate(per_call):
            want, want_gathered = expected_step(r, call)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(gathered, want_gathered, rtol=1e-4, atol=1e-4)
    (programs_before, stats_before), (programs_after, stats_after) = counts["before"], counts["after"]
    replays = stats_after["graph_replays"] - stats_before["graph_replays"]
    assert replays == RANKS * (calls - 1), (stats_before, stats_after)
    assert stats_after["graph_traces"] == stats_before["graph_traces"], (stats_before, stats_after)
    assert programs_after - programs_before == RANKS * (calls - 1), (programs_before, programs_after)
    # The program a TPU would run: the step's ops and its four collectives in one module.
    dump = os.environ["TORCH_TPU_DUMP_HLO"]
    texts = [open(os.path.join(dump, f)).read() for f in os.listdir(dump)]
    ops = ("dot_general", "tanh", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    whole = [t for t in texts if all(f'"stablehlo.{op}"' in t for op in ops)]
    assert whole, "no program holds the whole step"
    assert any("channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>" in t for t in whole)


def check_ranks_launching_different_programs_raise_and_the_group_goes_on():
    """A rank whose compiled step differs (its replica would not pair up with
    the others'): every rank raises before entering the plugin; a rank that
    never launches its replica makes the others raise after
    TORCH_TPU_DIST_LAUNCH_TIMEOUT; then the same step runs on all."""

    def other_step(x, w):
        return tensor_parallel_step(torch.sin(x), w)

    barrier = threading.Barrier(RANKS)

    def body(r, backend):
        compiled = torch.compile(tensor_parallel_step, backend="tpu")
        other = torch.compile(other_step, backend="tpu")
        x, w = (t.to("tpu") for t in step_inputs(r, 0))
        errors = []
        try:
            (other if r == RANKS - 1 else compiled)(x, w)
        except RuntimeError as e:
            errors.append(str(e))
        compiled(x, w)  # every rank the same: runs
        # Now the last rank stays away while the others replay.
        os.environ["TORCH_TPU_DIST_LAUNCH_TIMEOUT"] = "2"
        if r != RANKS - 1:
            try:
                compiled(x, w)
            except RuntimeError as e:
                errors.append(str(e))
        barrier.wait()
        if r == RANKS - 1:
            try:
                compiled(x, w)  # too late: the others gave up on this launch
            except RuntimeError as e:
                errors.append(str(e))
        barrier.wait()
        got, _ = compiled(x, w)
        return errors, got.cpu()

    try:
        results = compiled_group("compiled/mismatch", body)
    finally:
        os.environ.pop("TORCH_TPU_DIST_LAUNCH_TIMEOUT", None)
    for r, (errors, got) in enumerate(results):
        assert len(errors) == 2, errors
        assert "launched different programs" in errors[0], errors[0]
        assert "did not reach it" in errors[1], errors[1]
        torch.testing.assert_close(got, expected_step(r, 0)[0], rtol=1e-4, atol=1e-4)


CHECKS = [
    check_all_reduce,
    check_broadcast_moves_the_roots_bits,
    check_all_gather_and_reduce_scatter,
    check_all_to_all_single_with_equal_splits,
    check_deferred_ops_around_a_collective,
    check_subgroups_on_permuted_devices,
    check_mismatched_shapes_raise_on_every_rank_and_the_group_goes_on,
    check_bitwise_ops_and_host_transport_agree,
    check_backends_dropped_as_the_host_transport_finishes_do_not_hang,
    check_programs_hold_stablehlo_collectives,
    check_compiled_step_with_collectives_replays_as_one_program,
    check_ranks_launching_different_programs_raise_and_the_group_goes_on,
]

if __name__ == "__main__":
    assert torch.tpu.device_count() == RANKS, "run with TORCH_TPU_NUM_DEVICES=4"
    outcomes = {}
    only = os.environ.get("ONLY_CHECK")
    for check in CHECKS if only is None else [c for c in CHECKS if c.__name__ == only]:
        try:
            check()
            outcomes[check.__name__] = "ok"
        except BaseException:
            outcomes[check.__name__] = traceback.format_exc()
    print("RESULTS " + json.dumps(outcomes))
