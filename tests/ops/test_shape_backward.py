"""Backward of view/shape ops that have an ATen backward op of their own:
Tensor.unfold -> aten::unfold_backward (every window element's gradient added
back where the window read it), against CPU."""

import pytest
import torch
from reference import assert_close, check_op

# (input shape, dim, size, step)
UNFOLD_CASES = [
    ((10,), 0, 3, 1),  # overlapping: each element read by up to 3 windows
    ((11,), 0, 4, 3),  # overlapping by one
    ((9,), 0, 3, 3),  # windows tile the dim
    ((12,), 0, 3, 5),  # gaps between windows: those elements get no gradient
    ((13,), 0, 2, 4),  # gaps and an unread tail
    ((3, 8, 2), 1, 3, 2),
    ((4, 5, 6), -1, 4, 1),  # negative dim
    ((4, 5, 6), 0, 2, 2),
    ((2, 7, 3), -2, 7, 1),  # one window covering the dim
    ((6, 4), 0, 1, 1),  # size 1
    ((5, 3), 0, 5, 7),  # step past the end: one window
]


@pytest.mark.parametrize("shape,dim,size,step", UNFOLD_CASES)
def test_unfold_backward_adds_every_window_gradient(shape, dim, size, step):
    check_op(lambda x: x.unfold(dim, size, step), torch.randn(shape), grad=True)


@pytest.mark.parametrize("size,step", [(1, 1), (0, 1), (1, 3)])
def test_unfold_backward_of_0d_input(size, step):
    # A 0-d tensor unfolds as if it were [1]; size 0 gives an empty window.
    check_op(lambda x: x.unfold(0, size, step), torch.randn(()), grad=True)


def test_unfold_backward_of_empty_window_and_empty_input():
    check_op(lambda x: x.unfold(1, 0, 2), torch.randn(3, 5), grad=True)
    check_op(lambda x: x.unfold(1, 2, 1), torch.randn(0, 5), grad=True)


def test_unfold_backward_of_non_contiguous_input():
    x = torch.randn(8, 6)
    check_op(lambda x_: x_.t().unfold(1, 3, 2), x, grad=True)
    check_op(lambda x_: x_[::2, 1:].unfold(-1, 2, 1), x, grad=True)


def test_unfold_copy_backward():
    check_op(lambda x: torch.unfold_copy(x, 0, 4, 2), torch.randn(9, 2), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_unfold_backward_op_matches_cpu(dtype):
    grad = (torch.randn(3, 4, 5, 3) * 4).to(dtype)  # unfold of [3, 10, 5] along 1, size 3, step 2
    check_op(lambda g: torch.ops.aten.unfold_backward(g, [3, 10, 5], 1, 3, 2), grad)


def test_unfold_backward_out_variant_writes_into_out():
    grad = torch.randn(4, 3)  # unfold of [9] with size 3, step 2
    expected = torch.ops.aten.unfold_backward(grad, [9], 0, 3, 2)
    out = torch.empty(9, device="tpu")
    result = torch.ops.aten.unfold_backward.out(grad.to("tpu"), [9], 0, 3, 2, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert_close(out, expected)
