"""Fake-tensor rules for ops whose PyTorch meta kernel rejects what the
device runs, so torch.compile traces them as eager runs them.

The rule is the op's own C++ meta kernel, the one its row in
csrc/device/op_table.cpp marks `.fake_from_meta()`: no second copy of a shape
rule lives here, and an op gets the rule by its row alone
(torch_tpu._C._fake_tensor_rule_ops() lists them). Other devices keep
PyTorch's rule."""

import functools

import torch
import torch.utils._pytree as pytree

aten = torch.ops.aten


@functools.cache
def _ops_served_by_rows():
    from . import _C

    ops = set()
    for name in _C._fake_tensor_rule_ops():
        op_name, _, overload = name.removeprefix("aten::").partition(".")
        ops.add(getattr(getattr(aten, op_name), overload or "default"))
    return frozenset(ops)


def is_served_by_row(func):
    """The predicate FakeTensorMode consults before meta kernels: the rule
    is registered with register_op_impl (torch_tpu/_global_patches.py); a
    rule returning NotImplemented defers to the meta kernel."""
    return func in _ops_served_by_rows()


def row_meta(fake_mode, func, *args, **kwargs):
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    from . import _C

    devices = [a.fake_device for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, FakeTensor)]
    if not devices or devices[0].type != "tpu":
        return NotImplemented
    # Within the invocation manager the fake tensors are the meta tensors
    # they hold, and the kernel's results are meta tensors to wrap.
    with in_kernel_invocation_manager(fake_mode):
        result = _C._row_meta(func._schema.name, func._schema.overload_name, *args, **kwargs)
    converter = fake_mode.fake_tensor_converter
    return pytree.tree_map_only(
        torch.Tensor, lambda t: converter.from_meta_and_device(fake_mode, t, devices[0]), result
    )
