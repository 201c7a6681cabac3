#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and trains the character-level GPT on tpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The CPU plugin allocates and frees across its threads at every op, which
# glibc's malloc serves slowly: an installed tcmalloc is preloaded (the
# doctor's malloc check, docs/performance.md). TORCH_TPU_PRELOAD_MALLOC=0
# keeps glibc's.
if [ "${TORCH_TPU_PRELOAD_MALLOC:-1}" != 0 ] && [ -z "${LD_PRELOAD:-}" ]; then
  malloc=$(.venv/bin/python -c 'from torch_tpu.info import preloadable_malloc; print(preloadable_malloc() or "")' 2>/dev/null || true)
  if [ -n "$malloc" ]; then
    export LD_PRELOAD="$malloc"
  fi
fi
exec .venv/bin/python examples/train_gpt.py "$@"
