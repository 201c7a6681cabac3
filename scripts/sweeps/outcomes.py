"""What a sweep's check can come to, and what counts as passed or excluded.

A check passes, passes in float64 only (PassInFloat64), has wrong values
(WrongValues), stops at a missing op (named), or raises an error (named); an
item that cannot be built (CannotBuild, or any failure to build) is excluded
from the pass rate. A record's results are {check: (outcome, detail)}, with
"build" for an item that did not build and "process" for one whose
subprocess died, timed out or passed its memory limit."""

import re


class WrongValues(Exception):
    pass


class PassInFloat64(Exception):
    """A check agrees in float64 where float32 rounding did not (train), or
    tpu's float32 result is as near a float64 reference as CPU's."""


class CannotBuild(Exception):
    pass


_MISSING_OP = re.compile(r"operator '([\w:.]+)' is not currently implemented")
_NO_LOWERING = re.compile(r"graph uses ([\w:., ]+), which has no tpu lowering")


def outcome(err):
    """An exception as (outcome, detail)."""
    if isinstance(err, WrongValues):
        return "wrong values", str(err)[:300]
    text = f"{type(err).__name__}: {err}"
    missing = _MISSING_OP.search(text) or _NO_LOWERING.search(text)
    if missing:
        return "missing op", missing.group(1)
    return "error", text.splitlines()[0][:300] if text else type(err).__name__


def run_check(step):
    """Runs one check, step(), as (outcome, detail)."""
    try:
        step()
    except PassInFloat64 as note:
        return "pass", f"in float64 ({note})"[:300]
    except Exception as err:  # noqa: BLE001  (every failure of a check is its outcome)
        return outcome(err)
    return "pass", ""


def not_built(err, why="cannot build"):
    """The results of an item that failed to build with `err`."""
    return {"build": (why, f"{type(err).__name__}: {err}".splitlines()[0][:300])}


def passed(record):
    return all(o == "pass" for o, _ in record["results"].values())


def excluded(record):
    return "build" in record["results"]


def status(record):
    """A record's word on the progress line."""
    return "pass" if passed(record) else ("excluded" if excluded(record) else "FAIL")
