"""Estimates written beside every render: hourly cost (cost.md) and `pulumi up` duration (timeline.md)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml


@functools.cache  # read once per process, however many stacks render
def load_table(path: Path) -> dict[str, Any]:
    """One of the dated YAML tables beside this module (prices, durations)."""
    return yaml.safe_load(path.read_text())


def minutes(seconds: float) -> str:
    """Seconds as the estimates print them: ``7.5 min``."""
    return f"{seconds / 60:.1f} min"
