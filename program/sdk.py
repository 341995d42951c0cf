"""The one private Pulumi SDK internal the program uses, where no public API exists: every config value of the
stack. ``pulumi.Config`` reads one known key at a time, and refusing unknown keys needs them all. The SDK is
pinned exactly (requirements); tests/test_architecture.py fails when a bump moves what this reads."""

from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config


def _all_values() -> dict[str, Any]:
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


def namespace_values(project: str) -> dict[str, Any]:
    """Every config value of the project's namespace, keys without the ``project:`` prefix (the CLI fills the
    store through ``PULUMI_CONFIG`` or ``set_all_config``)."""
    prefix = f"{project}:"
    return {k[len(prefix):]: v for k, v in _all_values().items() if k.startswith(prefix)}


def other_values(project: str, secret: str) -> dict[str, Any]:
    """Every config value outside the project's namespace, by its full key; a secret's value (which the CLI hands
    over decrypted) as ``secret``, so no check can print it."""
    prefix = f"{project}:"
    return {k: secret if runtime_config.is_config_secret(k) else v for k, v in _all_values().items()
            if not k.startswith(prefix)}
