"""Estimates written beside every render: hourly cost (cost.md) and `pulumi up` duration (timeline.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from offline.stack_files import SAFE_LOADER

FOLDER = Path(__file__).parent
"""The dated tables the estimates read (prices, durations, image sizes), which ``python -m ops`` refreshes."""


@functools.cache  # read once per process, however many stacks render
def load_table(path: Path) -> dict[str, Any]:
    """One of the dated YAML tables beside this module (prices, durations)."""
    return yaml.load(path.read_text(), Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)


def minutes(seconds: float) -> str:
    """Seconds as the estimates print them: ``7.5 min``."""
    return f"{seconds / 60:.1f} min"


@dataclass(frozen=True)
class Step:
    """One resource on the `pulumi up` schedule: when it starts and finishes, and where its duration comes from."""

    name: str
    type: str
    seconds: float
    source: str
    start: float
    finish: float
