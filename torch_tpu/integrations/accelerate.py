"""accelerate's big-model placement on tpu.

accelerate (1.15) finds accelerator memory through a fixed list of device
modules (torch.npu, torch.mlu, ..., torch.cuda) and so, on a machine whose
accelerator is tpu, `device_map="auto"` sees no device and silently keeps
every layer on CPU. Here its `get_max_memory` (used by `get_balanced_memory`,
`infer_auto_device_map` and transformers' `from_pretrained`) learns the tpu
devices, as it knows CUDA's: integer keys are device indices with their free
memory (`torch.tpu.mem_get_info`), then "cpu" (and "disk" when given).
Integer placements then land on tpu because `torch.device(0)` is the
current accelerator's device, tpu:0. A user's `max_memory` may name devices
"tpu", "tpu:1", torch.device("tpu", 1) or by index.

Only when tpu is the current accelerator; otherwise accelerate's own
function runs unchanged.
"""

import functools

import torch


def tpu_is_the_accelerator():
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def _device_index(key):
    """A max_memory key naming a tpu device -> its index; other keys as they are."""
    if isinstance(key, torch.device) or (isinstance(key, str) and key.split(":")[0] == "tpu"):
        device = torch.device(key)
        if device.type == "tpu":
            return device.index or 0
    return key


def _tpu_max_memory(max_memory, convert_file_size_to_int):
    import psutil

    if max_memory is None:
        memory = {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}
        memory["cpu"] = psutil.virtual_memory().available
        return memory
    # Sizes given as strings are converted in the caller's dict, as
    # accelerate does: transformers compares them with numbers afterwards.
    for key, value in max_memory.items():
        if isinstance(value, str):
            max_memory[key] = convert_file_size_to_int(value)
    memory = {}
    for key, value in max_memory.items():
        index = _device_index(key)
        if isinstance(index, int) and not 0 <= index < torch.tpu.device_count():
            raise ValueError(
                f"Device {key} is not available, available devices are {list(range(torch.tpu.device_count()))}"
            )
        memory[index] = value
    unknown = [k for k in memory if not isinstance(k, int) and k not in ("mps", "cpu", "disk")]
    if unknown:
        raise ValueError(
            f"Device {unknown[0]} is not recognized, available devices are integers(for GPU/XPU), 'mps', 'cpu' and 'disk'"  # noqa: E501 (accelerate's own words)
        )
    # accelerate fills devices in this order: accelerators by index first.
    order = sorted(k for k in memory if isinstance(k, int)) + [k for k in ("mps", "cpu", "disk") if k in memory]
    return {k: memory[k] for k in order}


def _patched(original, convert_file_size_to_int):
    if getattr(original, "_torch_tpu", False):
        return original

    @functools.wraps(original)
    def get_max_memory(max_memory=None):
        if not tpu_is_the_accelerator():
            return original(max_memory)
        return _tpu_max_memory(max_memory, convert_file_size_to_int)

    get_max_memory._torch_tpu = True
    return get_max_memory


def _patch_modeling(modeling):
    modeling.get_max_memory = _patched(modeling.get_max_memory, modeling.convert_file_size_to_int)


def _patch_reexport(attribute):
    def hook(m):
        import accelerate.utils.modeling as modeling

        if hasattr(m, attribute):
            setattr(m, attribute, modeling.get_max_memory)

    return hook


def install(when_imported):
    # The function itself, then the names bound to it before we could patch
    # (when accelerate or transformers were imported before torch_tpu).
    when_imported("accelerate.utils.modeling", _patch_modeling)
    when_imported("accelerate.utils", _patch_reexport("get_max_memory"))
    when_imported("transformers.integrations.accelerate", _patch_reexport("accelerate_max_memory"))
