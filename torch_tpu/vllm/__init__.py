"""vLLM on tpu: a platform plugin (entry point group `vllm.platform_plugins`,
name `torch_tpu`), its worker and model runner, and a paged attention
backend written as torch_tpu ops. docs/serving.md says what works.

vLLM calls `register()` in every process that resolves its platform; the
import of vLLM's classes waits until vLLM asks for the platform class."""

import os


def register():
    """The qualified name of our Platform class, or None to leave the choice to vLLM.

    TORCH_TPU_VLLM=0 turns the plugin off (vLLM then picks its own platform:
    CPU here, or its JAX `tpu` platform where libtpu is installed). Our entry
    point is named `torch_tpu`, not `tpu`, so vLLM never takes it for its
    built-in `tpu` plugin."""
    if os.environ.get("TORCH_TPU_VLLM", "1") == "0":
        return None
    return "torch_tpu.vllm.platform.TpuPlatform"
