"""Choosing and loading the PJRT plugin; failures are Python errors, never crashes."""

import os
import subprocess
import sys
import textwrap


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, timeout=300
    )


USE_THE_DEVICE = """
    import torch, torch_tpu
    try:
        torch.ones(2, device="tpu")
    except RuntimeError as e:
        print("ERROR:", e)
"""


def error_from_device_use(**env):
    """What a process prints when its first tpu op fails (it must not crash)."""
    r = run_python(USE_THE_DEVICE, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout


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
    out = error_from_device_use(TORCH_TPU_PJRT_PLUGIN=str(bogus))
    assert "cannot load PJRT plugin" in out and str(bogus) in out


def test_plugin_path_to_a_shared_library_without_pjrt_is_a_clear_error():
    import ctypes.util

    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if not os.path.exists(libm):
        libm = ctypes.util.find_library("m")
    out = error_from_device_use(TORCH_TPU_PJRT_PLUGIN=libm)
    assert "is not a PJRT plugin" in out


def test_plugin_path_that_does_not_exist():
    out = error_from_device_use(TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert "no such file" in out


def test_unknown_platform_is_refused_with_the_choices():
    out = error_from_device_use(TORCH_TPU_PLATFORM="quantum")
    assert "expected one of" in out


def test_cpu_plugin_gets_512_bit_vectors_on_avx512_hosts_unless_the_user_chose():
    from torch_tpu._plugin import cpu_plugin_xla_flags

    assert cpu_plugin_xla_flags("", {"avx2", "avx512f"}) == "--xla_cpu_prefer_vector_width=512"
    assert cpu_plugin_xla_flags("--xla_dump_to=/d", {"avx512f"}) == "--xla_dump_to=/d --xla_cpu_prefer_vector_width=512"
    assert cpu_plugin_xla_flags("--xla_cpu_prefer_vector_width=256", {"avx512f"}) == "--xla_cpu_prefer_vector_width=256"
    assert cpu_plugin_xla_flags("", {"avx2", "fma"}) == ""


def test_importing_sets_the_cpu_plugin_flags_for_this_host():
    import torch_tpu
    from torch_tpu import _plugin

    r = run_python("import os, torch_tpu; print(repr(os.environ.get('XLA_FLAGS')))", XLA_FLAGS="")
    assert r.returncode == 0, r.stderr
    if torch_tpu._platform == "cpu" and "avx512f" in _plugin._host_cpu_flags():
        assert r.stdout.strip() == repr("--xla_cpu_prefer_vector_width=512")
    else:
        assert r.stdout.strip() in (repr(""), "None")
