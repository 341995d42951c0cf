"""Seed 001: several GPU workloads sharing one GPU through the device plugin instead of NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

from stacks.azure_layer import build_azure_layer
from stacks.gpu_layer import build_gpu_software
from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError
from stacks.requirements import require_gpu_pool, require_registry

MIN_SHARED_REPLICAS = 3
"""Two inference services and a notebook each take one share of the GPU."""


def check(cfg: StackConfig) -> None:
    require_gpu_pool(cfg)
    require_registry(cfg)
    shared = [g for g in cfg.gpu_pools
              if g.sharing.mode in ("time-slicing", "mps") and g.sharing.replicas >= MIN_SHARED_REPLICAS]
    if not shared:
        raise ConfigError(f"{PROJECT}:gpuPools[0].sharing", cfg.gpu_pools[0].sharing.mode,
                          f"scenario gpu-sharing needs a pool with sharing time-slicing or mps and replicas >= "
                          f"{MIN_SHARED_REPLICAS}")


def build(cfg: StackConfig) -> None:
    layer = build_azure_layer(cfg)
    build_gpu_software(cfg, layer)
