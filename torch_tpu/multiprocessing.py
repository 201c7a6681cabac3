"""tpu tensors through torch.multiprocessing, as host copies.

A PJRT buffer has no handle another process can open (what CUDA IPC gives
CUDA tensors), so a tpu tensor, Parameter or storage that multiprocessing
pickles (a Queue's put, a spawned Process's arguments) travels as a copy of
its bytes inside the pickle, and the receiving process rebuilds it on the
same tpu device index, keeping the class and requires_grad. The two sides
then hold separate copies: a write on one is not seen by the other, unlike
CUDA tensors shared through IPC.

The bytes travel inline, not as a CPU tensor in shared memory: that would
hand the receiver a file descriptor of a host copy nothing keeps alive once
pickled (a spawned Process's arguments reach the child after the pickling).

torch's own reducer would ask the tpu storage for a shared-memory file
descriptor; that raises in the Queue's feeder thread, which only prints it,
and the item never arrives.
"""

from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing.reductions as _torch_reductions


def _host_bytes(cpu_tensor):
    values = cpu_tensor.resolve_conj().resolve_neg().contiguous()
    return values.reshape(-1).view(torch.uint8).numpy().tobytes()


def _from_host_bytes(raw, dtype, shape):
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


def _rebuild_tpu_tensor(cls, raw, dtype, shape, device_index, requires_grad):
    t = _from_host_bytes(raw, dtype, shape).to(torch.device("tpu", device_index))
    if cls is torch.nn.Parameter:
        # Parameter's constructor takes requires_grad, so integer Parameters
        # (which cannot require grad) rebuild too.
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def _reduce_tensor(tensor):
    if tensor.device.type != "tpu" or tensor.layout != torch.strided or (tensor.requires_grad and not tensor.is_leaf):
        # torch's reducer: CPU and CUDA tensors, and its error for a
        # non-leaf that requires grad (autograd cannot cross processes).
        return _torch_reductions.reduce_tensor(tensor)
    torch.utils.hooks.warn_if_has_hooks(tensor)
    raw = _host_bytes(tensor.detach().cpu())
    args = (type(tensor), raw, tensor.dtype, tuple(tensor.shape), tensor.device.index, tensor.requires_grad)
    return (_rebuild_tpu_tensor, args)


def _rebuild_tpu_storage(raw, device_index):
    device = torch.device("tpu", device_index)
    if not raw:
        return torch.UntypedStorage(0, device=device)
    return _from_host_bytes(raw, torch.uint8, (len(raw),)).untyped_storage().to(device=device)


def _reduce_storage(storage):
    if storage.device.type != "tpu":
        return _torch_reductions.reduce_storage(storage)
    raw = _host_bytes(torch.empty(0, dtype=torch.uint8).set_(storage.cpu()))
    return (_rebuild_tpu_storage, (raw, storage.device.index))


def install():
    """Registers the tpu reducers after torch's own (init_reductions, run when
    torch.multiprocessing is imported), which they replace for these types
    and call for every other device."""
    for cls in (torch.Tensor, torch.nn.Parameter):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
