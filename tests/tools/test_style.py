"""The tree stays formatted as it was once applied: C++ by .clang-format,
Python by ruff's linter and formatter (pyproject.toml). The tools are pinned
in requirements.txt, so every machine formats alike."""

import os
import subprocess
import sys

from repo_paths import ROOT

BIN = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(BIN, name)
    assert os.path.exists(path), f"{name} is missing from the venv: run scripts/setup.sh (requirements.txt pins it)"
    return path


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_cpp_sources_match_clang_format():
    files = tracked("*.cpp", "*.cc", "*.h")
    assert files
    result = subprocess.run(
        [tool("clang-format"), "--dry-run", "--Werror", *files], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, "run clang-format -i on these:\n" + result.stderr[-4000:]


def test_python_passes_ruff_lint():
    result = subprocess.run([tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]


def test_python_matches_ruff_format():
    result = subprocess.run(
        [tool("ruff"), "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, "run ruff format on these:\n" + result.stdout[-4000:]
