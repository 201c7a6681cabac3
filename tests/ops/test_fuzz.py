"""The op fuzz in the suite: 1,000 seeded, mutated calls of common ops
(tests/fuzz/calls.py: wrong dtypes, mismatched and zero-size shapes, negative
and overflowing sizes, out-of-range and NaN-holding indices, CPU/tpu mixes,
non-contiguous inputs), each run on CPU and on tpu in Strict, DeferAndFuse
and compiled, in crash-isolating worker processes (tests/fuzz/runner.py).

It fails on any crash, hang, silently different value (a value where CPU
raises, or other values) or error raised later than the call that made it,
and when fewer than 99% of the calls that raise raise CPU's exception type
(or one tests/fuzz/runner.py ALLOWED_DIFFERENCES lists with its reason).
`pytest -s` prints the per-mode table; `python scripts/fuzz_ops.py --calls N
--seed S` runs a longer fuzz."""

import os

import pytest
import torch
from fuzz import calls, runner

SEED = 0
CALLS = 1000


@pytest.fixture(scope="module")
def report():
    # A worker runs 100 calls in three modes; 600 s is a hang guard on a cold cache.
    result = runner.run(SEED, CALLS, batch=100, workers=2, timeout=600)
    print("\n" + result.table())
    return result


def test_every_call_ran_in_every_mode(report):
    for mode in runner.MODES:
        assert sum(report.counts(mode).values()) == CALLS, report.table()


def test_no_call_crashes_hangs_or_differs_silently(report):
    bad = report.failures(("crash", "hang", "silent", "late"))
    assert not bad, report.table()


def test_exception_types_agree_with_cpu(report):
    for mode in runner.MODES:
        assert report.agreement(mode) >= 0.99, report.table()


def test_calls_are_reproducible_from_their_seed():
    for index in (0, 17, 640):
        a, b = calls.make_call(SEED, index), calls.make_call(SEED, index)
        assert a.describe() == b.describe()
        for x, y in zip(a.args, b.args):
            if isinstance(x, calls.Arg):
                torch.testing.assert_close(x.values, y.values, rtol=0, atol=0, equal_nan=True)
    assert calls.make_call(SEED, 5).describe() != calls.make_call(SEED + 1, 5).describe()


def test_the_calls_cover_the_ops_and_every_mutation():
    made = [calls.make_call(SEED, i) for i in range(CALLS)]
    assert len({c.op for c in made}) >= 60
    assert {c.mutation for c in made} == set(calls.MUTATIONS)


def test_a_crash_is_named_and_the_other_calls_still_run():
    # The worker kills itself (SIGSEGV) when it starts call 2.
    env = dict(os.environ, TORCH_TPU_FUZZ_CRASH_AT="2")
    result = runner.run(SEED, 5, batch=5, workers=1, timeout=300, modes=("strict",), env=env)
    assert result.results[(2, "strict")][0] == "crash"
    for index in (0, 1, 3, 4):
        assert result.results[(index, "strict")][0] not in ("crash", "hang")
