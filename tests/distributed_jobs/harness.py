"""Runs a distributed job's named checks in every rank and records each one's outcome.

A job script (launched by torchrun from tests/distributed_launch.py) lists
checks with `@check`; `run_checks()` runs them in order on every rank and
writes `{name: "ok" | traceback}` to $DIST_RESULTS_DIR/rank<r>.json, so one
spawned job answers many pytest tests. Every rank runs the same checks in the
same order, so their collectives line up.
"""

import json
import os
import traceback

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def run_checks(rank):
    results = {}
    for fn in CHECKS:
        try:
            fn()
            results[fn.__name__] = "ok"
        except Exception:  # recorded for the test that asks for it
            results[fn.__name__] = traceback.format_exc()
    out = os.environ["DIST_RESULTS_DIR"]
    with open(os.path.join(out, f"rank{rank}.json.tmp"), "w") as f:
        json.dump(results, f)
    os.replace(os.path.join(out, f"rank{rank}.json.tmp"), os.path.join(out, f"rank{rank}.json"))
