import torch
from reference import check_op


def test_add_scalar_and_tensor():
    a, b = torch.randn(3, 4), torch.randn(4)
    check_op(lambda x, y: x + y * 2.5, a, b)


def test_inplace_on_transposed_view_updates_base():
    base = torch.arange(12.0).reshape(3, 4)
    t = base.to("tpu")
    t.t().mul_(2)
    base.t().mul_(2)
    torch.testing.assert_close(t.cpu(), base)
