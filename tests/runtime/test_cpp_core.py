"""The C++ tests of the layers below the device (tests/cpp/: hlo/ as text,
pjrt/ against the plugin the suite runs on, runtime/'s SHA-256 and HMAC
against their published vectors), built by scripts/setup.sh as
build/core_tests. A missing binary is a failed build, not a skipped test."""

import os
import subprocess

import pytest
from repo_paths import ROOT

from torch_tpu._plugin import find_plugin

BINARY = os.path.join(ROOT, "build", "core_tests")


def run_core_tests(prefix):
    assert os.path.isfile(BINARY), f"{BINARY} is missing: build it with `bash scripts/setup.sh`"
    _, plugin, error = find_plugin()
    assert not error, error
    result = subprocess.run([BINARY, "--pjrt-plugin", plugin, prefix], capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"core_tests {prefix} failed:\n{output}"
    return result.stdout


@pytest.mark.parametrize("group", ["hlo", "pjrt", "runtime"])
def test_core_tests_pass(group):
    out = run_core_tests(group + ".")
    ran = [line.split()[1] for line in out.splitlines() if line.startswith("ok ")]
    assert ran and all(name.startswith(group + ".") for name in ran), out
    assert out.rstrip().endswith(f"{len(ran)} passed, 0 failed"), out
