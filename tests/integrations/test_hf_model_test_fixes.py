"""torch_tpu fixes that transformers' own model tests (scripts/hf_model_tests.py, docs/hf_model_tests.md) uncovered,
each the smallest case, checked against what plain PyTorch on CPU does with the same program."""

import os
import subprocess
import sys
import textwrap


def _run(script, **env):
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.returncode, out.stdout, out.stderr


# mistral3's test file starts with `import accelerate`, before anything imports torch. accelerate.accelerator
# imports torch while it is itself half-executed; torch's backend autoload imports torch_tpu there, whose
# integration hook for accelerate.accelerator finds the module in sys.modules and reads its not-yet-defined
# Accelerator: "AttributeError: partially initialized module 'accelerate.accelerator' has no attribute
# 'Accelerator'", re-raised by torch as "Failed to load the backend extension: torch_tpu". Plain PyTorch (the
# backend not loaded) imports accelerate first without complaint.
IMPORT_ACCELERATE_FIRST = """
    import accelerate
    import torch
    print("imported", accelerate.Accelerator.__name__)
"""


def test_importing_accelerate_before_torch_works_as_without_the_backend():
    code, out, err = _run(IMPORT_ACCELERATE_FIRST, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert code == 0 and "imported Accelerator" in out, err[-3000:]  # the CPU reference

    code, out, err = _run(
        IMPORT_ACCELERATE_FIRST
        + """
    import torch_tpu
    assert "tpu" in str(torch.empty(1, device="tpu").device)
    assert getattr(accelerate.Accelerator, "_torch_tpu_fp16", False), "torch_tpu's accelerate integration not applied"
    """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="1",
    )
    assert code == 0 and "imported Accelerator" in out, err[-3000:]


def test_importing_accelerate_first_under_cprofile_keeps_the_profiler(tmp_path):
    # The hooks wait for accelerate.accelerator's import to finish without a profile function of their own: one
    # would displace cProfile's (and calling cProfile's Profile object from it raised TypeError in the autoload).
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            profiler = sys.getprofile()
            import accelerate
            import torch
            import torch_tpu
            assert getattr(accelerate.Accelerator, "_torch_tpu_fp16", False), "integration not applied"
            assert sys.getprofile() is profiler is not None, (profiler, sys.getprofile())
            print("imported", accelerate.Accelerator.__name__)
            """
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(tmp_path / "profile.out"), str(script)],
        env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "imported Accelerator" in out.stdout, out.stderr[-3000:]
