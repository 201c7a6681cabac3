"""tpu tensors through torch.multiprocessing, as host copies.

A PJRT buffer has no handle another process can open (what CUDA IPC gives
CUDA tensors), so a tpu tensor, Parameter or storage that is pickled by
multiprocessing (a Queue's put, a spawned Process's arguments) travels as a
CPU copy of its values, itself in shared memory as any CPU tensor, and the
receiving process rebuilds it on the same tpu device index, keeping the
class and requires_grad. The two sides then hold separate copies: a write on
one is not seen by the other, unlike CUDA tensors shared through IPC.

torch's own reducer would ask the tpu storage for a shared-memory file
descriptor; that raises in the Queue's feeder thread, which only prints it,
and the item never arrives.
"""

from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing.reductions as _torch_reductions


def _rebuild_tpu_tensor(cls, host, device_index, requires_grad):
    t = host.to(torch.device("tpu", device_index))
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
    host = tensor.detach().cpu()
    return (_rebuild_tpu_tensor, (type(tensor), host, tensor.device.index, tensor.requires_grad))


def _rebuild_tpu_storage(host, device_index):
    return host.to(device=torch.device("tpu", device_index))


def _reduce_storage(storage):
    if storage.device.type != "tpu":
        return _torch_reductions.reduce_storage(storage)
    return (_rebuild_tpu_storage, (storage.cpu(), storage.device.index))


def install():
    """Registers the tpu reducers after torch's own (init_reductions, run when
    torch.multiprocessing is imported), which they replace for these types
    and call for every other device."""
    for cls in (torch.Tensor, torch.nn.Parameter):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
