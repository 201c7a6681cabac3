#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite on the XLA:CPU plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
