"""`python scripts/hf_model_tests.py`: transformers' own model tests on tpu
against CPU, scripts/sweeps/hf_model_tests.py; its docstring says how it runs."""

from sweeps import hf_model_tests

if __name__ == "__main__":
    hf_model_tests.main()
