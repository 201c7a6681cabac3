"""A tpu storage is bytes: x.view(dtype) reinterprets them exactly as on CPU,
for every pair of element sizes, on whole tensors, row slices and strided
views with offsets; reads and in-place writes through such a view see and
change the very bytes of the tensor it came from, in Strict, DeferAndFuse and
compiled graphs. Every check compares bytes with CPU PyTorch on the same input."""

import pytest
import torch

import torch_tpu

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.float32,
    torch.int64,
    torch.float64,
    torch.complex64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]

ROW_BYTES = 64


def _random_bytes(n, boolean):
    g = torch.Generator().manual_seed(n)
    if boolean:  # bool elements are 0 or 1: a bool view of other bytes is not a value PyTorch defines
        return torch.randint(0, 2, (n,), dtype=torch.uint8, generator=g)
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)


def _base(src, boolean):
    """4 rows of 64 bytes each, as `src` elements, on CPU."""
    return _random_bytes(4 * ROW_BYTES, boolean).view(src).reshape(4, -1)


def _layouts(src):
    """Views of the base that every element size may view as any other:
    the whole tensor, a row slice (an offset), every other row cropped at
    both ends (strides, an offset, a partial last dimension)."""
    k = max(1, 8 // src.itemsize)  # 8 bytes of crop: a whole element of every dtype
    return {
        "whole": lambda x: x,
        "rows": lambda x: x[1:3],
        "strided": lambda x: x[::2, k:-k],
    }


def _bytes(t):
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def _assert_same_bytes(actual, expected, what):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    assert actual.stride() == expected.stride() and actual.storage_offset() == expected.storage_offset(), what
    torch.testing.assert_close(_bytes(actual), _bytes(expected), atol=0, rtol=0, msg=what)


def _write(v, boolean):
    """An in-place write through the view `v`, the same on CPU and tpu; with
    `boolean`, every byte stays 0 or 1."""
    if v.dtype == torch.bool:
        return v.logical_not_()
    if (
        boolean
        or v.dtype.is_floating_point
        or v.dtype.is_complex
        or v.dtype in (torch.uint16, torch.uint32, torch.uint64)
    ):
        src = _random_bytes(v.numel() * v.itemsize, boolean).view(v.dtype).reshape(v.shape)
        return v.copy_(src.to(v.device))
    return v.bitwise_xor_(0x5A)


@pytest.fixture(params=["strict", "defer_and_fuse"])
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def _pair_ids(p):
    return f"{str(p[0])[6:]}-{str(p[1])[6:]}"


PAIRS = [(s, d) for s in DTYPES for d in DTYPES]


@pytest.mark.parametrize("pair", PAIRS, ids=[_pair_ids(p) for p in PAIRS])
def test_view_dtype_reads_and_writes_the_same_bytes_as_cpu(pair, mode):
    src, dst = pair
    boolean = torch.bool in pair
    for name, layout in _layouts(src).items():
        cpu = _base(src, boolean)
        tpu = cpu.to("tpu")
        expected = layout(cpu).view(dst)
        actual = layout(tpu).view(dst)
        _assert_same_bytes(actual, expected, f"{name}: read")
        _write(expected, boolean)
        _write(actual, boolean)
        _assert_same_bytes(actual, expected, f"{name}: the view after an in-place write")
        _assert_same_bytes(tpu, cpu, f"{name}: the base after an in-place write through the view")


@pytest.mark.parametrize("dst", [torch.uint8, torch.int16, torch.bfloat16, torch.int64, torch.float64, torch.complex64])
def test_view_dtype_in_a_compiled_graph_reads_and_writes_the_base(dst):
    def f(x):
        v = x[1:3].view(dst)
        out = v.clone()
        if dst.is_floating_point or dst.is_complex:
            v.zero_()
        else:
            v.bitwise_xor_(0x5A)
        return out

    compiled = torch.compile(f, backend="tpu")
    for _ in range(2):  # the trace, then the captured program's replay
        cpu = _base(torch.float32, False)
        tpu = cpu.to("tpu")
        _assert_same_bytes(compiled(tpu), f(cpu), "returned view")
        _assert_same_bytes(tpu, cpu, "base after the write through the view")


def test_clearing_float_sign_bits_through_an_int32_view(mode):
    cpu = torch.randn(5, 7)
    tpu = cpu.to("tpu")
    cpu.view(torch.int32).bitwise_and_(0x7FFFFFFF)
    tpu.view(torch.int32).bitwise_and_(0x7FFFFFFF)
    torch.testing.assert_close(tpu.cpu(), cpu.abs(), atol=0, rtol=0)
    assert (tpu.cpu() >= 0).all()


def test_ops_on_a_byte_view_and_its_base_interleave(mode):
    cpu = torch.randn(6, 8)
    tpu = cpu.to("tpu")
    for x in (cpu, tpu):
        b = x.view(torch.uint8)
        x.mul_(2)  # through the f32 view
        b[:, :4].zero_()  # the first float of every row, byte by byte
        x.add_(1)
        b[:, 7] ^= 0x80  # the sign bit of the second float
    torch.testing.assert_close(tpu.cpu(), cpu, atol=0, rtol=0)


def test_storage_of_odd_bytes_viewed_as_wider_elements(mode):
    # 10 bytes: two whole floats and 2 bytes that belong to none; writes
    # through the float view keep them.
    cpu = torch.arange(10, dtype=torch.uint8)
    tpu = cpu.to("tpu")
    for x in (cpu, tpu):
        f = x[:8].view(torch.float32)
        f.copy_(torch.tensor([1.5, -2.0]).to(x.device))
    torch.testing.assert_close(tpu.cpu(), cpu, atol=0, rtol=0)


def test_a_view_of_a_never_written_storage_reads_as_zeros_then_holds_writes(mode):
    t = torch.empty(3, 4, device="tpu")
    t.view(torch.uint8)[:, :4].fill_(0)  # defined bytes only: the rest of an empty tensor is unspecified
    t.view(torch.int32)[:, 1:].fill_(7)
    expected = torch.zeros(3, 4)
    expected.view(torch.int32)[:, 1:] = 7
    torch.testing.assert_close(t.cpu(), expected, atol=0, rtol=0)


ILLEGAL_VIEWS = {
    "last dimension not divisible": lambda x: x[:, :3].view(torch.float64),
    "last stride not 1": lambda x: x.t().view(torch.uint8),
    "offset not divisible": lambda x: x.reshape(-1)[1:7].view(torch.float64),
    "other stride not divisible": lambda x: x.reshape(-1)[:15].as_strided((3, 4), (5, 1)).view(torch.complex64),
    "zero-dim": lambda x: x[0, 0].view(torch.int16),
}


@pytest.mark.parametrize("name", list(ILLEGAL_VIEWS))
def test_illegal_view_dtype_raises_cpus_error(name):
    fn = ILLEGAL_VIEWS[name]
    cpu = torch.randn(4, 6)
    with pytest.raises(RuntimeError) as expected:
        fn(cpu)
    with pytest.raises(type(expected.value)) as actual:
        fn(cpu.to("tpu"))
    assert str(actual.value) == str(expected.value)
