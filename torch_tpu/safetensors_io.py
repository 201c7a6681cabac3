"""Loading safetensors files onto tpu.

Saving needs nothing of ours: `safetensors.torch.save_file` and `save_model`
copy tpu tensors to the host (`tensor.to("cpu")`) like any device's. Loading
does: safetensors 0.8 parses `device=` itself and knows no PrivateUse1 device
(`load_file(path, device="tpu")` raises "device tpu is invalid"). So:

    tensors = torch_tpu.load_safetensors("model.safetensors")   # a dict of tpu tensors
    safetensors.torch.load_model(model, "model.safetensors")    # a model already on tpu: works as is
                                                                # (load_state_dict copies into its tensors)

The file is validated by safetensors itself (its errors for a bad header or a
truncated file), then mapped into memory copy-on-write, and each tensor is
uploaded straight from the mapping: no host copy beyond reading the file.
"""

import json
import mmap
import struct
import sys

import torch

_DTYPES = {
    "BOOL": torch.bool,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "U16": torch.uint16,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I32": torch.int32,
    "U32": torch.uint32,
    "F32": torch.float32,
    "F64": torch.float64,
    "I64": torch.int64,
    "U64": torch.uint64,
    "C64": torch.complex64,
}


def load_safetensors(path, device="tpu"):
    """Every tensor of a safetensors file, on `device` (a dict name -> tensor)."""
    from safetensors import safe_open

    device = torch.device(device)
    with safe_open(path, framework="pt") as f:  # raises safetensors' own errors for a bad file
        names = list(f.keys())
    if sys.byteorder != "little":
        raise NotImplementedError("torch_tpu.load_safetensors: big-endian hosts are not supported")
    result = {}
    with open(path, "rb") as file:
        header_len = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(header_len))
        base = 8 + header_len
        size = file.seek(0, 2)
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY) if size > 0 else None
    for name in names:
        info = header[name]
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise TypeError(f"torch_tpu.load_safetensors: {name} has dtype {info['dtype']}, which tpu does not hold")
        start, stop = info["data_offsets"]
        shape = info["shape"]
        if stop == start:
            result[name] = torch.empty(shape, dtype=dtype, device=device)
            continue
        host = torch.frombuffer(mapped, dtype=dtype, count=(stop - start) // dtype.itemsize, offset=base + start)
        result[name] = host.reshape(shape).to(device)
    # Each upload copied its bytes during the call (the device holds its own
    # buffers); the mapping closes when the last host view of it dies.
    return result
