"""The one private Pulumi SDK internal the program uses, where no public API exists: every config value of a
namespace. ``pulumi.Config`` reads one known key at a time, and refusing unknown keys needs them all. The SDK is
pinned exactly (requirements); tests/test_architecture.py fails when a bump moves what this reads."""

from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config


def namespace_values(project: str) -> dict[str, Any]:
    """Every config value of the project's namespace, keys without the ``project:`` prefix (the CLI fills the
    store through ``PULUMI_CONFIG`` or ``set_all_config``)."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{project}:"
    return {k[len(prefix):]: v for k, v in merged.items() if k.startswith(prefix)}
