import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# The suite compiles its programs with XLA:CPU's LLVM optimizations off: most
# of its time is XLA compiling thousands of small programs, and at level 0
# that takes half as long (tests/ops/test_byte_views.py on a cold cache: 64 s
# against 134 s). The values are the same, but for an ulp here and there
# where LLVM's optimizer contracts or reorders
# (measured: matmul, softmax, sums, cumsum, conv, gelu, a backward and a
# compiled graph bit for bit; layer_norm and exp().tanh() * sin() within
# 1 ulp). Set before torch_tpu loads, so the processes the tests start inherit it;
# `XLA_FLAGS=--xla_backend_optimization_level=2 bash scripts/test.sh` runs
# the suite at the plugin's default.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _exact_matmul_and_seed():
    """Tests compare with CPU at full float32 matmul precision. Each
    device's setting is restored on its own: torch.set_float32_matmul_precision
    sets CPU's and tpu's, and CPU's must not inherit tpu's default "medium"
    (oneDNN then multiplies in bf16 on CPUs that have it, and a module fixture,
    which runs before this one, would compare with a rounded CPU run)."""
    previous_tpu, previous_cpu = torch_tpu.get_matmul_precision(), torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    yield
    torch.set_float32_matmul_precision(previous_cpu)
    torch_tpu.set_matmul_precision(previous_tpu)


@pytest.fixture
def no_cpu_fallback():
    """For modules that check nothing falls back to CPU:
    `pytestmark = pytest.mark.usefixtures("no_cpu_fallback")`."""
    assert not torch_tpu.cpu_fallback(), "these tests check that nothing falls back to CPU"
    torch_tpu.reset_metrics()
    yield
    assert torch_tpu.metrics()["cpu_fallbacks"] == {}
