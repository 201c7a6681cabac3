"""The op fuzz: seeded, mutated calls of common ops (calls.py) run on CPU and
on tpu in Strict, DeferAndFuse and compiled, compared call by call, in
crash-isolating subprocess batches (runner.py). tests/ops/test_fuzz.py runs it in
the suite; `python scripts/fuzz_ops.py --calls N --seed S` runs longer."""
