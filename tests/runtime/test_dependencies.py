"""`pip install torch_tpu[hf]` (or `[jax]`, `[ray]`, `[rec]`, `[titan]`, `[vision]`) installs what the test setup
installs: each extra of pyproject.toml pins each package at requirements.txt's
version, and that is the version the tests run against."""

import importlib.metadata
import os
import re

import pytest
import tomllib
from repo_paths import ROOT


def _pins(lines):
    pins = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)(?:\[[\w,.-]+\])?==([^\s#]+)\s*(#.*)?", line.strip())
        if match:
            pins[match[1].lower()] = match[2]
    return pins


@pytest.mark.parametrize("name", ["hf", "jax", "ray", "rec", "titan", "vision", "vllm"])
def test_extra_pins_the_versions_the_tests_install(name):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"][name]
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        required = _pins(f)
    pinned = _pins(extra)
    assert len(pinned) == len(extra), f"every [{name}] requirement is pinned: {extra}"
    for package, version in pinned.items():
        assert required.get(package) == version, (
            f"{package}: [{name}] {version}, requirements.txt {required.get(package)}"
        )
        assert importlib.metadata.version(package) == version, package
