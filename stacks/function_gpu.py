"""Seed 000: a PyTorch Azure Function on a GPU node pool, image built into the stack's ACR."""

from __future__ import annotations

import pulumi

from components.gpu_function import GpuFunction, GpuFunctionArgs
from stacks import outputs
from stacks.azure_layer import build_azure_layer
from stacks.config import StackConfig
from stacks.gpu_layer import build_gpu_software, k8s_opts
from stacks.images import build_images
from stacks.requirements import require_gpu_operator, require_gpu_pool, require_registry

FUNCTION_FOLDER = "docker/function"


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_gpu_operator(cfg)


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    image = build_images(cfg, layer, {"function": FUNCTION_FOLDER})["function"]
    pool_name = cfg.function.pool or cfg.gpu_pools[0].pool.name
    function = GpuFunction("function", GpuFunctionArgs(
        pool=layer.gpu_pools[pool_name],
        image=image.image_ref,
        exposure=cfg.function.exposure,
        allowed_source_ranges=cfg.function.allowed_source_ranges,
        max_context_chars=cfg.function.max_context_chars,
        wait_for=[software.operator.release],
    ), opts=k8s_opts(layer))
    pulumi.export(outputs.FUNCTION_IMAGE, image.image_ref)
    pulumi.export(outputs.FUNCTION_BASE_URL, function.base_url)
    pulumi.export(outputs.FUNCTION_STATUS_URL, function.status_url)
