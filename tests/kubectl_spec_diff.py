"""kubectl diff's external differ for the cluster tests (KUBECTL_EXTERNAL_DIFF): the live and merged objects compared
without their ``status``, which the object's controller may change between kubectl's read and its dry run (a Job's
pod counts, a queued Job's conditions). Anything else that differs — spec, labels, annotations, generation — is printed
as a unified diff; exit 1 then, 0 when nothing does (kubectl's own convention)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import yaml


def without_status(path: Path) -> list[str]:
    if not path.exists():
        return []
    found = yaml.safe_load(path.read_text()) or {}
    found.pop("status", None)
    return yaml.safe_dump(found, sort_keys=True).splitlines(keepends=True)


def main(live: str, merged: str) -> int:
    changed = 0
    names = sorted({p.name for p in Path(live).iterdir()} | {p.name for p in Path(merged).iterdir()})
    for name in names:
        before, after = without_status(Path(live) / name), without_status(Path(merged) / name)
        if before != after:
            changed = 1
            sys.stdout.writelines(difflib.unified_diff(before, after, f"live/{name}", f"merged/{name}"))
    return changed


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
