"""Which PJRT plugin backs the `tpu` device.

`TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so` wins; otherwise
`TORCH_TPU_PLATFORM=cpu|cuda|tpu` picks a plugin package; by default libtpu
where a TPU is present, the CUDA plugin where an NVIDIA GPU is, otherwise the
XLA:CPU plugin (package `xla-cpu-pjrt`), which every test uses.
"""

import glob
import importlib.util
import os

# package, file inside it, pip name
_PLUGINS = {
    "tpu": ("libtpu", "libtpu.so", "libtpu"),
    "cuda": ("jax_plugins.xla_cuda13", "xla_cuda_plugin.so", "jax-cuda13-pjrt"),
    "cpu": ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so", "xla-cpu-pjrt"),
}


def _package_file(package, filename):
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, filename)
        if os.path.isfile(path):
            return path
    return None


def _has_tpu():
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def _has_nvidia_gpu():
    return os.path.exists("/dev/nvidiactl") or bool(glob.glob("/dev/nvidia[0-9]*"))


def find_plugin():
    """Returns (platform, path, error): error is a message when no plugin fits."""
    explicit = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if explicit:
        if not os.path.isfile(explicit):
            return "custom", "", f"TORCH_TPU_PJRT_PLUGIN={explicit!r}: no such file"
        return "custom", explicit, ""
    platform = os.environ.get("TORCH_TPU_PLATFORM", "").strip().lower()
    if platform and platform not in _PLUGINS:
        return platform, "", f"TORCH_TPU_PLATFORM={platform!r}: expected one of {', '.join(_PLUGINS)}"
    if not platform:
        platform = "cpu"
        if _has_tpu() and _package_file(*_PLUGINS["tpu"][:2]):
            platform = "tpu"
        elif _has_nvidia_gpu() and _package_file(*_PLUGINS["cuda"][:2]):
            platform = "cuda"
    package, filename, pip_name = _PLUGINS[platform]
    path = _package_file(package, filename)
    if path is None:
        return (
            platform,
            "",
            (
                f"torch_tpu: no PJRT plugin for platform '{platform}' is installed. "
                f"Install it with `pip install {pip_name}`, or point TORCH_TPU_PJRT_PLUGIN at a plugin .so."
            ),
        )
    return platform, path, ""


def num_devices():
    # Under torchrun each process calls torch.tpu.set_device(local_rank), as
    # with CUDA; on the CPU plugin that needs one device per local rank.
    value = os.environ.get("TORCH_TPU_NUM_DEVICES", os.environ.get("LOCAL_WORLD_SIZE", "1"))
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"TORCH_TPU_NUM_DEVICES={value!r} is not an integer") from None
    if n < 1:
        raise ValueError(f"TORCH_TPU_NUM_DEVICES must be at least 1, got {n}")
    return n


# XLA:CPU flags the `cpu` plugin runs better with on this host. XLA's CPU
# fusions are compiled for 256-bit vectors unless told otherwise; on hosts
# with AVX-512, 512-bit vectors made the GPT example's compiled training step
# (model and optimizer) 4-10% faster: 32.4/33.2/31.9 against 38.3/36.7/35.1
# ms per step in a loop, 29.1/28.4 against 27.3/27.8 steps/s in
# benchmarks/compile.py, runs interleaved. A user's own setting of a flag in
# XLA_FLAGS wins.
def cpu_plugin_xla_flags(xla_flags, cpu_flags):
    """XLA_FLAGS for the XLA:CPU plugin: `xla_flags` plus our tuning for a
    host whose /proc/cpuinfo flags are `cpu_flags`."""
    extra = []
    if "avx512f" in cpu_flags and "xla_cpu_prefer_vector_width" not in xla_flags:
        extra.append("--xla_cpu_prefer_vector_width=512")
    return " ".join([xla_flags] + extra if xla_flags else extra)


def _host_cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def tune_xla_flags(platform):
    """Sets XLA_FLAGS for `platform`'s plugin before it compiles anything (the
    plugin reads them at its first compilation; they are part of every
    compilation cache key)."""
    if platform != "cpu":
        return
    flags = cpu_plugin_xla_flags(os.environ.get("XLA_FLAGS", ""), _host_cpu_flags())
    if flags:
        os.environ["XLA_FLAGS"] = flags
