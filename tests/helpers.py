"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

from typing import Any

from offline.render import Render, render_namespace
from offline.stack_files import project_defaults, stack_files, stack_namespace


def render_with(stack: str = "t", **config: Any) -> Render:
    """Render a stack whose file would hold ``config`` (keys without ``aksgpu:``), Pulumi.yaml defaults first."""
    return render_namespace(stack, {**project_defaults(), **config})


def stack_config_of(stack: str) -> dict[str, Any]:
    """A committed stack's config namespace, to render variants of it with ``render_with``."""
    return stack_namespace(stack_files()[stack])
