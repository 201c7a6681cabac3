#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite on the XLA:CPU plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
# TORCH_VERSION=2.15.0: the suite against another torch, in a copy of the
# tree with its own venv and build (scripts/torch_version.sh).
if [ -n "${TORCH_VERSION:-}" ] && ! grep -qx "torch==$TORCH_VERSION" requirements.txt; then
  exec bash scripts/torch_version.sh "$TORCH_VERSION" "$@"
fi
bash scripts/setup.sh
# One pytest worker per core, at most 4 (each holds its own XLA client and
# compiles its own programs; the disk cache is shared and safe between
# processes). Most of the suite's time is XLA compiling small programs, one
# core at a time, so two workers on two cores take ~0.6x the time of one.
# `bash scripts/test.sh -n 0` runs in one process.
workers=$(nproc); [ "$workers" -gt 4 ] && workers=4
exec .venv/bin/python -m pytest -q -n "$workers" "$@"
