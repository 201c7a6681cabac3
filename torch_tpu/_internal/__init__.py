"""Names PyTorch calls by TorchTPU's module paths (torch/_inductor/codegen/pallas.py
imports `torch_tpu._internal.pallas.tpu_torch_pallas`)."""
