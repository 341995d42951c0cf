"""The Pulumi program: read the stack's config once, check it whole, build its scenario."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from stacks import SCENARIOS
from stacks.config import StackConfig, load_config


def namespace_values(project: str) -> dict[str, Any]:
    """Every config value of the project's namespace (without the ``project:`` prefix).

    The CLI hands config over either in ``PULUMI_CONFIG`` or through ``set_all_config``; both are merged.
    """
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{project}:"
    return {k[len(prefix):]: v for k, v in merged.items() if k.startswith(prefix)}


def load_stack_config(raw: dict[str, Any], project: str, stack: str) -> StackConfig:
    """Parse ``raw`` and apply the scenario's whole-config checks; raises ``ConfigError``."""
    cfg = load_config(raw, project, stack)
    SCENARIOS[cfg.scenario].check(cfg)
    return cfg


def read_stack_config() -> StackConfig:
    project, stack = pulumi.get_project(), pulumi.get_stack()
    return load_stack_config(namespace_values(project), project, stack)


def build(cfg: StackConfig) -> None:
    SCENARIOS[cfg.scenario].build(cfg)
