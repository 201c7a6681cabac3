"""A program that updates a storage in place takes the storage's memory for
its new value (the donated buffer), whatever else it writes: XLA's buffer
assignment for the program (torch_tpu.metrics(): program_temp_bytes_peak,
program_alias_bytes_peak) reuses each donated buffer for that storage's own
result and needs no scratch the size of the storages. Left to pair donated
buffers with outputs by type in output order, XLA gave a fresh result (a
gradient) an updated storage's buffer (an optimizer state) and copied every
crossed pair: 121 copies in a fused encoder training step."""

import pytest
import torch

import torch_tpu
from torch_tpu import _C

N = 1 << 16  # floats per tensor: 256 KiB, far above the program's own scratch


def compile_counted():
    """The next program is compiled or loaded again: its numbers are counted."""
    torch_tpu.sync()
    _C._clear_memory_cache()
    _C._clear_op_cache()
    torch_tpu.reset_metrics()


def momentum_step(params, states, grads_in):
    """For each pair: a fresh tensor of the state's type made before the
    state is read (as backward makes a gradient before the optimizer reads
    its state), then the state and the parameter updated in place. Returns
    the fresh tensors, kept alive so that they are outputs too."""
    fresh = []
    for p, s, g in zip(params, states, grads_in):
        d = g * 2.0
        s.mul_(0.9).add_(d)
        p.sub_(s * 0.1)
        fresh.append(d)
    return fresh


def make(device, count=3):
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.randn(N, generator=gen) for _ in range(3 * count)]
    tensors = [t.to(device) for t in tensors]
    return tensors[:count], tensors[count : 2 * count], tensors[2 * count :]


@pytest.mark.parametrize("mode", ["defer_and_fuse", "compiled"])
def test_each_storage_updated_in_place_takes_its_own_buffer_and_the_program_copies_none(mode):
    params, states, grads = make("tpu")
    want_params, want_states, want_grads = make("cpu")
    want_fresh = momentum_step(want_params, want_states, want_grads)
    compile_counted()
    if mode == "compiled":
        fresh = torch.compile(momentum_step, backend="tpu")(params, states, grads)
    else:
        with torch_tpu.eager_mode("defer_and_fuse"):
            fresh = momentum_step(params, states, grads)
            torch_tpu.sync()
    m = torch_tpu.metrics()
    updated = sum(t.nbytes for t in params + states)
    assert m["program_alias_bytes_peak"] >= updated
    # A crossed pair copies a storage's old value to scratch (one tensor's
    # size per pair): none is left.
    assert m["program_temp_bytes_peak"] < N * 4 // 8
    for got, want in zip(params + states + fresh, want_params + want_states + want_fresh):
        torch.testing.assert_close(got.cpu(), want)
