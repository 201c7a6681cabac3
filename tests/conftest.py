import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _exact_matmul_and_seed():
    """Tests compare with CPU at full float32 matmul precision."""
    previous = torch_tpu.get_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    yield
    torch.set_float32_matmul_precision(previous)
