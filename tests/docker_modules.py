"""Import a module of an image's code the way its container runs it: from its own folder under docker/."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

DOCKER_DIR = Path(__file__).resolve().parents[1] / "docker"


def import_from(folder: str, name: str):
    path = str(DOCKER_DIR / folder)
    sys.path.insert(0, path)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(path)
