"""The sweeps that write the ledgers in docs/, each run by its launcher in
scripts/ (`python scripts/model_zoo.py ...`) and imported by its tests as
`from sweeps import model_zoo` (pytest's pythonpath holds scripts/):

- model_zoo: torchvision's and timm's models (docs/model_zoo.md);
- hf_coverage: every transformers architecture, built tiny (docs/hf_coverage.md);
- hf_model_tests: transformers' own model tests (docs/hf_model_tests.md);
- op_coverage: PyTorch's OpInfo database (docs/op_coverage.md).

What model_zoo and hf_coverage share, once: running each item in a
subprocess with a timeout (child_process), its records as JSON lines
(jsonl_records), the report's cells and tables, read back by --merge
(report), what a check comes to and what counts as passed or excluded
(outcomes), comparing with CPU against float64 (accuracy), and the command
line (command_line)."""
