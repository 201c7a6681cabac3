"""Every view and in-place aliasing pattern of ops/test_views.py, under DeferAndFuse:
deferring and fusing must not change what views see."""

import pytest
from ops.test_views import *  # noqa: F401,F403  (the same tests, collected again here)

import torch_tpu


@pytest.fixture(autouse=True)
def _defer_and_fuse():
    with torch_tpu.eager_mode("defer_and_fuse"):
        yield
