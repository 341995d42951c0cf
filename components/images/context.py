"""A Docker build context as files and one content digest.

The digest names the image tag, so an unchanged folder never rebuilds
and any changed byte does. `.dockerignore` is honoured the way Docker reads it: patterns in
order, the last one that matches a path (or one of its parent folders) decides, `!` re-includes.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def ignore_rules(text: str) -> list[tuple[bool, str]]:
    """(excluded?, pattern) per meaningful line of a .dockerignore."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:].strip() if negated else line
        rules.append((not negated, str(PurePosixPath(pattern.lstrip("/")))))
    return rules


def is_excluded(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether ``path`` (relative, POSIX) stays out of the context."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for exclude, pattern in rules:
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            excluded = exclude
    return excluded


@dataclass(frozen=True)
class BuildContext:
    directory: str
    """The context folder, relative to the project root (what ``pulumi up`` runs in)."""
    files: tuple[str, ...]
    """Files sent to the builder, relative POSIX paths, sorted."""
    digest: str
    """sha256 over every file's path, executable bit and content."""

    @property
    def tag(self) -> str:
        """An immutable, content-derived image tag."""
        return self.digest[:16]

    @property
    def path(self) -> Path:
        return PROJECT_ROOT / self.directory


def load_context(directory: str) -> BuildContext:
    """Read the context folder ``directory`` (relative to the project root)."""
    root = PROJECT_ROOT / directory
    if not (root / "Dockerfile").is_file():
        raise FileNotFoundError(f"build context {directory}: no Dockerfile")
    ignore = root / ".dockerignore"
    rules = ignore_rules(ignore.read_text()) if ignore.is_file() else []
    files = tuple(sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and not is_excluded(path.relative_to(root).as_posix(), rules)
    ))
    digest = hashlib.sha256()
    for name in files:
        source = root / name
        digest.update(f"{name}\0{int(bool(source.stat().st_mode & 0o111))}\0".encode())
        digest.update(hashlib.sha256(source.read_bytes()).digest())
    return BuildContext(directory=directory, files=files, digest=digest.hexdigest())
