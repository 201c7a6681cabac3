"""Strict mode is asynchronous: the host waits only when it needs a value."""

import torch

import torch_tpu


def test_thousand_small_ops_make_no_host_wait_until_item():
    x = torch.ones(16, device="tpu")
    y = torch.zeros(16, device="tpu")
    for _ in range(3):  # compile the programs first
        y = y * 0.5 + x
    torch.tpu.synchronize()
    torch_tpu.reset_metrics()
    for _ in range(500):
        y = y * 0.5 + x
    m = torch_tpu.metrics()
    assert m["ops_dispatched"] == 1000
    assert m["host_waits"] == 0
    assert m["compiles"] == 0
    value = y.sum().item() if "aten::sum" in torch_tpu.lowered_ops() else y[0].item()
    assert torch_tpu.metrics()["host_waits"] == 1
    expected = torch.zeros(16)
    for _ in range(503):
        expected = expected * 0.5 + 1
    assert abs(value - (expected.sum().item() if "aten::sum" in torch_tpu.lowered_ops() else expected[0].item())) < 1e-4


def test_changing_python_scalars_reuse_the_compiled_program():
    x = torch.ones(8, device="tpu")
    x.mul_(1.5)
    torch_tpu.reset_metrics()
    for lr in (0.1, 0.2, 0.3, 0.01):
        x.mul_(lr)
    assert torch_tpu.metrics()["compiles"] == 0
    torch.testing.assert_close(x.cpu(), torch.full((8,), 1.5 * 0.1 * 0.2 * 0.3 * 0.01))


def test_values_needed_by_python_synchronize():
    x = torch.tensor([1.0, 2.0, 3.0], device="tpu")
    assert (x * 2).tolist() == [2.0, 4.0, 6.0]
    assert bool((x > 2)[2])
    assert float(x[1]) == 2.0
    assert "tpu" in repr(x) and "2." in repr(x)
