"""The op fuzz, longer than the suite runs it: mutated calls of common ops on
CPU and on tpu in Strict, DeferAndFuse and compiled, compared call by call.

    python scripts/fuzz_ops.py --calls 5000 --seed 7

prints the per-mode table (calls, same exception type, same value, other
type, raised where CPU computes, silent differences, late errors, crashes,
hangs) and every difference with the call that shows it; exits 1 if any.
The calls and their mutations: tests/fuzz/calls.py; the runner and the
allowed differences: tests/fuzz/runner.py; the suite's run: tests/ops/test_fuzz.py.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from fuzz import runner  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100, help="calls per worker process")
    parser.add_argument("--workers", type=int, default=2, help="worker processes at once")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a worker may run")
    parser.add_argument("--modes", default=",".join(runner.MODES))
    args = parser.parse_args()
    report = runner.run(
        args.seed, args.calls, args.batch, args.workers, args.timeout, modes=tuple(args.modes.split(","))
    )
    print(report.table())
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
