"""In-place scatters (index_copy_, index_put_, scatter_, scatter_add_,
index_add_) update their tensor's storage in place: the program scatters
the updated elements into the storage's donated buffer through the
tensor's view, so it costs what the update does, not what the storage
holds (vLLM's KV-cache writes, torch_tpu/vllm/attention.py). Values equal
CPU's in Strict, DeferAndFuse and compiled graphs; every view of the
storage sees the write; an out-of-range index raises as before and leaves
the tensor as it was."""

import pytest
import torch
from reference import assert_close

import torch_tpu
from torch_tpu import _C

MODES = ["strict", "defer_and_fuse", "compiled"]


def run(mode, fn, *args):
    """fn(*args) on tpu in `mode` (compiled: through torch.compile); waits."""
    if mode == "compiled":
        torch._dynamo.reset()
        try:
            out = torch.compile(fn)(*args)
            torch_tpu.sync()
            return out
        finally:
            torch._dynamo.reset()
    with torch_tpu.eager_mode(mode):
        out = fn(*args)
        torch_tpu.sync()
        return out


def kv_cache(rows=64, width=8, dtype=torch.float32):
    """A [2, rows, width] cache, as vLLM's per-layer KV cache (keys, values)."""
    return torch.randn(2, rows, width).to(dtype)


# Each case writes into its first argument (a [2, rows, width] storage)
# through a view of it, as vLLM writes kv_cache[0] and kv_cache[1].
CASES = {
    "index_copy_ rows of kv[1]": lambda kv, i, u: kv[1].index_copy_(0, i, u),
    "index_copy_ rows of kv[0]": lambda kv, i, u: kv[0].index_copy_(0, i, u),
    "index_copy_ columns of a transposed view": lambda kv, i, u: kv[1].t().index_copy_(1, i, u.t()),
    "index_copy_ rows of a strided view": lambda kv, i, u: kv[:, :, ::2][0].index_copy_(0, i, u[:, ::2]),
    "index_copy_ from the same storage": lambda kv, i, u: kv[1].index_copy_(0, i, kv[0][: len(i)] * 2),
    "index_put_": lambda kv, i, u: kv[1].index_put_((i,), u),
    "index_put_ negative indices": lambda kv, i, u: kv[1].index_put_((i - kv.shape[1],), u),
    "index_put_ two index tensors": lambda kv, i, u: kv[0].index_put_((i, i % kv.shape[2]), u[:, 0]),
    "setitem non-adjacent index tensors of a transposed view": lambda kv, i, u: kv.transpose(0, 1).__setitem__(
        (i[:3], slice(None), i.new_tensor([0, 3, 5])), u[:3, :1]
    ),
    "index_put_ accumulate, duplicates": lambda kv, i, u: kv[1].index_put_((i % 5,), u, accumulate=True),
    "setitem": lambda kv, i, u: kv[1].__setitem__(i, u),
    "scatter_ src": lambda kv, i, u: kv[1].scatter_(0, i[:, None].expand(-1, kv.shape[2]), u),
    "scatter_ value": lambda kv, i, u: kv[0].scatter_(0, i[:, None].expand(-1, 3), 2.5),
    "scatter_add_ duplicates": lambda kv, i, u: kv[1].scatter_add_(0, (i % 5)[:, None].expand(-1, kv.shape[2]), u),
    "index_add_ duplicates": lambda kv, i, u: kv[1].index_add_(0, i % 5, u, alpha=2),
}


def args_for(rows=64, width=8, n=6, dtype=torch.float32):
    return kv_cache(rows, width, dtype), torch.randperm(rows)[:n], torch.randn(n, width).to(dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_in_place_scatter_through_a_view_equals_cpu_and_every_view_sees_it(case, mode):
    fn = CASES[case]
    kv, index, updates = args_for()
    expected = kv.clone()
    fn(expected, index, updates)
    tpu = kv.to("tpu")
    keys, values, flat = tpu[0], tpu[1], tpu.view(-1)  # other views of the storage, made before the write
    run(mode, fn, tpu, index.to("tpu"), updates.to("tpu"))
    assert_close(tpu, expected, atol=1e-6, rtol=1e-6)
    assert_close(keys, expected[0], atol=1e-6, rtol=1e-6)
    assert_close(values, expected[1], atol=1e-6, rtol=1e-6)
    assert_close(flat, expected.view(-1), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64, torch.bool])
def test_index_copy_and_index_put_of_other_dtypes_move_the_exact_bits(dtype, mode):
    kv, index, updates = args_for(dtype=dtype)
    if dtype in (torch.bfloat16, torch.float16):
        # Signalling NaNs with payloads: a float32 detour would quiet them.
        kv.view(torch.int16)[1, 0, :] = 0x7F81 if dtype == torch.bfloat16 else 0x7C01
        updates.view(torch.int16)[0, 0] = 0x7F82 if dtype == torch.bfloat16 else 0x7C02
    expected = kv.clone()
    expected[1].index_copy_(0, index, updates)
    expected[0].index_put_((index.flip(0),), updates)
    tpu = kv.to("tpu")
    with torch_tpu.eager_mode(mode):
        tpu[1].index_copy_(0, index.to("tpu"), updates.to("tpu"))
        tpu[0].index_put_((index.flip(0).to("tpu"),), updates.to("tpu"))
    as_bits = (lambda t: t.view(torch.int16)) if dtype in (torch.bfloat16, torch.float16) else (lambda t: t)
    assert torch.equal(as_bits(tpu.cpu()), as_bits(expected))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_0d_view_scatters_into_its_one_element(mode):
    for device in ("cpu", "tpu"):
        base = torch.arange(4.0, device=device)
        with torch_tpu.eager_mode(mode):
            base[2].scatter_(0, torch.tensor(0, device=device), torch.tensor(5.0, device=device))
            base[1].index_copy_(0, torch.tensor([0], device=device), torch.tensor([7.0], device=device))
        assert base.tolist() == [0.0, 7.0, 5.0, 3.0]


def test_defer_and_fuse_reads_after_a_scatter_see_it_and_reads_before_do_not():
    kv, index, updates = args_for()
    expected_before = kv[1].sum(0)
    expected = kv.clone()
    expected[1].index_copy_(0, index, updates)
    tpu = kv.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        before = tpu[1].sum(0)
        tpu[1].index_copy_(0, index.to("tpu"), updates.to("tpu"))
        after = tpu[1].index_select(0, index.to("tpu"))
        torch_tpu.sync()
    assert_close(before, expected_before)
    assert torch.equal(after.cpu(), updates)
    assert torch.equal(tpu.cpu(), expected)


# ---- out-of-range indices -----------------------------------------------------------
OUT_OF_RANGE = {
    # name: (op, exception CPU raises)
    "index_copy_": (lambda kv, i, u: kv[1].index_copy_(0, i, u), IndexError),
    "index_put_": (lambda kv, i, u: kv[1].index_put_((i,), u), IndexError),
    "index_put_ accumulate": (lambda kv, i, u: kv[1].index_put_((i,), u, accumulate=True), IndexError),
    "scatter_": (lambda kv, i, u: kv[1].scatter_(0, i[:, None].expand(-1, kv.shape[2]), u), RuntimeError),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_an_out_of_range_index_raises_and_leaves_the_storage_as_it_was(case, mode):
    """The in-range indices are not applied either: the whole op does not
    take effect, as docs/modes.md's "Failures" says."""
    fn, error = OUT_OF_RANGE[case]
    kv, index, updates = args_for()
    index[2] = kv.shape[1] + 3
    with pytest.raises(error):
        fn(kv.clone(), index, updates)
    tpu = kv.to("tpu")
    with torch_tpu.eager_mode(mode):
        tpu.add_(1)  # an earlier op: takes effect
        fn(tpu, index.to("tpu"), updates.to("tpu"))
        with pytest.raises(error, match="out of"):
            torch_tpu.sync()
    assert torch.equal(tpu.cpu(), kv + 1)
    tpu[1].index_copy_(0, index[:2].to("tpu"), updates[:2].to("tpu"))  # the device keeps working
    expected = kv + 1
    expected[1].index_copy_(0, index[:2], updates[:2])
    assert torch.equal(tpu.cpu(), expected)


# ---- in place, not copied ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", ["index_copy_ rows of kv[1]", "index_put_ accumulate, duplicates", "scatter_ src"])
def test_the_program_of_an_in_place_scatter_updates_the_donated_storage_without_copying_it(case, mode):
    """XLA's buffer assignment for the op's program (torch_tpu.metrics():
    program_temp_bytes_peak, program_alias_bytes_peak): the storage's buffer
    is reused for the result, and the program's scratch is a small part of
    it. A program that copied the storage (a select between the result and
    the old value, or a scatter into a slice of the view) needs scratch of
    the storage's size."""
    kv, index, updates = args_for(rows=1 << 15, width=64)  # 16 MiB
    tpu = kv.to("tpu")
    i, u = index.to("tpu"), updates.to("tpu")
    torch_tpu.sync()
    _C._clear_memory_cache()  # the program is compiled or loaded again: its numbers are counted
    _C._clear_op_cache()
    torch_tpu.reset_metrics()
    run(mode, CASES[case], tpu, i, u)
    m = torch_tpu.metrics()
    assert m["program_alias_bytes_peak"] >= tpu.nbytes
    assert m["program_temp_bytes_peak"] < tpu.nbytes // 64
    expected = kv.clone()
    CASES[case](expected, index, updates)
    assert_close(tpu, expected, atol=1e-6, rtol=1e-6)


def test_the_memory_metrics_see_a_program_that_copies_its_storage():
    """The check above can fail: a functional scatter makes a new tensor
    from the old one, and an in-place bfloat16 sum (computed in float32) is
    written whole."""
    tpu = torch.zeros(1 << 15, 64, device="tpu", dtype=torch.bfloat16)
    index = torch.arange(6, device="tpu")
    torch_tpu.sync()
    _C._clear_memory_cache()
    torch_tpu.reset_metrics()
    tpu.index_put_((index,), torch.ones(6, 64, device="tpu", dtype=torch.bfloat16), accumulate=True)
    torch_tpu.sync()
    assert torch_tpu.metrics()["program_temp_bytes_peak"] >= tpu.nbytes
    assert tpu[:6].float().sum().item() == 6 * 64
