"""Seed 004: GPU training that scales from zero, checkpoints in blob storage, predictions on a CPU pool."""

from __future__ import annotations

from stacks.azure_layer import build_azure_layer
from stacks.gpu_layer import build_gpu_software, build_workspace
from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError
from stacks.requirements import require_gpu_pool, require_storage_roles


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_storage_roles(cfg, "ckpt")
    if not any(g.pool.min_count == 0 for g in cfg.gpu_pools):
        raise ConfigError(f"{PROJECT}:gpuPools[0].minCount", cfg.gpu_pools[0].pool.min_count,
                          "scenario training-autoscale needs a GPU pool that scales from 0")
    if not cfg.cpu_pools:
        raise ConfigError(f"{PROJECT}:cpuPools", [], "scenario training-autoscale serves predictions on a CPU pool")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    software = build_gpu_software(cfg, layer)
    build_workspace(cfg, layer, software, namespace="training", inputs=())
