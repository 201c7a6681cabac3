"""`python -m torch_tpu.info`: the plugin, its versions, the devices."""

import torch

import torch_tpu


def main():
    print(f"torch_tpu plugin choice: {torch_tpu._platform}")
    try:
        info = torch_tpu.plugin_info()
    except RuntimeError as e:
        print(f"error: {e}")
        raise SystemExit(1) from e
    print(f"plugin: {info['path']}")
    print(f"PJRT C API: plugin {info['pjrt_api_version']}, torch_tpu built against {info['pjrt_api_version_built']}")
    print(f"platform: {info['platform_name']} {info['platform_version']}")
    for key in ("xla_version", "stablehlo_current_version", "stablehlo_minimum_version"):
        if key in info["attributes"]:
            print(f"{key}: {info['attributes'][key]}")
    print(f"torch: {torch.__version__}")
    print(f"devices: {torch.tpu.device_count()}")
    for i, kind in enumerate(info["device_kinds"]):
        print(f"  tpu:{i}  {kind}")
    directory = torch_tpu.cache_stats()["disk"]["directory"]
    print(
        f"compilation cache: memory, then disk at {directory}"
        if directory
        else "compilation cache: memory only (TORCH_TPU_CACHE_DIR=off)"
    )
    print(f"native ATen overloads: {len(torch_tpu.lowered_ops())}")


if __name__ == "__main__":
    main()
