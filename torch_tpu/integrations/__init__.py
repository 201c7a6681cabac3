"""Integrations with libraries that place models on devices by name, made
at `import torch_tpu` without editing them: each hooks a library when (and
only if) the program imports it, so importing torch_tpu stays cheap.

- accelerate (and transformers through it): `from_pretrained(...,
  device_map="auto")`, `max_memory={"tpu": "10GiB", "cpu": ...}`,
  `infer_auto_device_map` and `dispatch_model` place layers on tpu
  (`torch_tpu/integrations/accelerate.py`).
- accelerate's torch.compile backends: `torch_compile_backend="tpu"`
  (`torch_tpu/integrations/accelerate_dynamo.py`).
- accelerate's fp16 mixed precision: `mixed_precision="fp16"`
  (`TrainingArguments(fp16=True)`) trains under float16 autocast with a
  tpu GradScaler, as on CUDA (`torch_tpu/integrations/accelerate_fp16.py`).
- accelerate's process state (and transformers' `Trainer` through it): a
  script trains on tpu by itself, and under torchrun over `tpu_dist`
  (`torch_tpu/integrations/accelerate_state.py`).
- transformers' Trainer: its checkpoints keep the tpu generators' state, so
  a resumed run repeats the uninterrupted one's dropout
  (`torch_tpu/integrations/transformers_trainer.py`).
- torchvision: its operators (nms, roi_align, deform_conv2d...) on tpu, and
  on CPU where its C++ extension cannot load, so `import torchvision` and
  its models work next to the CPU torch wheel
  (`torch_tpu/integrations/torchvision_ops.py`).
- fbgemm_gpu (and TorchRec through it): its jagged operators on tpu
  (`torch_tpu/integrations/fbgemm.py`).
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys

# module name -> functions(module) patching it right after it executes
_post_import_hooks = {}


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a hooked module it wraps the real loader
    so the hook runs once the module has executed, before the importer
    (e.g. a package's `from .modeling import get_max_memory`) binds names
    from it."""

    def find_spec(self, name, path, target=None):
        hooks = _post_import_hooks.get(name)
        if hooks is None:
            return None
        sys.meta_path.remove(self)  # find the real spec without finding ourselves
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_hook(module):
            exec_module(module)
            for hook in hooks:
                hook(module)

        loader.exec_module = exec_then_hook
        return spec


def _still_executing(module):
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _after_body(module, hook):
    """Runs hook(module) once `module`, whose body is executing now, has
    finished importing: importlib clears its spec's `_initializing` then (in
    `_load_unlocked`'s finally), so the spec's class becomes a subclass
    that notices. A module whose body raised is gone from sys.modules by
    then and gets no hook. (A profile or trace function would see the
    body's return too, but would displace cProfile's or coverage's.)"""
    spec = module.__spec__
    if type(spec) is not _SpecWithHooks:
        spec.__class__ = _SpecWithHooks
        spec._hooks_after_body = []
    spec._hooks_after_body.append(hook)


class _SpecWithHooks(importlib.machinery.ModuleSpec):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name != "_initializing" or value:
            return
        hooks = self.__dict__.pop("_hooks_after_body", [])
        self.__class__ = importlib.machinery.ModuleSpec
        module = sys.modules.get(self.name)
        if module is not None and module.__spec__ is self:
            for hook in hooks:
                hook(module)


def _when_imported(name, hook):
    """Runs hook(module) now if `name` is imported, else right after it is.

    `import accelerate` before torch imports torch from inside
    accelerate.accelerator's body, and torch's backend autoload imports us
    there: the module is in sys.modules but defines nothing yet (no
    Accelerator), so its hooks wait until its import finishes."""
    module = sys.modules.get(name)
    if module is not None and _still_executing(module):
        _after_body(module, hook)
        return
    if module is not None:
        hook(module)
        return
    _post_import_hooks.setdefault(name, []).append(hook)
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


def install():
    from . import (
        accelerate,
        accelerate_dynamo,
        accelerate_fp16,
        accelerate_state,
        fbgemm,
        torchvision_ops,
        transformers_trainer,
    )

    accelerate.install(_when_imported)
    accelerate_dynamo.install(_when_imported)
    accelerate_fp16.install(_when_imported)
    accelerate_state.install(_when_imported)
    fbgemm.install(_when_imported)
    transformers_trainer.install(_when_imported)
    torchvision_ops.install(_when_imported)
