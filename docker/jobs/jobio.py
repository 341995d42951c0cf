"""What the job scripts share about files in mounted volumes: listing inputs, writing a result atomically, and
clearing what a killed attempt left half-written. A blob volume can lose a pod at any moment (spot eviction), so
a result is written to a temporary name and renamed: readers never see half a file, and a rerun skips what is done."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path


def input_files(root: Path) -> list[str]:
    """Every file below ``root`` (hidden ones aside), as sorted relative POSIX paths."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def write_atomic(path: Path, payload: dict) -> None:
    """``payload`` as JSON at ``path``, written under a temporary name and renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    tmp.write_text(json.dumps(payload, sort_keys=True) + "\n")
    os.replace(tmp, path)


def remove_partials(targets: list[Path]) -> int:
    """Temporary files an earlier, killed attempt at ``targets`` left behind; how many were removed."""
    removed = 0
    for target in targets:
        for leftover in target.parent.glob(f".{target.name}.tmp-*") if target.parent.is_dir() else []:
            leftover.unlink(missing_ok=True)
            removed += 1
    return removed
