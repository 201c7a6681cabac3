"""`python scripts/op_coverage.py`: the OpInfo sweep,
scripts/sweeps/op_coverage.py; its docstring says how it runs."""

from sweeps import op_coverage

if __name__ == "__main__":
    op_coverage.main()
