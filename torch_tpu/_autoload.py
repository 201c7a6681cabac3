"""Target of PyTorch's `torch.backends` entry point: `import torch` loads
torch_tpu, so `device="tpu"` works without importing it by hand. Importing
this module has already run torch_tpu/__init__.py, which registers
everything."""


def load():
    pass
