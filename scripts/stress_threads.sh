#!/usr/bin/env bash
# Runs the thread stress test (tests/runtime/test_threads.py, 4 threads mixing
# Strict, DeferAndFuse, Debug, compiled graphs, syncs and mode switches)
# N times in a row, each in a fresh process; stops at the first failure.
# Usage: bash scripts/stress_threads.sh [N=20] [seconds per run=4]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
runs=${1:-20}
export TORCH_TPU_STRESS_SECONDS=${2:-4}
for i in $(seq 1 "$runs"); do
  .venv/bin/python -m pytest -q -n 0 -p no:logging tests/runtime/test_threads.py \
    -k test_many_threads_mixing_modes_compiled_graphs_syncs_and_shared_tensors >/tmp/torch_tpu_stress.log 2>&1 ||
    { tail -40 /tmp/torch_tpu_stress.log; echo "run $i of $runs failed"; exit 1; }
  echo "run $i of $runs passed"
done
echo "$runs passed in a row"
