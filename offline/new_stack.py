"""A new environment: a stack file for an existing scenario, made from one that runs it, checked like any stack
file, with the generated docs brought up to date (``python -m offline new-stack NAME --like STACK``)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from offline.cli import error
from offline.stack_files import REPO_ROOT, read_yaml, stack_config, stack_files
from program.config.errors import ConfigError
from program.config.keys import PROJECT

SETTINGS = ("nameRoot", "owner", "lifetime")
"""What a new environment usually changes first; anything else is edited in the file afterwards."""


def _set(text: str, key: str, value: str) -> str:
    """``text`` with ``PROJECT:key`` set to ``value``: its line replaced, or one added under ``config:``."""
    line = f"  {PROJECT}:{key}: {json.dumps(value)}"  # quoted: a '#' or ': ' in a value stays in it
    pattern = re.compile(rf"^  {PROJECT}:{key}:.*$", re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    return re.sub(r"^config:\n", f"config:\n{line}\n", text, count=1, flags=re.MULTILINE)


def new_stack_file(name: str, like: str, settings: dict[str, str], root: Path = REPO_ROOT) -> Path:
    """Write ``Pulumi.<name>.yaml`` from ``like``'s file with ``settings`` (SETTINGS keys) set, and check it; a file
    that does not load is removed again and its error raised."""
    files = stack_files(root)
    target = root / f"Pulumi.{name}.yaml"
    if target.exists():
        raise ValueError(f"{target.name} already exists")
    if like not in files:
        raise ValueError(f"no stack {like!r} to start from; stacks: {', '.join(sorted(files))}")
    text = files[like].read_text()
    scenario = read_yaml(files[like])["config"].get(f"{PROJECT}:scenario", like)
    schema, _, rest = text.partition("\n") if text.startswith("# yaml-language-server") else ("", "", text)
    note = f"# {name}: an environment of scenario {scenario}, from Pulumi.{like}.yaml (python -m offline new-stack)."
    text = "\n".join(filter(None, [schema, note, rest]))
    for key, value in settings.items():
        text = _set(text, key, value)
    target.write_text(text)
    try:
        stack_config(name, target)
    except ConfigError:
        target.unlink()
        raise
    return target


def new_stack_command(args: argparse.Namespace) -> int:
    from offline.docs import write_docs
    settings = {k: v for k, v in (("nameRoot", args.name_root), ("owner", args.owner), ("lifetime", args.lifetime))
                if v is not None}
    try:
        path = new_stack_file(args.name, args.like, settings)
    except ValueError as e:
        return error(str(e))
    updated = write_docs()
    print(f"wrote {path.name}; regenerated {', '.join(map(str, updated)) or 'no docs (none changed)'}")
    print(f"next: review and commit them; deploy with `pulumi stack select --create {args.name}` and `pulumi up "
          f"--policy-pack policy`, or the deploy workflow with stack {args.name}, whose environment needs its "
          "federated credential (python -m ops ci-setup prints it)")
    return 0
