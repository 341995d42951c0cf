"""Command-line tools the tests run that pip installs beside the interpreter (not always on PATH)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def venv_tool(name: str) -> str:
    """Path of ``name`` from this interpreter's environment, else from PATH; fails the test if neither has it."""
    binary = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert binary, f"{name} is installed by the dev group (pyproject.toml)"
    return binary
