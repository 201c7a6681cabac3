"""Every c10d collective on tpu tensors through tpu_dist, against gloo on the
same values as CPU tensors. Launched by tests/distributed/test_distributed.py with
torchrun on 2 and 4 processes."""

import os
import sys
import threading
import time
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run_checks  # noqa: E402

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])
TIMEOUT = timedelta(seconds=60)

torch.tpu.set_device(LOCAL_RANK)
DEV = torch.device("tpu", LOCAL_RANK)
dist.init_process_group("tpu_dist", timeout=TIMEOUT)
GLOO = dist.new_group(backend="gloo")  # the reference: the same collective on CPU tensors


def values(shape, dtype=torch.float32, seed=0):
    """The same pseudo-random values on tpu and CPU; different on every rank."""
    g = torch.Generator().manual_seed(1000 * seed + RANK)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def same(tpu, cpu):
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=0, atol=0)


def close(tpu, cpu):
    """For a reference that sums in another order (another gloo algorithm)."""
    torch.testing.assert_close(tpu.cpu(), cpu)


@check
def device_is_this_ranks():
    assert torch.tpu.current_device() == LOCAL_RANK
    assert torch.tpu.device_count() == int(os.environ["LOCAL_WORLD_SIZE"])
    assert dist.get_backend() == "tpu_dist"
    assert dist.get_world_size() == WORLD and dist.get_rank() == RANK


@check
def all_reduce_sum_min_max_product():
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):
            c = values((5, 3), dtype)
            t = c.to(DEV)
            dist.all_reduce(t, op=op)
            dist.all_reduce(c, op=op, group=GLOO)
            same(t, c)


@check
def all_reduce_avg_and_premul_sum():
    # gloo has neither: the reference is SUM divided (or premultiplied) on CPU.
    c = values((7,))
    t = c.to(DEV)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.all_reduce(c, group=GLOO)
    torch.testing.assert_close(t.cpu(), c / WORLD)
    c = values((7,), seed=1)
    t = c.to(DEV)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    dist.all_reduce(c, group=GLOO)
    torch.testing.assert_close(t.cpu(), c * 0.5)
    c = values((6,), torch.int32, seed=2)
    t = c.to(DEV)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.all_reduce(c, group=GLOO)
    same(t, torch.div(c, WORLD, rounding_mode="trunc"))


@check
def all_reduce_writes_into_views_in_place():
    base = torch.zeros(4, 6, device=DEV)
    view = base[1:3, 2:5]  # not contiguous: gloo's own contiguity check applies
    row = base[2]
    row.fill_(float(RANK + 1))
    dist.all_reduce(row)
    expected = torch.zeros(4, 6)
    expected[2] = sum(range(1, WORLD + 1))
    same(base, expected)
    assert view.cpu().sum().item() == 3 * sum(range(1, WORLD + 1))


@check
def collective_sees_earlier_ops_and_later_ops_see_it():
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            t = torch.ones(8, device=DEV)
            t.mul_(RANK + 2).add_(1)  # pending device work on the input
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            u = t * 2  # must read the reduced value
            expected = sum(2 * (r + 2) + 2 for r in range(WORLD)) * torch.ones(8)
            same(u, expected)


@check
def broadcast_and_reduce():
    for src in range(WORLD):
        c = values((3, 4), seed=src)
        t = c.to(DEV)
        dist.broadcast(t, src=src)
        dist.broadcast(c, src=src, group=GLOO)
        same(t, c)
    c = values((5,), seed=9)
    t = c.to(DEV)
    dist.reduce(t, dst=WORLD - 1, op=dist.ReduceOp.MAX)
    dist.reduce(c, dst=WORLD - 1, op=dist.ReduceOp.MAX, group=GLOO)
    if RANK == WORLD - 1:
        same(t, c)


@check
def all_gather_and_all_gather_into_tensor():
    c = values((2, 3))
    outs_c = [torch.empty(2, 3) for _ in range(WORLD)]
    outs_t = [torch.empty(2, 3, device=DEV) for _ in range(WORLD)]
    dist.all_gather(outs_t, c.to(DEV))
    dist.all_gather(outs_c, c, group=GLOO)
    for a, b in zip(outs_t, outs_c):
        same(a, b)
    big_t = torch.empty(WORLD * 2, 3, device=DEV)
    big_c = torch.empty(WORLD * 2, 3)
    dist.all_gather_into_tensor(big_t, c.to(DEV))
    dist.all_gather_into_tensor(big_c, c, group=GLOO)
    same(big_t, big_c)


@check
def reduce_scatter_and_reduce_scatter_tensor():
    c_in = [values((4,), seed=s) for s in range(WORLD)]
    t_out = torch.empty(4, device=DEV)
    dist.reduce_scatter(t_out, [x.to(DEV) for x in c_in])
    expected = torch.cat(c_in)
    dist.all_reduce(expected, group=GLOO)
    close(t_out, expected[RANK * 4 : (RANK + 1) * 4])
    c = values((WORLD * 3,), seed=5)
    t_out = torch.empty(3, device=DEV)
    dist.reduce_scatter_tensor(t_out, c.to(DEV), op=dist.ReduceOp.AVG)
    full = c.clone()
    dist.all_reduce(full, group=GLOO)
    torch.testing.assert_close(t_out.cpu(), full[RANK * 3 : (RANK + 1) * 3] / WORLD)


@check
def all_to_all_single_with_uneven_splits():
    # rank r sends (r + j + 1) rows to rank j
    in_splits = [RANK + j + 1 for j in range(WORLD)]
    out_splits = [j + RANK + 1 for j in range(WORLD)]
    c = values((sum(in_splits), 2))
    c_out = torch.empty(sum(out_splits), 2)
    t_out = torch.empty(sum(out_splits), 2, device=DEV)
    dist.all_to_all_single(t_out, c.to(DEV), out_splits, in_splits)
    dist.all_to_all_single(c_out, c, out_splits, in_splits, group=GLOO)
    same(t_out, c_out)
    # list form, uneven (NCCL allows it, gloo does not): rank r sends j + 1 rows to rank j
    c_ins = [values((j + 1, 3), seed=j) for j in range(WORLD)]
    t_outs = [torch.empty(RANK + 1, 3, device=DEV) for _ in range(WORLD)]
    dist.all_to_all(t_outs, [x.to(DEV) for x in c_ins])
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, c_ins)
    for src in range(WORLD):
        same(t_outs[src], everyone[src][RANK])


@check
def gather_and_scatter():
    c = values((3,))
    root = WORLD - 1
    t_list = [torch.empty(3, device=DEV) for _ in range(WORLD)] if RANK == root else None
    c_list = [torch.empty(3) for _ in range(WORLD)] if RANK == root else None
    dist.gather(c.to(DEV), t_list, dst=root)
    dist.gather(c, c_list, dst=root, group=GLOO)
    if RANK == root:
        for a, b in zip(t_list, c_list):
            same(a, b)
    chunks = [values((2, 2), seed=s) for s in range(WORLD)]
    t_out = torch.empty(2, 2, device=DEV)
    c_out = torch.empty(2, 2)
    dist.scatter(t_out, [x.to(DEV) for x in chunks] if RANK == 0 else None, src=0)
    dist.scatter(c_out, chunks if RANK == 0 else None, src=0, group=GLOO)
    same(t_out, c_out)


@check
def send_recv_and_batch_isend_irecv():
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    if RANK % 2 == 0:
        dist.send(torch.full((3,), float(RANK), device=DEV), dst=nxt)
        t = torch.empty(3, device=DEV)
        dist.recv(t, src=prv)
    else:
        t = torch.empty(3, device=DEV)
        dist.recv(t, src=prv)
        dist.send(torch.full((3,), float(RANK), device=DEV), dst=nxt)
    same(t, torch.full((3,), float(prv)))
    recv_into = torch.zeros(2, 4, device=DEV)
    ops = [
        dist.P2POp(dist.isend, torch.full((4,), RANK + 0.5, device=DEV), nxt),
        dist.P2POp(dist.irecv, recv_into[1], prv),
    ]  # receives into a view
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    expected = torch.zeros(2, 4)
    expected[1] = prv + 0.5
    same(recv_into, expected)


@check
def coalesced_all_reduce_and_all_gather():
    cs = [values((3,), seed=s) for s in range(3)]
    ts = [x.to(DEV) for x in cs]
    dist.all_reduce_coalesced(ts)
    for c in cs:
        dist.all_reduce(c, group=GLOO)
    for t, c in zip(ts, cs):
        close(t, c)
    with dist._coalescing_manager(device=DEV, async_ops=True) as cm:
        outs = [torch.empty(WORLD * 2, device=DEV) for _ in range(2)]
        for i, out in enumerate(outs):
            dist.all_gather_into_tensor(out, torch.full((2,), float(10 * i + RANK), device=DEV))
    cm.wait()
    for i, out in enumerate(outs):
        same(out, torch.tensor([float(10 * i + r) for r in range(WORLD) for _ in range(2)]))


@check
def barrier_and_object_collectives():
    dist.barrier()
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": RANK})
    assert objs == [{"rank": r} for r in range(WORLD)]
    cpu = torch.tensor([float(RANK)])
    dist.all_reduce(cpu)  # a CPU tensor under tpu_dist goes straight to gloo
    assert cpu.item() == sum(range(WORLD))


@check
def subgroups():
    evens = list(range(0, WORLD, 2))
    group = dist.new_group(evens)
    if RANK in evens:
        t = torch.tensor([float(RANK)], device=DEV)
        dist.all_reduce(t, group=group)
        assert t.item() == sum(evens)
    if WORLD % 2 == 0:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("tpu", (2, WORLD // 2), mesh_dim_names=("dp", "tp"))
        for dim in ("dp", "tp"):
            g = mesh.get_group(dim)
            t = torch.tensor([float(RANK)], device=DEV)
            dist.all_reduce(t, group=g)
            members = dist.get_process_group_ranks(g)
            assert t.item() == sum(members), (dim, members, t.item())


@check
def mismatched_shapes_raise_on_every_rank():
    t = torch.ones(4 if RANK == 0 else 3, device=DEV)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "Detected mismatch between collectives" in str(e) and "shape=[4]" in str(e) and "shape=[3]" in str(e), e
    else:
        raise AssertionError("no error")
    t = torch.ones(2, device=DEV, dtype=torch.float32 if RANK == 0 else torch.int64)
    try:
        dist.broadcast(t, src=0)
    except RuntimeError as e:
        assert "Detected mismatch between collectives" in str(e) and "Float" in str(e) and "Long" in str(e), e
    else:
        raise AssertionError("no error")
    t = torch.ones(2, device=DEV)
    dist.all_reduce(t)  # the group still works
    same(t, torch.full((2,), float(WORLD)))


@check
def bad_input_raises_what_gloo_raises():
    errors = []
    for device, group in ((DEV, None), ("cpu", GLOO)):
        try:  # the output is one element short
            dist.all_gather_into_tensor(
                torch.empty(WORLD * 3 - 1, device=device), torch.ones(3, device=device), group=group
            )
        except Exception as e:  # noqa: BLE001
            errors.append((type(e), str(e).split("\n")[0]))
    assert len(errors) == 2 and errors[0] == errors[1], errors


@check
def functional_collectives_eager():
    import torch.distributed._functional_collectives as funcol

    c = values((4,))
    t = funcol.all_reduce(c.to(DEV), "sum", dist.group.WORLD)
    t = funcol.wait_tensor(t)
    dist.all_reduce(c, group=GLOO)
    same(t, c)
    g = funcol.all_gather_tensor(torch.full((2,), float(RANK), device=DEV), 0, dist.group.WORLD)
    same(funcol.wait_tensor(g), torch.tensor([float(r) for r in range(WORLD) for _ in range(2)]))
    rs = funcol.reduce_scatter_tensor(torch.ones(WORLD * 2, device=DEV), "sum", 0, dist.group.WORLD)
    same(funcol.wait_tensor(rs), torch.full((2,), float(WORLD)))


@check
def async_collectives_complete_on_wait_while_the_caller_issues_device_work():
    # async_op=True hands back a Work still running on gloo; its results are
    # written into the tpu tensors when gloo is done, and wait() (or the
    # future, as DDP's comm hooks chain on it) returns after that.
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            x = torch.full((1 << 14,), float(RANK + 1), device=DEV)
            work = dist.all_reduce(x, async_op=True)
            busy = torch.ones(128, 128, device=DEV) @ torch.ones(128, 128, device=DEV)  # issued meanwhile
            work.wait()
            same(x, torch.full((1 << 14,), float(sum(range(1, WORLD + 1)))))
            same(busy, torch.full((128, 128), 128.0))
            z = torch.full((8,), float(RANK), device=DEV)
            fut = dist.all_reduce(z, async_op=True).get_future().then(lambda f: f.value()[0].div_(WORLD))
            same(fut.wait(), torch.full((8,), sum(range(WORLD)) / WORLD))
            same(z, torch.full((8,), sum(range(WORLD)) / WORLD))
            out = torch.empty(2, device=DEV)
            src = torch.arange(2.0 * WORLD, device=DEV) * (RANK + 1)
            w = dist.reduce_scatter_tensor(out, src, op=dist.ReduceOp.AVG, async_op=True)
            g = torch.empty(WORLD, device=DEV)
            w2 = dist.all_gather_into_tensor(g, torch.tensor([float(RANK)], device=DEV), async_op=True)
            w.wait()
            w2.wait()
            scale = sum(r + 1 for r in range(WORLD)) / WORLD
            same(out, torch.arange(2.0 * WORLD)[2 * RANK : 2 * RANK + 2] * scale)
            same(g, torch.arange(float(WORLD)))


@check
def collectives_under_torch_compile_replay_the_programs_between_them():
    # A graph holding collectives runs as the runs of ops between them, each
    # captured once and replayed as one program, with the collectives
    # called on the process group in between (torch_tpu/compile.py,
    # _split_at_collectives): after the first call, no graph traces again.
    import torch.distributed._functional_collectives as funcol

    from torch_tpu.compile import reset_stats, stats

    def functional(x):
        return funcol.wait_tensor(funcol.all_reduce(x * 2, "sum", dist.group.WORLD)) + 1

    def in_place(x):
        y = x * 2
        dist.all_reduce(y)
        return y + 1

    for fn in (functional, in_place):
        reset_stats()
        compiled = torch.compile(fn, backend="tpu")
        for i in range(4):
            x = torch.full((4,), float(RANK + 1 + i), device=DEV)
            same(compiled(x), torch.full((4,), 2.0 * sum(r + 1 + i for r in range(WORLD)) + 1))
        # Two programs (before and after the collective), traced once each.
        assert stats()["graph_traces"] == 2 and stats()["graph_replays"] == 6, (fn.__name__, stats())

    def layer(x, w):
        h = (x @ w).relu()
        h = funcol.all_reduce(h, "avg", dist.group.WORLD)
        g = funcol.all_gather_tensor(h.sum(0, keepdim=True), 0, dist.group.WORLD)
        return (h * 3).sum() + g.sum()

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        reset_stats()
        compiled = torch.compile(layer, backend="tpu")
        w = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))
        for i in range(3):
            xs = [torch.randn(4, 8, generator=torch.Generator().manual_seed(10 * r + i)) for r in range(WORLD)]
            out = compiled(xs[RANK].to(DEV), w.to(DEV))
            h = sum((x @ w).relu() for x in xs) / WORLD
            torch.testing.assert_close(out.cpu(), (h * 3).sum() + WORLD * h.sum(), rtol=1e-5, atol=1e-4)
        assert stats()["graph_traces"] == 3 and stats()["graph_replays"] == 6, stats()
    finally:
        torch.set_float32_matmul_precision(previous)


@check
def reinit_with_device_map_string_then_device_id_then_alias():
    global GLOO
    dist.destroy_process_group()
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", timeout=TIMEOUT)
    t = torch.ones(3, device=DEV)
    c = torch.ones(3)
    dist.all_reduce(t)
    dist.all_reduce(c)
    same(t, c)
    assert dist.get_backend() == "cpu:gloo,tpu:tpu_dist", dist.get_backend()
    dist.destroy_process_group()
    dist.init_process_group(device_id=torch.device("tpu", LOCAL_RANK), timeout=TIMEOUT)
    t = torch.ones(3, device=DEV)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(WORLD)))
    assert dist.get_backend() == "tpu_dist", dist.get_backend()
    dist.destroy_process_group()
    dist.init_process_group("tpu", timeout=TIMEOUT)
    t = torch.ones(3, device=DEV)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(WORLD)))


@check
def split_group_makes_subgroups_that_reduce_their_own_ranks():
    # dist.split_group needs a default group bound to a device, as with NCCL;
    # the default group here was destroyed and created again, which gloo's
    # own split cannot take (tpu_dist makes each new group afresh).
    dist.destroy_process_group()
    dist.init_process_group("tpu_dist", device_id=DEV, timeout=TIMEOUT)
    pairs = [[r, r + 1] for r in range(0, WORLD, 2)]
    group = dist.split_group(split_ranks=pairs)
    mine = pairs[RANK // 2]
    assert dist.get_process_group_ranks(group) == mine, dist.get_process_group_ranks(group)
    t = torch.full((3,), float(RANK + 1), device=DEV)
    dist.all_reduce(t, group=group)
    same(t, torch.full((3,), float(sum(r + 1 for r in mine))))
    g = torch.empty(2, device=DEV)
    dist.all_gather_into_tensor(g, torch.tensor([float(RANK)], device=DEV), group=group)
    same(g, torch.tensor([float(r) for r in mine]))
    # The parent splits again, every rank in one group, and still reduces over all.
    everyone = dist.split_group(split_ranks=[list(range(WORLD))])
    t = torch.full((2,), float(RANK), device=DEV)
    dist.all_reduce(t, group=everyone)
    same(t, torch.full((2,), float(sum(range(WORLD)))))
    dist.all_reduce(t)
    same(t, torch.full((2,), float(WORLD * sum(range(WORLD)))))
    dist.destroy_process_group(group)
    dist.destroy_process_group(everyone)


@check
def transport_threads_never_release_a_tensor_python_holds():
    # A transport worker that dropped the last reference to a tensor with a
    # Python object took the GIL; at interpreter exit Python ends such a
    # thread inside a destructor, and the rank aborted ("terminate called
    # without an active exception"). The chained callback keeps the worker in
    # its completion callback while this thread drops every reference it
    # has; the tensor must then be released here, at the next collective.
    # Rank 0 is first into the collective, so it attaches the callback
    # before the collective can complete; on a rank whose collective was
    # already done by then, the callback runs here at once, and the tensor
    # goes with this thread's last reference or at the next collective.
    this_thread = threading.get_ident()
    released_on, callback_on = [], []
    t = torch.ones(4, device=DEV)
    weakref.finalize(t, lambda: released_on.append(threading.get_ident()))
    if RANK != 0:
        time.sleep(1.0)
    work = dist.all_reduce(t, async_op=True)
    work.get_future().then(lambda f: (callback_on.append(threading.get_ident()), time.sleep(0.5)))
    work.wait()
    del work, t
    time.sleep(1.0)  # the worker has left the completion callback
    if RANK == 0:
        assert callback_on and callback_on != [this_thread], "rank 0's collective completed before it was chained on"
    if callback_on == [this_thread]:  # the worker may have handed over already, and this thread dropped them
        assert released_on in ([], [this_thread]), released_on
    else:
        assert not released_on, f"released early, on thread {released_on} (this one: {this_thread})"
    dist.all_reduce(torch.ones(1, device=DEV))
    assert released_on == [this_thread], released_on


run_checks(RANK)
dist.destroy_process_group()
