"""`python -m torch_tpu.info`, the doctor: passes on a working setup, fails
with a fix on each broken one, never crashes. Each run is its own process."""

import ctypes
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

CAP_DAC_OVERRIDE = 1
PR_CAPBSET_DROP = 24


def run_doctor(*args, preexec_fn=None, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run(
        [sys.executable, "-m", "torch_tpu.info", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
        preexec_fn=preexec_fn,
    )


def check_lines(stdout, name):
    """The doctor's line for check `name` and its fix line, if any."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        fields = line.split()
        if len(fields) >= 2 and fields[1] == name and fields[0] in ("OK", "NOTE", "WARN", "FAIL"):
            fix = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].strip().startswith("fix:") else ""
            return fields[0], line, fix
    raise AssertionError(f"no {name} check in:\n{stdout}")


def private_cache(tmp_path, mode=0o700, name="cache"):
    directory = tmp_path / name
    directory.mkdir()
    directory.chmod(mode)
    return str(directory)


def test_doctor_passes_on_this_setup(tmp_path):
    r = run_doctor(TORCH_TPU_CACHE_DIR=private_cache(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    status, line, _ = check_lines(r.stdout, "plugin")
    assert status == "OK" and "runs a program" in line
    assert check_lines(r.stdout, "pjrt_api")[0] == "OK"
    status, line, _ = check_lines(r.stdout, "cache_dir")
    assert status in ("OK", "WARN") and "mode 0700, yours" in line  # WARN: a nearly full disk
    assert check_lines(r.stdout, "torch")[0] in ("OK", "WARN")  # WARN: torch reinstalled after the build
    assert "FAIL" not in r.stdout
    # The facts `python -m torch_tpu.info` always printed are still there.
    for fact in ("plugin:", "PJRT C API:", "devices:", "compilation cache:", "native ATen overloads:"):
        assert fact in r.stdout


def test_doctor_json_parses_and_agrees_with_the_exit_status(tmp_path):
    r = run_doctor("--json", TORCH_TPU_CACHE_DIR=private_cache(tmp_path))
    report = json.loads(r.stdout)
    assert report["ok"] is True and r.returncode == 0
    names = {c["name"]: c for c in report["checks"]}
    for name in ("plugin", "pjrt_api", "cache_dir", "cache_key", "xla_flags", "torch"):
        assert names[name]["status"] in ("OK", "NOTE", "WARN"), names[name]
    assert any(n.startswith("extra[") for n in names)
    assert report["facts"]["devices"] >= 1


def test_a_plugin_path_that_does_not_exist_fails_with_the_fix(tmp_path):
    r = run_doctor(TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so", TORCH_TPU_CACHE_DIR=private_cache(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "plugin")
    assert status == "FAIL" and "/nonexistent/plugin.so" in line
    assert "TORCH_TPU_PJRT_PLUGIN" in fix and "xla_cpu_pjrt.so" in fix  # names the default to fall back to
    assert check_lines(r.stdout, "pjrt_api")[0] == "NOTE"  # not checked, not failed twice


def test_a_plugin_path_to_a_file_that_is_not_a_library_fails_with_the_fix(tmp_path):
    bogus = tmp_path / "not_a_plugin.so"
    bogus.write_bytes(b"this is not an ELF file")
    r = run_doctor(TORCH_TPU_PJRT_PLUGIN=str(bogus), TORCH_TPU_CACHE_DIR=private_cache(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "plugin")
    assert status == "FAIL" and "cannot load PJRT plugin" in line
    assert f"ldd {bogus}" in fix


def test_an_xla_flag_that_aborts_the_plugin_fails_the_flags_check_not_the_doctor(tmp_path):
    r = run_doctor(XLA_FLAGS="--xla_no_such_flag=1", TORCH_TPU_CACHE_DIR=private_cache(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "xla_flags")
    assert status == "FAIL" and "--xla_no_such_flag=1" in line
    assert fix == "fix: remove --xla_no_such_flag=1 from XLA_FLAGS"
    assert check_lines(r.stdout, "plugin")[0] == "FAIL"


def test_a_group_writable_cache_directory_fails_with_the_fix(tmp_path):
    directory = private_cache(tmp_path, mode=0o770)
    r = run_doctor(TORCH_TPU_CACHE_DIR=directory)
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "cache_dir")
    assert status == "FAIL" and "mode 0770" in line
    assert fix.startswith(f"fix: chmod 700 {directory}")


def _drop_dac_override():
    # root writes through any mode; without this capability a mode 0500
    # directory is read-only to root too, as it is to any other user.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        os._exit(77)


def test_an_unwritable_cache_directory_fails_with_the_fix(tmp_path):
    directory = private_cache(tmp_path, mode=0o500)
    r = run_doctor(TORCH_TPU_CACHE_DIR=directory, preexec_fn=_drop_dac_override if os.geteuid() == 0 else None)
    if r.returncode == 77:
        pytest.skip("running as root without the right to drop CAP_DAC_OVERRIDE: root can write any directory")
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "cache_dir")
    assert status == "FAIL" and "not writable" in line and "mode 0500" in line
    assert fix == f"fix: chmod 700 {directory}"


def test_a_shared_directory_is_never_told_to_chmod(tmp_path):
    shared = private_cache(tmp_path, mode=0o777)
    (tmp_path / "cache" / "someone_elses_file").write_text("x")
    r = run_doctor(TORCH_TPU_CACHE_DIR=shared)
    status, _, fix = check_lines(r.stdout, "cache_dir")
    assert status == "FAIL" and "chmod" not in fix and "TORCH_TPU_CACHE_DIR" in fix


def test_a_key_file_others_can_read_fails_with_the_fix(tmp_path):
    key = tmp_path / "cache_key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    r = run_doctor(TORCH_TPU_CACHE_DIR=private_cache(tmp_path), TORCH_TPU_CACHE_KEY_FILE=str(key))
    assert r.returncode == 1, r.stdout + r.stderr
    status, line, fix = check_lines(r.stdout, "cache_key")
    assert status == "FAIL" and "0644" in line
    assert fix.startswith(f"fix: rm {key}")
    # A file that is not a key is never offered for removal.
    other = tmp_path / "notes.txt"
    other.write_text("not a key at all")
    other.chmod(0o644)
    r = run_doctor(TORCH_TPU_CACHE_DIR=private_cache(tmp_path, name="second"), TORCH_TPU_CACHE_KEY_FILE=str(other))
    status, _, fix = check_lines(r.stdout, "cache_key")
    assert status == "FAIL" and "rm" not in fix and "TORCH_TPU_CACHE_KEY_FILE" in fix
    assert other.read_text() == "not a key at all"


def test_extras_missing_are_notes_and_other_versions_are_warnings(monkeypatch):
    from torch_tpu import info

    monkeypatch.setattr(
        info,
        "declared_extras",
        lambda: {"absent": [("no-such-distribution-xyz", "1.0")], "skewed": [("torch", "0.0.1")]},
    )
    absent, skewed = info.check_extras()
    assert (absent.status, absent.detail, absent.fix) == ("NOTE", "not installed", "pip install 'torch_tpu[absent]'")
    # The distribution's version (a CUDA wheel's lacks torch.__version__'s "+cu132").
    installed = importlib.metadata.version("torch")
    assert skewed.status == "WARN" and f"torch {installed} (tested: 0.0.1)" in skewed.detail
    assert skewed.fix == "pip install torch==0.0.1"


def test_supported_torch_versions_are_the_documented_ones():
    from torch_tpu.info import torch_supported

    assert torch_supported("2.13.0+cpu") and torch_supported("2.14.1+cu130") and torch_supported("2.15.0")
    assert not torch_supported("2.12.1") and not torch_supported("2.13.1") and not torch_supported("2.16.0")


def test_the_torch_the_extension_was_linked_against_is_the_running_one():
    import torch

    from torch_tpu.info import built_against_torch

    directory, version = built_against_torch()
    assert os.path.realpath(directory) == os.path.dirname(os.path.realpath(torch.__file__))
    assert version == torch.__version__


def test_cache_size_counts_entries_and_those_of_earlier_versions_apart(tmp_path):
    from torch_tpu.info import cache_size

    (tmp_path / ("tt-" + "a" * 32 + ".xla")).write_bytes(b"x" * 10)
    (tmp_path / ("tt-" + "b" * 32 + ".mlir")).write_bytes(b"x" * 5)
    (tmp_path / ("c" * 32 + ".xla")).write_bytes(b"x" * 7)  # unkeyed, from before the tt- prefix
    (tmp_path / "notes.txt").write_bytes(b"x" * 100)
    assert cache_size(str(tmp_path)) == (2, 15, 1, 7)


def test_pjrt_api_skew_is_judged_as_the_loader_judges_it():
    from torch_tpu.info import ProbeResult, check_pjrt_api

    def loaded(plugin, built):
        info = {"pjrt_api_version": plugin, "pjrt_api_version_built": built}
        return ProbeResult({"loaded": {"info": info}}, 0, "")

    assert check_pjrt_api(loaded("0.81", "0.81")).status == "OK"
    assert check_pjrt_api(loaded("0.90", "0.81")).status == "OK"  # newer minor: a superset
    older = check_pjrt_api(loaded("0.75", "0.81"))
    assert older.status == "WARN" and "0.75" in older.detail and older.fix
    # The loader's refusal (csrc/pjrt/pjrt_runtime.cpp) names both versions.
    refused = ProbeResult(
        {
            "load_failed": {
                "error": "PJRT plugin '/p.so' implements PJRT C API 1.2, but torch_tpu was built against 0.81; "
                "the major versions must match"
            }
        },
        0,
        "",
    )
    result = check_pjrt_api(refused)
    assert result.status == "FAIL" and "plugin 1.2, torch_tpu's header 0.81" in result.detail


def test_glibcs_malloc_is_a_note_naming_a_preloadable_one_and_a_preloaded_one_is_ok(tmp_path):
    from torch_tpu import info

    found = info.preloadable_malloc()
    if info.malloc_in_use() == "glibc":
        check = info.check_malloc()
        assert check.status == "NOTE" and "glibc" in check.detail
        assert (f"LD_PRELOAD={found}" if found else "libtcmalloc-minimal4") in check.fix
    if found is None:
        pytest.skip("no tcmalloc or jemalloc installed to preload")
    r = run_doctor("--json", TORCH_TPU_CACHE_DIR=private_cache(tmp_path), LD_PRELOAD=found)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["malloc"]["status"] == "OK", checks["malloc"]
    assert ("tcmalloc" if "tcmalloc" in found else "jemalloc") in checks["malloc"]["detail"]
