"""Seed 003: AV re-simulation on a private cluster with private ACR and input/output blob storage."""

from __future__ import annotations

from stacks.azure_layer import build_azure_layer
from stacks.gpu_layer import build_gpu_software, build_workspace
from stacks.config import StackConfig
from stacks.requirements import require_gpu_pool, require_registry, require_storage_roles


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    require_storage_roles(cfg, "input", "output")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    build_workspace(cfg, layer, software, namespace="av-resim", inputs=("input",))
