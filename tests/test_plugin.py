"""Choosing and loading the PJRT plugin; failures are Python errors, never crashes."""

import os
import subprocess
import sys
import textwrap


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=300)


def test_missing_plugin_package_names_the_package_to_install():
    # Hide the package, as if it were not installed.
    r = run_python("""
        import sys
        sys.modules["xla_plugins"] = None
        import torch, torch_tpu
        assert not torch.tpu.is_available()
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "pip install xla-cpu-pjrt" in r.stdout


def test_plugin_path_to_a_file_that_is_not_a_plugin_is_a_clear_error(tmp_path):
    bogus = tmp_path / "not_a_plugin.so"
    bogus.write_bytes(b"this is not an ELF file")
    r = run_python("""
        import torch, torch_tpu
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
    """, TORCH_TPU_PJRT_PLUGIN=str(bogus))
    assert r.returncode == 0, r.stderr
    assert "cannot load PJRT plugin" in r.stdout and str(bogus) in r.stdout


def test_plugin_path_to_a_shared_library_without_pjrt_is_a_clear_error():
    import ctypes.util
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if not os.path.exists(libm):
        libm = ctypes.util.find_library("m")
    r = run_python("""
        import torch, torch_tpu
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
    """, TORCH_TPU_PJRT_PLUGIN=libm)
    assert r.returncode == 0, r.stderr
    assert "is not a PJRT plugin" in r.stdout


def test_plugin_path_that_does_not_exist():
    r = run_python("""
        import torch, torch_tpu
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
    """, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert r.returncode == 0, r.stderr
    assert "no such file" in r.stdout


def test_unknown_platform_is_refused_with_the_choices():
    r = run_python("""
        import torch, torch_tpu
        try:
            torch.ones(2, device="tpu")
        except RuntimeError as e:
            print("ERROR:", e)
    """, TORCH_TPU_PLATFORM="quantum")
    assert r.returncode == 0, r.stderr
    assert "expected one of cpu" in r.stdout or "expected one of tpu" in r.stdout
