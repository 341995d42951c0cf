"""Seed 000: a PyTorch Azure Function on a GPU node pool, image in the stack's ACR."""

from __future__ import annotations

from stacks.azure_layer import build_azure_layer
from stacks.gpu_layer import build_gpu_software
from stacks.config import StackConfig
from stacks.requirements import require_gpu_pool, require_registry


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    build_gpu_software(cfg, layer)
