"""torch._grouped_mm (F.grouped_mm), the per-expert products of mixture-of-
experts layers (transformers routes MoE experts on tpu to it for every
dtype), lowered in csrc/lower/matmul.cpp: the four operand layouts against
CPU's kernel, forward and backward, in Strict, DeferAndFuse and compiled,
with no host read of the group offsets (one program, graphs replay)."""

import pytest
import torch

import torch_tpu
import torch_tpu.compile as tpu_compile

# offs: cumulative group ends over 16 rows (or columns, or contraction
# elements); group 1 is empty and 12..15 belong to no group, whose results
# CPU leaves uninitialized (tpu: zeros), so they are not compared. (CPU
# wants 16-byte aligned strides: 16 half-precision columns.)
OFFS = torch.tensor([3, 3, 7, 12], dtype=torch.int32)
COVERED = 12

# name: (a's shape, b's shape, offs, which results and gradients are defined)
LAYOUTS = {
    "2d_x_3d": ((16, 8), (4, 8, 8), OFFS),  # rows of a grouped; out (16, 8)
    "3d_x_2d": ((4, 8, 8), (8, 16), OFFS),  # columns of b grouped; out (8, 16)
    "2d_x_2d": ((8, 16), (16, 8), OFFS),  # contraction grouped; out (4, 8, 8)
    "3d_x_3d": ((4, 8, 8), (4, 8, 8), None),  # bmm
}


def _defined(layout, out, grad_a, grad_b):
    """The parts CPU defines: rows/columns/contraction inside some group."""
    n = COVERED
    if layout == "2d_x_3d":
        return out[:n], grad_a[:n], grad_b
    if layout == "3d_x_2d":
        return out[:, :n], grad_a, grad_b[:, :n]
    if layout == "2d_x_2d":
        return out, grad_a[:, :n], grad_b[:n]
    return out, grad_a, grad_b


def _run(layout, dtype, device, run=lambda f, *args: f(*args)):
    a_shape, b_shape, offs = LAYOUTS[layout]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(a_shape, generator=gen).to(dtype).to(device).requires_grad_()
    b = torch.randn(b_shape, generator=gen).to(dtype).to(device).requires_grad_()
    offs = None if offs is None else offs.to(device)

    def step(a, b, offs):
        out = torch.nn.functional.grouped_mm(a, b, offs=offs)
        defined = _defined(layout, out, a, b)[0]  # undefined results must not reach the gradients
        weights = torch.linspace(-1, 1, defined.numel(), device=out.device).view(defined.shape)
        return out, (defined.float() * weights).sum()

    out, loss = run(step, a, b, offs)
    loss.backward()
    return _defined(layout, out.detach().cpu(), a.grad.cpu(), b.grad.cpu())


TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


@pytest.fixture(autouse=True)
def _highest_precision():
    with torch_tpu.matmul_precision("highest"):
        yield


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_grouped_mm_matches_cpu_forward_and_backward(layout, dtype, mode):
    expected = _run(layout, dtype, "cpu")
    torch_tpu.reset_metrics()
    with torch_tpu.eager_mode(mode):
        actual = _run(layout, dtype, "tpu")
    atol, rtol = TOLERANCE[dtype]
    for name, a, e in zip(("result", "grad a", "grad b"), actual, expected):
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol, msg=name)
    # Lowered, not PyTorch's composite loop (which reads offs on the host).
    assert not torch_tpu.metrics()["cpu_fallbacks"]


def test_rows_outside_every_group_are_zero():
    a, b = torch.randn(16, 8, device="tpu"), torch.randn(4, 8, 8, device="tpu")
    out = torch.nn.functional.grouped_mm(a, b, offs=OFFS.to("tpu"))
    assert torch.count_nonzero(out[COVERED:].cpu()) == 0


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_compiled_grouped_mm_matches_cpu_and_replays(layout):
    torch._dynamo.reset()
    tpu_compile.reset_stats()
    expected = _run(layout, torch.float32, "cpu")
    for _ in range(3):
        actual = _run(layout, torch.float32, "tpu", run=lambda f, *args: torch.compile(f, backend="tpu")(*args))
    for name, a, e in zip(("result", "grad a", "grad b"), actual, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5, msg=name)
    stats = tpu_compile.stats()
    assert stats["graph_replays"] >= 2 and not stats["trace_reasons"], stats
    torch._dynamo.reset()


@pytest.mark.parametrize(
    "a_shape, b_shape, offs, message",
    [
        ((16, 8), (4, 8, 8), OFFS.long(), "Offsets have to be int32"),
        ((4, 8, 8), (4, 8, 8), OFFS, "no offset if both matrices are 3d"),
        ((16, 8), (4, 8, 8), None, "Have to provide offsets"),
        ((16, 8), (3, 8, 8), OFFS, "matrix batch sizes have to match"),
        ((16, 8), (4, 4, 8), OFFS, "contraction dimension of mat_a and mat_b must match"),
    ],
)
def test_bad_arguments_raise_cpus_error(a_shape, b_shape, offs, message):
    for device in ("cpu", "tpu"):
        a, b = torch.randn(a_shape, device=device), torch.randn(b_shape, device=device)
        with pytest.raises(RuntimeError, match=message):
            torch._grouped_mm(a, b, offs=None if offs is None else offs.to(device))
