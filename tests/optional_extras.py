"""Skipping a test module whose optional extra is absent or cannot load next
to the running torch, with a reason that says which extra and which release
would load."""

import pytest
import torch


def require_fbgemm():
    """Skips the calling module where fbgemm_gpu is absent or does not load
    next to this torch: its libraries link against one torch release."""
    try:
        import fbgemm_gpu  # noqa: F401
    except ImportError:
        pytest.skip(
            "fbgemm_gpu is not installed (the [rec] extra: pip install torch_tpu[rec])", allow_module_level=True
        )
    except OSError as e:
        pytest.skip(
            f"fbgemm_gpu does not load next to torch {torch.__version__} ({e}): fbgemm-gpu-cpu 1.8.0 loads next "
            "to torch 2.13, 1.9.0 next to 2.14, no release yet next to 2.15 (docs/torch_versions.md)",
            allow_module_level=True,
        )
