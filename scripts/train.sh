#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and trains the character-level GPT on tpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/train_gpt.py "$@"
