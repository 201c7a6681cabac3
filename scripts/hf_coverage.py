"""`python scripts/hf_coverage.py`: the Hugging Face coverage sweep (every
transformers architecture, tiny, on tpu against CPU),
scripts/sweeps/hf_coverage.py; its docstring says how it runs."""

from sweeps import hf_coverage

if __name__ == "__main__":
    hf_coverage.main()
