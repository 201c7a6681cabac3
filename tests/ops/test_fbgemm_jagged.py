"""fbgemm's jagged operators on tpu (csrc/lower/jagged.cpp, registered by
torch_tpu/integrations/fbgemm.py once fbgemm_gpu is imported): each equal
to fbgemm's CPU kernel on the same inputs, in Strict, DeferAndFuse and
compiled graphs, with the CPU fallback off and nothing counted as falling
back. Gather and scatter only move values, so results are compared exactly;
segment_sum_csr sums integers here, exact too."""

import re
import subprocess
import sys

import pytest
import torch
from optional_extras import require_fbgemm
from reference import in_mode, to_device

import torch_tpu

require_fbgemm()

fbgemm = torch.ops.fbgemm
MODES = ["strict", "defer_and_fuse", "compiled"]


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def _generator():
    return torch.Generator().manual_seed(0)


# Lengths with empty rows, a row longer than the padded length below (3),
# and the last row empty.
LENGTHS = torch.tensor([2, 0, 1, 4, 3, 0, 5, 1, 0], dtype=torch.int32)


def _offsets(lengths):
    return torch.cat([torch.zeros(1, dtype=torch.int64), lengths.to(torch.int64).cumsum(0)])


def _values(total, *inner, dtype=torch.float32):
    return torch.randn(total, *inner, generator=_generator()).to(dtype)


def _assert_equal(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_equal(a, e)
        return
    if expected is None:
        assert actual is None
        return
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


def _check(fn, *inputs, mode):
    expected = fn(*inputs)
    actual = in_mode(mode, fn)(*to_device(list(inputs), "tpu"))
    _assert_equal(actual, expected)


# Each case: a function of CPU tensors calling one fbgemm operator, and its inputs.
total = int(LENGTHS.sum())
two_level = (torch.tensor([0, 2, 3, 3]), torch.tensor([0, 1, 4, 6]))
CASES = {
    "complete_cumsum_int32": (fbgemm.asynchronous_complete_cumsum, (LENGTHS,)),
    "complete_cumsum_int64_2d": (fbgemm.asynchronous_complete_cumsum, (LENGTHS.long().reshape(3, 3),)),
    "exclusive_cumsum": (fbgemm.asynchronous_exclusive_cumsum, (LENGTHS,)),
    "inclusive_cumsum": (fbgemm.asynchronous_inclusive_cumsum, (LENGTHS.long(),)),
    "complete_cumsum_empty": (fbgemm.asynchronous_complete_cumsum, (LENGTHS[:0],)),
    "jagged_to_padded_dense_2d_values": (
        lambda v, o: fbgemm.jagged_to_padded_dense_forward(v, [o], [3], -1.5),
        (_values(total, 4), _offsets(LENGTHS)),
    ),
    "jagged_to_padded_dense_1d_values": (
        lambda v, o: fbgemm.jagged_to_padded_dense_forward(v, [o], [6], 0.0),
        (_values(total), _offsets(LENGTHS)),
    ),
    "jagged_to_padded_dense_int_values": (
        lambda v, o: fbgemm.jagged_to_padded_dense_forward(v, [o], [2], 7.0),
        (torch.arange(total), _offsets(LENGTHS)),
    ),
    "jagged_to_padded_dense_two_jagged_dims": (
        lambda v, o0, o1: fbgemm.jagged_to_padded_dense_forward(v, [o0, o1], [2, 2], 0.0),
        (_values(6, 3), *two_level),
    ),
    "jagged_to_padded_dense_backward": (
        lambda g, o: fbgemm.jagged_to_padded_dense_backward(g, [o], total),
        (_values(9, 3, 4), _offsets(LENGTHS)),
    ),
    "jagged_to_padded_dense_backward_two_jagged_dims": (
        lambda g, o0, o1: fbgemm.jagged_to_padded_dense_backward(g, [o0, o1], 6),
        (_values(3, 2, 2, 3), *two_level),
    ),
    "dense_to_jagged_forward": (
        lambda d, o: fbgemm.dense_to_jagged_forward(d, [o], total),
        (_values(9, 3, 4), _offsets(LENGTHS)),
    ),
    "jagged_1d_to_dense": (
        lambda v, o: fbgemm.jagged_1d_to_dense(v, o, 4, -1),
        (torch.arange(total), _offsets(LENGTHS)),
    ),
    "jagged_2d_to_dense": (
        lambda v, o: fbgemm.jagged_2d_to_dense(v, o, 3),
        (_values(total, 2), _offsets(LENGTHS)),
    ),
    # Features permuted with one repeated and one dropped; weights moved along.
    "permute_2D_sparse_data": (
        lambda p, l, v, w: fbgemm.permute_2D_sparse_data(p, l, v, w, int(l.reshape(3, 3)[[2, 0, 2]].sum())),
        (torch.tensor([2, 0, 2], dtype=torch.int32), LENGTHS.reshape(3, 3), torch.arange(total), _values(total)),
    ),
    "permute_2D_sparse_data_no_weights": (
        lambda p, l, v: fbgemm.permute_2D_sparse_data(p, l, v, None, total),
        (torch.tensor([1, 2, 0], dtype=torch.int32), LENGTHS.reshape(3, 3), torch.arange(total)),
    ),
    "permute_1D_sparse_data": (
        lambda p, l, v, w: fbgemm.permute_1D_sparse_data(p, l, v, w, int(l[[8, 3, 4, 0]].sum())),
        (torch.tensor([8, 3, 4, 0], dtype=torch.int32), LENGTHS, torch.arange(total), _values(total)),
    ),
    "offsets_range": (lambda o: fbgemm.offsets_range(o, total), (_offsets(LENGTHS)[:-1].contiguous(),)),
    # Pooled embeddings of features 2, 3 and 1 wide, reordered 3rd, 1st, 2nd.
    "permute_pooled_embs": (
        lambda e, o, p, io, ip: fbgemm.permute_pooled_embs(e, o, p, io, ip),
        (
            _values(4, 6),
            torch.tensor([0, 2, 5, 6]),
            torch.tensor([2, 0, 1]),
            torch.tensor([0, 1, 3, 6]),
            torch.tensor([1, 2, 0]),
        ),
    ),
    "segment_sum_csr": (
        lambda s, v: fbgemm.segment_sum_csr(2, s, v),
        (torch.tensor([0, 1, 1, 4, 5], dtype=torch.int32), torch.arange(10.0)),
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_equals_cpu(case, mode):
    fn, inputs = CASES[case]
    _check(fn, *inputs, mode=mode)


# The result's size left for the device to find (a host wait, as fbgemm's
# CUDA kernels do): the permuted lengths' sum, the jagged total length.
DATA_SIZED = {
    "permute_2D_sparse_data": (
        lambda p, l, v, w: fbgemm.permute_2D_sparse_data(p, l, v, w),
        (torch.tensor([2, 0, 2], dtype=torch.int32), LENGTHS.reshape(3, 3), torch.arange(total), _values(total)),
    ),
    "permute_1D_sparse_data": (
        lambda p, l, v: fbgemm.permute_1D_sparse_data(p, l, v),
        (torch.tensor([8, 3, 4, 0], dtype=torch.int32), LENGTHS, torch.arange(total)),
    ),
    "permute_to_nothing": (
        lambda p, l, v: fbgemm.permute_2D_sparse_data(p, l, v),
        (torch.tensor([1], dtype=torch.int32), torch.zeros(2, 3, dtype=torch.int32), torch.arange(0)),
    ),
    "dense_to_jagged_forward": (
        lambda d, o: fbgemm.dense_to_jagged_forward(d, [o]),
        (_values(9, 3, 4), _offsets(LENGTHS)),
    ),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(DATA_SIZED))
def test_op_with_data_dependent_size_equals_cpu(case, mode):
    fn, inputs = DATA_SIZED[case]
    _check(fn, *inputs, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_jagged_to_padded_dense_gradient_equals_cpu(mode):
    offsets = _offsets(LENGTHS)

    def loss_and_grad(values, offsets, weight):
        values = values.detach().requires_grad_()
        dense = fbgemm.jagged_to_padded_dense(values, [offsets], [3], 0.0)
        (dense * weight).sum().backward()
        return dense.detach(), values.grad

    inputs = (_values(total, 4), offsets, _values(9, 3, 4))
    expected = loss_and_grad(*inputs)
    values, offsets_t, weight = to_device(list(inputs), "tpu")
    if mode == "compiled":
        values = values.requires_grad_()
        dense = torch.compile(lambda v, o: fbgemm.jagged_to_padded_dense(v, [o], [3], 0.0), backend="tpu")(
            values, offsets_t
        )
        (dense * weight).sum().backward()
        actual = (dense.detach(), values.grad)
    else:
        actual = in_mode(mode, loss_and_grad)(values, offsets_t, weight)
    _assert_equal(actual, expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_dense_to_jagged_gradient_equals_cpu(mode):
    def grad_of(dense, offsets, weight):
        dense = dense.detach().requires_grad_()
        values, _ = fbgemm.dense_to_jagged(dense, [offsets])
        (values * weight).sum().backward()
        return values.detach(), dense.grad

    inputs = (_values(9, 3, 4), _offsets(LENGTHS), _values(total, 4))
    _check(grad_of, *inputs, mode=mode)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_permute_pooled_embs_gradient_equals_cpu(mode):
    def grad_of(embs, offsets, permute, inv_offsets, inv_permute, weight):
        embs = embs.detach().requires_grad_()
        out = fbgemm.permute_pooled_embs_auto_grad(embs, offsets, permute, inv_offsets, inv_permute)
        (out * weight).sum().backward()
        return out.detach(), embs.grad

    lists = (torch.tensor([0, 2, 5, 6]), torch.tensor([2, 0, 1]), torch.tensor([0, 1, 3, 6]), torch.tensor([1, 2, 0]))
    _check(grad_of, _values(4, 6), *lists, _values(4, 6), mode=mode)


def test_registered_only_once_fbgemm_gpu_is_imported():
    script = (
        "import torch, torch_tpu\n"
        "assert not any(n.startswith('fbgemm::') for n in torch_tpu.lowered_ops())\n"
        "import fbgemm_gpu\n"
        "assert 'fbgemm::permute_2D_sparse_data' in torch_tpu.lowered_ops()\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_registered_for_the_device():
    for name in ("asynchronous_complete_cumsum", "jagged_to_padded_dense_forward", "permute_2D_sparse_data"):
        assert f"fbgemm::{name}" in torch_tpu.lowered_ops()
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"fbgemm::{name}", "PrivateUse1")


def _raises_as_on_cpu(fn, *inputs, match):
    """fn raises on CPU and on tpu alike (on tpu by the next synchronization
    where the check reads values)."""
    with pytest.raises(RuntimeError, match=match):
        fn(*inputs)
    with pytest.raises(RuntimeError, match=match):
        fn(*to_device(list(inputs), "tpu")).cpu()


def test_bad_arguments_raise_as_on_cpu():
    values, offsets = _values(total, 4), _offsets(LENGTHS)
    # One offsets tensor per jagged dim, one max length each.
    _raises_as_on_cpu(
        lambda v, o: fbgemm.jagged_to_padded_dense_forward(v, [o], [3, 3], 0.0),
        values,
        offsets,
        match=re.escape("max_lengths.size(), 2 != num_jagged_dim, 1"),
    )
    # The dense tensor's rows are the outer offsets' rows.
    _raises_as_on_cpu(
        lambda d, o: fbgemm.jagged_to_padded_dense_backward(d, [o], total),
        _values(8, 3, 4),
        offsets,
        match=r"outer_dense_size, 8 != x_offsets\[0\].numel\(\) - 1, 9",
    )
    # An inner offsets vector has an entry per row of the level above, plus one.
    short = torch.tensor([0, 1, 3])
    inner_count = r"x_offsets\[1\].numel\(\), 3 != num_lengths_expected \+ 1"
    _raises_as_on_cpu(
        lambda v, o0, o1: fbgemm.jagged_to_padded_dense_forward(v, [o0, o1], [2, 2], 0.0),
        _values(3, 2),
        short,
        short,
        match=inner_count,
    )
    _raises_as_on_cpu(
        lambda d, o0, o1: fbgemm.dense_to_jagged_forward(d, [o0, o1], 3),
        _values(2, 2, 2, 2),
        short,
        short,
        match=inner_count,
    )
