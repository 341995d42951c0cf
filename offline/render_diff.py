"""What a change does to the offline render: the diff of each stack's summary, estimates, manifests and Helm
values (``python -m offline render-diff BASE_OUT HEAD_OUT [--stacks]``; both are `make render` folders)."""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import Any

import yaml

from offline.stack_files import SAFE_LOADER

COMPARED = ("summary.md", "urns.txt", "resources.json", "cost.md", "timeline.md")
MAX_LINES = 400
"""Per-stack cap on diff lines in the summary (GitHub limits a job summary to 1 MiB)."""


def compared_files(root: Path, stack: str) -> dict[str, str]:
    folder = root / stack
    if not folder.is_dir():
        return {}
    names = [n for n in COMPARED if (folder / n).is_file()]
    names += sorted(str(p.relative_to(folder)) for p in folder.glob("manifests/*.yaml"))
    names += sorted(str(p.relative_to(folder)) for p in folder.glob("helm/*.yaml"))
    return {name: (folder / name).read_text() for name in names}


def _typed(value: Any) -> Any:
    """``value`` with each scalar's and key's type beside it: Python's ``==`` takes ``true`` for ``1``, the engine
    does not (a bool and a number are different protobuf Values)."""
    if isinstance(value, dict):
        return {_typed(k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value).__name__, value


def _meaning(name: str, text: str) -> Any:
    """What a file says: its typed data for YAML and JSON, its text otherwise (and for a file that does not parse,
    which then counts as changed). Files that say the same are no change to preview or deploy, whatever emitter wrote
    them: a base rendered by older code folds long strings differently."""
    if not name.endswith((".yaml", ".json")):
        return text
    try:
        data = json.loads(text) if name.endswith(".json") else yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 (safe)
    except (ValueError, yaml.YAMLError):
        return text
    return _typed(data)


def _changed_files(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The files ``new`` adds, drops or changes against ``old``, by what they say."""
    return [name for name in sorted(set(old) | set(new))
            if name not in old or name not in new
            or (old[name] != new[name] and _meaning(name, old[name]) != _meaning(name, new[name]))]


def changed_stacks(base: Path, head: Path) -> list[str]:
    stacks = sorted({p.name for p in base.iterdir() if p.is_dir()} | {p.name for p in head.iterdir() if p.is_dir()})
    return [s for s in stacks if _changed_files(compared_files(base, s), compared_files(head, s))]


def stack_diff(base: Path, head: Path, stack: str) -> list[str]:
    old, new = compared_files(base, stack), compared_files(head, stack)
    lines: list[str] = []
    for name in _changed_files(old, new):
        if name == "resources.json":
            continue  # resources.json is the source of the other files; its diff would repeat them
        lines += difflib.unified_diff(old.get(name, "").splitlines(), new.get(name, "").splitlines(),
                                      f"base/{stack}/{name}", f"head/{stack}/{name}", lineterm="", n=2)
    return lines


def markdown(base: Path, head: Path) -> str:
    stacks = changed_stacks(base, head)
    if not stacks:
        return "## Render diff\n\nNo stack's render changed.\n"
    out = ["## Render diff", "", f"Changed stacks: {', '.join(f'`{s}`' for s in stacks)}", ""]
    for stack in stacks:
        lines = stack_diff(base, head, stack)
        shown = lines[:MAX_LINES]
        out += [f"<details><summary><code>{stack}</code>: {len(lines)} diff lines</summary>", "", "```diff",
                *shown, "```"]
        if len(lines) > MAX_LINES:
            out.append(f"({len(lines) - MAX_LINES} more lines in the render artifact)")
        out += ["", "</details>", ""]
    return "\n".join(out) + "\n"


def render_diff_command(args: argparse.Namespace) -> int:
    print(json.dumps(changed_stacks(args.base, args.head)) if args.stacks else markdown(args.base, args.head), end="")
    return 0
