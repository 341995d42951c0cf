"""Checks a scenario makes on the whole config before anything is declared (one line per failure)."""

from __future__ import annotations

from stacks.config import PROJECT, StackConfig
from stacks.config_reader import ConfigError


def require_gpu_pool(cfg: StackConfig) -> None:
    if not cfg.gpu_pools:
        raise ConfigError(f"{PROJECT}:gpuPools", [], f"scenario {cfg.scenario} needs at least one GPU pool")


def require_registry(cfg: StackConfig) -> None:
    if not cfg.registry.enabled:
        raise ConfigError(f"{PROJECT}:registry.enabled", False,
                          f"scenario {cfg.scenario} builds images into the stack's registry; set it true")


def require_storage_roles(cfg: StackConfig, *roles: str) -> None:
    have = [a.role for a in cfg.storage.accounts]
    missing = [r for r in roles if r not in have]
    if missing:
        raise ConfigError(f"{PROJECT}:storage.accounts", have,
                          f"scenario {cfg.scenario} needs storage accounts with roles {', '.join(roles)}")


def require_gpu_operator(cfg: StackConfig) -> None:
    if not cfg.addons.gpu_operator:
        raise ConfigError(f"{PROJECT}:addons.gpuOperator", False,
                          f"scenario {cfg.scenario} requests nvidia.com/gpu, which the operator's device plugin "
                          "advertises; set it true")
