"""Strict mode's op cache (csrc/exec/op_cache.h): an op called again with a
signature it was called with before replays its captured program. Every
result here is checked against CPU PyTorch, across the changes a replay must
notice: Python numbers, CPU scalars, aliasing, views, storage sizes, RNG
state, matmul precision."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


@pytest.fixture(autouse=True)
def strict():
    # From an empty cache: it starts over by itself when full (1024
    # captures), which must not happen halfway through a test that counts.
    torch_tpu._C._clear_op_cache()
    with torch_tpu.eager_mode("strict"):
        yield


def replays():
    torch_tpu.sync()
    return torch_tpu.metrics()["op_cache_replays"]


def test_a_repeated_op_replays_and_matches_cpu():
    x, y = torch.randn(13, 7), torch.randn(13, 7)
    tx, ty = x.to("tpu"), y.to("tpu")
    before = replays()
    outs = [torch.atan2(tx, ty) for _ in range(4)]
    assert replays() - before >= 2  # the second call captures, later ones replay
    for out in outs:
        torch.testing.assert_close(out.cpu(), torch.atan2(x, y))


def test_python_numbers_are_part_of_the_signature():
    x = torch.randn(6, 5)
    tx = x.to("tpu")
    for _ in range(3):
        for value, alpha in ((1.5, 1), (2.5, 1), (1.5, 3), (-4, 2)):
            torch.testing.assert_close(torch.add(tx, value, alpha=alpha).cpu(), torch.add(x, value, alpha=alpha))
            torch.testing.assert_close(torch.pow(tx, value).cpu(), torch.pow(x, value), equal_nan=True)
            torch.testing.assert_close((tx * value).cpu(), x * value)  # a wrapped number: mul.Tensor
            torch.testing.assert_close((value - tx).cpu(), value - x)


def test_cpu_scalar_tensors_are_read_on_every_replay():
    x = torch.randn(4, 9)
    tx = x.to("tpu")
    before = replays()
    for value in (2.0, -3.0, 0.5, 7.0, 2.0):
        scale = torch.tensor(value)
        torch.testing.assert_close((tx * scale).cpu(), x * scale)
    assert replays() > before


def test_in_place_ops_update_and_return_the_same_tensor():
    x, y = torch.randn(3, 11), torch.randn(3, 11)
    tx, ty = x.clone().to("tpu"), y.to("tpu")
    for _ in range(5):
        assert tx.add_(ty, alpha=0.5) is tx
        x.add_(y, alpha=0.5)
    torch.testing.assert_close(tx.cpu(), x)


def test_aliasing_between_arguments_is_part_of_the_signature():
    x, y = torch.randn(8, 3), torch.randn(8, 3)
    tx, ty = x.clone().to("tpu"), y.to("tpu")
    for _ in range(3):
        tx.mul_(tx)  # reads and writes one storage
        x.mul_(x)
        tx.mul_(ty)
        x.mul_(y)
        tx.clamp_(-5, 5)
        x.clamp_(-5, 5)
    torch.testing.assert_close(tx.cpu(), x)


def test_a_foreach_op_aliased_past_its_first_sixteen_storages_replays_like_cpu():
    # A foreach op over many tensors: a signature notes the first position
    # of each storage in a short list for the first sixteen and a hash map
    # past them, so this call takes the hash map. The same call with one
    # pair of its 40 tensors aliased late in the list (its program reads
    # there what it wrote earlier in the list) must compute what CPU does,
    # in Strict's op cache and in a replayed DeferAndFuse step. The result
    # is what this checks: a replay's storage mapping and its buffer binding
    # see the aliasing too, so a signature that missed it alone would pass.
    n = 20
    xs = [torch.randn(5) for _ in range(n)]
    ys = [torch.randn(5) for _ in range(n)]
    txs = [x.clone().to("tpu") for x in xs]
    tys = [y.to("tpu") for y in ys]
    replayed = {}
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            torch_tpu.reset_metrics()
            for _ in range(4):
                torch._foreach_mul_(txs, tys)
                torch._foreach_mul_(xs, ys)
                # position 18 multiplies by position 2, updated just before (as on CPU)
                torch._foreach_mul_(txs, tys[:18] + [txs[2]] + tys[19:])
                torch._foreach_mul_(xs, ys[:18] + [xs[2]] + ys[19:])
                torch._foreach_clamp_min_(txs, -3.0)
                torch._foreach_clamp_max_(txs, 3.0)
                torch._foreach_clamp_min_(xs, -3.0)
                torch._foreach_clamp_max_(xs, 3.0)
                torch_tpu.sync()  # DeferAndFuse: a step, replayed from the second
            metrics = torch_tpu.metrics()
            replayed[mode] = metrics["op_cache_replays"] + metrics["step_replays"]
    for tx, x in zip(txs, xs):
        torch.testing.assert_close(tx.cpu(), x)
    assert all(replayed.values()), replayed


def test_views_strides_offsets_and_storage_sizes():
    base = torch.randn(6, 10)
    tbase = base.to("tpu")
    same_shape = torch.randn(10, 6)
    tsame = same_shape.to("tpu")
    bigger = torch.randn(80)
    tbigger = bigger.to("tpu")
    for _ in range(3):
        # (10, 6) transposed view, (10, 6) contiguous tensor, and a (10, 6) view at an offset in a larger storage
        torch.testing.assert_close(torch.sin(tbase.t()).cpu(), torch.sin(base.t()))
        torch.testing.assert_close(torch.sin(tsame).cpu(), torch.sin(same_shape))
        torch.testing.assert_close(torch.sin(tbigger[20:].view(10, 6)).cpu(), torch.sin(bigger[20:].view(10, 6)))
        torch.testing.assert_close(torch.sin(tbigger[:60].view(10, 6)).cpu(), torch.sin(bigger[:60].view(10, 6)))


def test_conjugated_views_never_replay_a_plain_tensors_program():
    # mm reads the conjugate bit itself (PyTorch's Conjugate fallback lets it
    # through), and x.mH has x.mT's strides: the bit is part of the signature.
    x = torch.randn(4, 4, dtype=torch.complex64)
    y = torch.randn(4, 4, dtype=torch.complex64)
    tx, ty = x.to("tpu"), y.to("tpu")
    for _ in range(3):
        torch.testing.assert_close((tx.mT @ ty).cpu(), x.mT @ y)
    before = replays()
    torch.testing.assert_close((tx.mH @ ty).cpu(), x.mH @ y)
    torch.testing.assert_close((tx.mH @ ty).cpu(), x.mH @ y)
    torch.testing.assert_close((tx.mH @ ty).cpu(), x.mH @ y)  # its own program, replayed
    assert replays() == before + 1
    torch.testing.assert_close((tx.mT @ ty).cpu(), x.mT @ y)


def test_in_place_writes_into_views():
    base = torch.randn(5, 4)
    tbase = base.clone().to("tpu")
    for _ in range(4):
        tbase[:, 1].mul_(2)
        base[:, 1].mul_(2)
        tbase[2].add_(1)
        base[2].add_(1)
    torch.testing.assert_close(tbase.cpu(), base)


def test_random_ops_draw_new_numbers_on_every_replay_and_follow_the_seed():
    def draws():
        return [torch.rand(17, device="tpu").cpu() for _ in range(4)] + [
            F.dropout(torch.ones(64, device="tpu"), 0.5, training=True).cpu() for _ in range(3)
        ]

    torch.manual_seed(11)
    first = draws()
    torch.manual_seed(11)
    before = replays()
    second = draws()
    assert replays() > before
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b)
    assert not torch.equal(first[2], first[3])
    assert not torch.equal(first[5], first[6])


def test_matmul_precision_is_part_of_the_signature():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    ta, tb = a.to("tpu"), b.to("tpu")
    exact = a @ b
    highest = [(ta @ tb).cpu() for _ in range(3)]
    try:
        torch.set_float32_matmul_precision("medium")
        medium = [(ta @ tb).cpu() for _ in range(3)]
    finally:
        torch.set_float32_matmul_precision("highest")
    again = (ta @ tb).cpu()
    for h in highest + [again]:
        torch.testing.assert_close(h, exact)
    for m in medium:  # bf16 products: close to the exact result, but not it
        torch.testing.assert_close(m, exact, atol=0.25, rtol=0.05)
        assert (m - exact).abs().max() > 1e-3


def test_foreach_ops_and_list_returns():
    xs = [torch.randn(3), torch.randn(2, 2), torch.randn(5)]
    ys = [torch.randn(3), torch.randn(2, 2), torch.randn(5)]
    txs, tys = [x.clone().to("tpu") for x in xs], [y.to("tpu") for y in ys]
    for _ in range(3):
        torch._foreach_mul_(txs, 0.9)
        torch._foreach_mul_(xs, 0.9)
        torch._foreach_add_(txs, tys, alpha=0.1)
        torch._foreach_add_(xs, ys, alpha=0.1)
        sums = torch._foreach_add(txs, tys)
        for s, x, y in zip(sums, xs, ys):
            torch.testing.assert_close(s.cpu(), x + y)
    for t, x in zip(txs, xs):
        torch.testing.assert_close(t.cpu(), x)


def test_ops_with_several_returns_and_written_running_stats():
    x = torch.randn(4, 6, 5)
    tx = x.to("tpu")
    bn = torch.nn.BatchNorm1d(6)
    tbn = torch.nn.BatchNorm1d(6).to("tpu")
    for _ in range(3):
        values, indices = torch.max(tx, dim=2)
        cv, ci = torch.max(x, dim=2)
        torch.testing.assert_close(values.cpu(), cv)
        torch.testing.assert_close(indices.cpu(), ci)
        torch.testing.assert_close(tbn(tx).cpu(), bn(x))
    torch.testing.assert_close(tbn.running_mean.cpu(), bn.running_mean)
    torch.testing.assert_close(tbn.running_var.cpu(), bn.running_var)


def test_a_call_that_raises_raises_every_time():
    a, b = torch.randn(3, 4, device="tpu"), torch.randn(5, 6, device="tpu")
    for _ in range(3):
        with pytest.raises(RuntimeError, match="reduction dim|cannot be multiplied"):
            torch.mm(a, b)


def test_other_modes_and_the_switch_do_not_use_it():
    x = torch.randn(7, 3, device="tpu")
    for mode in ("debug", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            before = replays()
            for _ in range(3):
                torch.cos(x)
            assert replays() == before
    code = (
        "import torch, torch_tpu\n"
        "x = torch.randn(7, 3, device='tpu')\n"
        "for _ in range(4): y = torch.cos(x)\n"
        "torch_tpu.sync()\n"
        "m = torch_tpu.metrics()\n"
        "print(m['op_cache_replays'], m['op_cache_captures'])\n"
    )
    env = dict(os.environ, TORCH_TPU_OP_CACHE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0"]


def test_undefined_tensor_returns_stay_tensors():
    # weight needs no gradient: native_layer_norm_backward's output_mask is
    # (True, False, False) and two of its returns are undefined tensors,
    # which autograd requires as Tensors, not None.
    x, w = torch.randn(4, 8), torch.randn(8)
    tw = w.to("tpu")
    before = replays()
    for _ in range(3):
        tx = x.to("tpu").requires_grad_()
        F.layer_norm(tx, (8,), tw).sum().backward()
        cx = x.clone().requires_grad_()
        F.layer_norm(cx, (8,), w).sum().backward()
        torch.testing.assert_close(tx.grad.cpu(), cx.grad)
    assert replays() > before


def test_ops_whose_capture_is_refused_keep_running_normally():
    # The fused attention op also returns ints (max_q, max_k), which a capture
    # refuses; every call still computes, as the first one did.
    q, k, v = (torch.randn(2, 3, 8, 4) for _ in range(3))
    tq, tk, tv = q.to("tpu"), k.to("tpu"), v.to("tpu")
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for _ in range(4):
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        torch.testing.assert_close(out.cpu(), expected)


def captures():
    torch_tpu.sync()
    return torch_tpu.metrics()["op_cache_captures"]


def test_changing_floats_of_arithmetic_ops_replay_one_program():
    # An optimizer's per-step numbers (bias corrections, schedules) reach
    # these ops as Python floats; their programs take them as inputs.
    xs, ys, zs = ([torch.randn(5, 3), torch.randn(7)] for _ in range(3))
    zs = [z.abs() + 1 for z in zs]
    txs, tys, tzs = ([t.clone().to("tpu") for t in ts] for ts in (xs, ys, zs))
    counts = []
    for step in range(8):
        a, m, s, w = 0.3 + 0.01 * step, 1.1 + 0.02 * step, -0.05 * (step + 1), 0.21 + 0.05 * step
        for x, y, tx, ty in zip(xs, ys, txs, tys):
            x.add_(y, alpha=a)
            tx.add_(ty, alpha=a)
            x.lerp_(y, w)
            tx.lerp_(ty, w)
        torch._foreach_mul_(xs, m)
        torch._foreach_mul_(txs, m)
        xs[0].div_(m)  # a Python number the dispatcher wraps (div_.Tensor)
        txs[0].div_(m)
        torch._foreach_addcdiv_(xs, ys, zs, [s] * len(xs))
        torch._foreach_addcdiv_(txs, tys, tzs, [s] * len(txs))
        for x, tx in zip(xs, txs):
            torch.testing.assert_close(tx.cpu(), x)
        counts.append((captures(), replays()))
    assert counts[-1][0] == counts[2][0]  # nothing captured after the second step
    assert counts[-1][1] - counts[2][1] == 5 * 7  # every op of the last five steps replayed


def test_numbers_that_shared_a_program_input_may_differ_later():
    xs = [torch.randn(4), torch.randn(2, 3)]
    txs = [x.to("tpu") for x in xs]
    for scalars in ([0.3, 0.3], [0.3, 0.3], [0.3, 0.7], [0.7, 0.3], [0.2, 0.2], [0.4, 0.9]):
        for out, x, s in zip(torch._foreach_add(txs, scalars), xs, scalars):
            torch.testing.assert_close(out.cpu(), x + s)


def test_special_numbers_replay_a_program_made_for_others_and_give_cpus_results():
    # 0, 1, -1 and infinities are constants of a program lowered for them,
    # yet a program that takes the number as an input computes the same with
    # them (x + y * 0 is NaN where y is), so it replays for them too.
    x, y = torch.randn(6), torch.randn(6)
    y[2] = float("nan")
    x[3] = -0.0
    tx, ty = x.to("tpu"), y.to("tpu")
    for k, alpha in enumerate((0.3, 0.3, 0.3, 1.0, 0.0, -1.0, 2.0, 0.5, float("inf"), float("-inf"), -0.0, 0.3)):
        if k == 3:
            captured = captures()
        for _ in range(2):  # a signature is captured the second time it is seen
            got = torch.add(tx, ty, alpha=alpha).cpu()
            torch.testing.assert_close(got, torch.add(x, y, alpha=alpha), equal_nan=True)
            (out,) = torch._foreach_mul([tx], alpha)
            torch.testing.assert_close(out.cpu(), x * alpha, equal_nan=True)
    assert captures() == captured


def test_floats_a_program_bakes_in_still_get_their_own_program():
    # fill_ of an integer tensor converts the float on the host: a constant
    # of the program, so another float needs another program.
    t = torch.zeros(5, dtype=torch.int32, device="tpu")
    for value, want in ((2.7, 2), (2.7, 2), (2.7, 2), (3.9, 3), (-1.5, -1), (3.9, 3), (2.7, 2)):
        t.fill_(value)
        assert t.cpu().tolist() == [want] * 5


def test_eager_foreach_adamw_replays_every_step_and_matches_cpu():
    torch.manual_seed(0)
    params = [torch.randn(8, 4), torch.randn(4), torch.randn(3, 3)]
    grads = [[torch.randn_like(p) for p in params] for _ in range(6)]
    runs = {}
    for device in ("cpu", "tpu"):
        ps = [torch.nn.Parameter(p.clone().to(device)) for p in params]
        opt = torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True)
        counts = []
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = g.to(device)
            opt.step()
            if device == "tpu":
                counts.append((captures(), replays()))
        runs[device] = ([p.detach().cpu() for p in ps], counts)
    for got, want in zip(runs["tpu"][0], runs["cpu"][0]):
        torch.testing.assert_close(got, want)
    counts = runs["tpu"][1]
    assert counts[-1][0] == counts[2][0]  # the bias corrections change every step; no new captures
    assert counts[-1][1] > counts[2][1]


def test_checks_that_read_values_are_not_skipped_by_a_replay():
    # multinomial checks its probabilities on the host; a replay of an
    # earlier valid call's program must not skip that.
    p = torch.ones(4, device="tpu")
    for _ in range(3):
        torch.multinomial(p, 2)
    with pytest.raises(RuntimeError, match="probability tensor contains either `inf`, `nan` or element < 0"):
        torch.multinomial(-p, 2)


@pytest.mark.parametrize("numel", [7, 64 * 1024])  # below and past the size replays donate from
def test_a_chain_of_in_place_replays_matches_cpu_whether_or_not_it_donates(numel):
    x, y = torch.randn(numel), torch.randn(numel)
    tx, ty = x.clone().to("tpu"), y.to("tpu")
    view = tx[1:5]  # a view of the updated storage sees every update
    before = replays()
    for _ in range(6):
        assert tx.mul_(0.5).add_(ty) is tx
        x.mul_(0.5).add_(y)
    assert replays() - before >= 8
    torch.testing.assert_close(tx.cpu(), x)
    torch.testing.assert_close(view.cpu(), x[1:5])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_a_changing_python_float_is_never_a_stale_constant(dtype):
    x = torch.randn(4, 5).to(dtype)
    tx = x.to("tpu")
    # A float16 or bfloat16 add rounds the number to the tensor's dtype first
    # (CPU adds in float32): up to one ulp of the result, far below the 1/3 a
    # stale number would be off.
    ulp = {torch.float16: 4e-3, torch.bfloat16: 3.2e-2}.get(dtype)
    tol = {"rtol": ulp, "atol": ulp} if ulp else {}
    for k in range(6):
        s = 1.0 + k / 3
        torch.testing.assert_close((tx * s).cpu(), x * s)
        torch.testing.assert_close((tx + s).cpu(), x + s, **tol)


def test_replayed_results_have_the_shapes_strides_and_storages_of_cpu():
    # A replay allocates each fresh result in its output's own shape; results
    # sharing one storage (views a multi-output op returns) keep sharing it.
    x = torch.randn(6, 4)
    tx = x.to("tpu")
    for _ in range(4):
        out = tx.t() * 2  # CPU keeps the input's (transposed) strides
        ref = x.t() * 2
        assert out.shape == ref.shape and out.stride() == ref.stride()
        torch.testing.assert_close(out.cpu(), ref)
        a, b = torch.split(tx * 3, 2, dim=1)
        assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        torch.testing.assert_close(torch.cat([a, b], 1).cpu(), x * 3)


def test_a_replay_misses_when_shapes_dtypes_or_strides_change():
    for x in [torch.randn(3, 4), torch.randn(5, 2), torch.randn(4, 3).t(), torch.randn(3, 4).double()]:
        y = torch.randn(x.shape).to(x.dtype)
        tx, ty = x.to("tpu"), y.to("tpu")
        if not x.is_contiguous():
            tx = x.t().contiguous().to("tpu").t()
        for _ in range(3):
            torch.testing.assert_close((tx + ty).cpu(), x + y)
