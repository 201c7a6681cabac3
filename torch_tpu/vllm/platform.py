"""vLLM's Platform for torch_tpu's `tpu` device.

What runs where: the model's weights, its activations and the paged KV
cache are tpu tensors, and every layer runs as torch_tpu ops; vLLM's
scheduler bookkeeping (input batch, block tables, slot mappings) and its
sampler stay on the host, as on vLLM's CPU platform, whose host-side pieces
(its C++ slot-mapping kernel, its worker's memory accounting) this platform
reuses. The step's token ids, positions and attention metadata cross to the
device once per step; the sampled rows' logits come back.
"""

import os

import torch
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import Platform, PlatformEnum
from vllm.utils.mem_constants import GiB_bytes
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

import torch_tpu  # noqa: F401  (registers the tpu device before vLLM makes torch.device("tpu"))

logger = init_logger(__name__)

ATTENTION_BACKEND = "torch_tpu.vllm.attention.TpuPagedAttentionBackend"
# vLLM looks a backend up by its name in every process; each resolves the platform first.
if "TORCH_TPU_PAGED" not in AttentionBackendEnum._member_map_:
    register_backend("TORCH_TPU_PAGED", ATTENTION_BACKEND)

# Bytes of paged KV cache when the user names none (`kv_cache_memory_bytes`):
# vLLM's CPU worker, whose accounting we keep, would otherwise reserve
# gpu_memory_utilization of the host's memory. Without it, the cache holds
# every sequence at full length (no preemption), up to MAX_DEFAULT_KV_CACHE_GIB:
# a step's cache writes still cost time linear in the cache's size
# (docs/serving.md), so a cache no larger than needed is a faster one.
KV_CACHE_GIB_ENV = "TORCH_TPU_VLLM_KV_CACHE_GIB"
MAX_DEFAULT_KV_CACHE_GIB = 1.0


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    # vLLM registers its custom ops (the attention op among them) for this key.
    dispatch_key: str = "PrivateUse1"
    # vLLM's process groups for one process: nothing is exchanged at
    # tensor_parallel_size 1 (docs/serving.md: tensor parallel is not wired).
    dist_backend: str = "gloo"
    device_control_env_var: str = "TORCH_TPU_VISIBLE_DEVICES"
    # vLLM compiles small host helpers with this backend; they run on CPU tensors.
    simple_compile_backend: str = "eager"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float32, torch.float16]

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype):
        if dtype not in (torch.bfloat16, torch.float32, torch.float16):
            raise ValueError(f"tpu does not serve models in {dtype}")

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        return f"tpu-{device_id}"

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.tpu.mem_get_info(device_id)[1]

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        return True

    @classmethod
    def supports_structured_output(cls) -> bool:
        # Grammar bitmasks apply to the host copy of the logits.
        return True

    @classmethod
    def check_runner_kv_caches_multi_layer(cls) -> None:
        pass

    @classmethod
    def import_kernels(cls) -> None:
        # The host-side bookkeeping runs vLLM's CPU kernels.
        CpuPlatform.import_kernels()

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        CpuPlatform.register_triton_kernel_overrides()

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads: int | None = None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError("tpu serves multi-head and grouped-query attention only (no MLA, no sparse)")
        if selected_backend is not None:
            logger.info("tpu has one attention backend; %s is not used.", selected_backend)
        return ATTENTION_BACKEND

    @staticmethod
    def _default_kv_cache_bytes(vllm_config) -> int:
        if KV_CACHE_GIB_ENV in os.environ:
            return int(float(os.environ[KV_CACHE_GIB_ENV]) * GiB_bytes)
        model_config = vllm_config.model_config
        if model_config is None:
            return int(MAX_DEFAULT_KV_CACHE_GIB * GiB_bytes)
        parallel_config = vllm_config.parallel_config
        layers = model_config.get_num_layers(parallel_config)
        heads = model_config.get_num_kv_heads(parallel_config)
        per_token = 2 * layers * heads * model_config.get_head_size() * model_config.dtype.itemsize
        block = vllm_config.cache_config.block_size
        # Whole blocks for every sequence, and vLLM's null block.
        blocks = vllm_config.scheduler_config.max_num_seqs * -(-model_config.max_model_len // block) + 1
        return min(blocks * block * per_token, int(MAX_DEFAULT_KV_CACHE_GIB * GiB_bytes))

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode, CUDAGraphMode

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = 16
        if cache_config.kv_cache_memory_bytes is None:
            cache_config.kv_cache_memory_bytes = cls._default_kv_cache_bytes(vllm_config)

        # The model runs eagerly as torch_tpu ops: each op's program is
        # compiled once per shape and replayed from the compilation cache.
        compilation_config = vllm_config.compilation_config
        compilation_config.mode = CompilationMode.NONE
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        compilation_config.cudagraph_capture_sizes = []

        vllm_config.scheduler_config.async_scheduling = False

        parallel_config = vllm_config.parallel_config
        if parallel_config.world_size > 1:
            raise NotImplementedError("tpu serves with tensor_parallel_size=1 and pipeline_parallel_size=1")
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "torch_tpu.vllm.worker.TpuWorker"
        # A forked engine process would inherit the parent's PJRT client.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
